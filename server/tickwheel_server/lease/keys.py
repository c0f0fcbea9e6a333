"""The lease store's whole key space: every key and prefix Tickwheel reads or
writes in etcd (or the in-process lease store), with their builders and
parsers, and how a session is named in the job store.

::

    /tickwheel/servers/<server id>        a server is up: its presence record,
                                          under its session (Presence)
    /tickwheel/reaper                     the reaper's election (Reaper)
    /tickwheel/retention                  the retention runner's election
    /tickwheel/compaction                 the etcd compactor's election
                                          (EtcdCompaction)
    /tickwheel/drains/<server id>/<id>    a drain request to a server, and its
                                          answer (Drainer)
    <root>members/<server id>             a server takes part in partition
                                          ownership, under its session
    <root>partitions/<n>                  the owner of partition n; its create
                                          revision is the owner's fencing epoch
    <root>wakes/<server id>               a wake-up for the server: put (under the
                                          writer's session) when a write made
                                          something due before its next claim;
                                          one key per server (Wakeup)
    <root>revocations                     the credentials revoked latest: put
                                          (no lease) by the server that revoked,
                                          watched by every server; one key for
                                          the cluster (Revocations)

``<root>`` is the ownership's ``key_prefix``
(:class:`~tickwheel_server.dispatcher.ownership.OwnershipConfig`), :data:`ROOT`
unless a test gives each cluster its own. No prefix is a prefix of another
room's, and no election key lies under a prefix, so a prefix read or watch
sees one room's keys only (``tests/unit/test_lease_keys.py``).
"""

from __future__ import annotations

ROOT = "/tickwheel/"
"""Where every key lives; the default root of the ownership keys."""
SERVERS_PREFIX = ROOT + "servers/"
REAPER_KEY = ROOT + "reaper"
RETENTION_KEY = ROOT + "retention"
COMPACTION_KEY = ROOT + "compaction"
DRAINS_PREFIX = ROOT + "drains/"


MAX_SERVER_ID = 300
"""Characters a server id may have: a host name (at most 253) and a process id."""


def server_id_problem(server_id: str) -> str | None:
    """Why ``server_id`` cannot name a server (None: it can). It is a key's
    last part (no ``/``), the start of a wake put's value, whose kind
    follows after a space (:mod:`~tickwheel_server.dispatcher.wakeup`: no
    whitespace, so a server id never ends like a kind), and a log field
    (printable)."""
    if not server_id:
        return "required"
    if len(server_id) > MAX_SERVER_ID:
        return f"at most {MAX_SERVER_ID} characters"
    if "/" in server_id or any(c.isspace() or not c.isprintable() for c in server_id):
        return "printable, without '/' or whitespace"
    return None


def session_name(session_id: int) -> str:
    """How a session is written in ``executions.owner`` (and in drain requests): its lease id in hex."""
    return f"{session_id:x}"


# --------------------------------------------------------------------------- servers


def server_key(server_id: str) -> str:
    """The key of ``server_id``'s presence record."""
    return SERVERS_PREFIX + server_id


def server_of(key: str) -> str | None:
    """The server id of a presence key; None when ``key`` is not one."""
    if not key.startswith(SERVERS_PREFIX):
        return None
    return key[len(SERVERS_PREFIX) :]


# --------------------------------------------------------------------------- drains


def drains_prefix(server_id: str) -> str:
    """The prefix of the drain requests addressed to ``server_id``."""
    return f"{DRAINS_PREFIX}{server_id}/"


def drain_key(server_id: str, request_id: str) -> str:
    """The key of one drain request to ``server_id``."""
    return drains_prefix(server_id) + request_id


# --------------------------------------------------------------------------- partition ownership


def members_prefix(root: str = ROOT) -> str:
    """The prefix of the ownership members under ``root``."""
    return root + "members/"


def partitions_prefix(root: str = ROOT) -> str:
    """The prefix of the partition owners under ``root``."""
    return root + "partitions/"


def wakes_prefix(root: str = ROOT) -> str:
    """The prefix of the servers' wake-up keys under ``root``."""
    return root + "wakes/"


def wake_key(server_id: str, root: str = ROOT) -> str:
    """The key whose every put asks ``server_id`` to claim now (one key per
    server, never one per job)."""
    return wakes_prefix(root) + server_id


def revocations_key(root: str = ROOT) -> str:
    """The one key whose every put names credentials just revoked (its
    value: :mod:`~tickwheel_server.cluster.revocations`); never one key per
    credential."""
    return root + "revocations"


def member_key(server_id: str, root: str = ROOT) -> str:
    """The key that makes ``server_id`` an ownership member."""
    return members_prefix(root) + server_id


def partition_key(partition: int, root: str = ROOT) -> str:
    """The key of ``partition``'s owner."""
    return f"{partitions_prefix(root)}{partition}"


def member_of(key: str, root: str = ROOT) -> str | None:
    """The server id of a member key; None when ``key`` is not one (another
    prefix, an empty id, or a deeper key)."""
    prefix = members_prefix(root)
    if not key.startswith(prefix):
        return None
    member = key[len(prefix) :]
    return member if member and "/" not in member else None


def partition_of(key: str, root: str = ROOT) -> int | None:
    """The partition of an owner key; None when ``key`` is not one (its
    suffix is not ASCII decimal digits)."""
    prefix = partitions_prefix(root)
    if not key.startswith(prefix):
        return None
    suffix = key[len(prefix) :]
    # ASCII only: str.isdigit() also accepts digits int() refuses ("²").
    return int(suffix) if suffix.isascii() and suffix.isdigit() else None
