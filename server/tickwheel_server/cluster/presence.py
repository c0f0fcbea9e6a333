"""What a server tells the cluster about itself: its record under
``/tickwheel/servers/<server id>``.

The key is written under the server's etcd session, so it exists exactly
while the server is alive (the reaper reads only that: the key's lease).
Its value is a :class:`ServerRecord` as JSON: where the server is reached,
its version and start, and its figures as last published (partitions
owned, timer-wheel size, workers, clock skew against the database,
draining). Each server knows its own clock skew only, so publishing it is
how ClusterStatus on any server shows every server's.

:class:`Presence` rewrites the record every ``interval`` (default 10 s) and
on demand (:meth:`Presence.publish`, after a drain or a new session): one
etcd write per server per interval, whatever the execution rate. A record
from a server that predates a field reads that field as unknown (``None``)
or zero.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import to_us

from ..dispatcher.ownership import OwnershipConfig
from ..lease import KeyValue, LeaseStore, LeaseStoreError, Session
from ..lease.keys import (
    REAPER_KEY, SERVERS_PREFIX, partition_of, partitions_prefix, server_key, server_of, session_name,
)  # fmt: skip
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 10.0


@dataclass(frozen=True)
class ServerRecord:
    """One server as it last published itself."""

    server_id: str
    address: str = ""
    version: str = ""
    started_at_us: int | None = None
    partitions_owned: int = 0
    wheel_size: int = 0
    workers: int = 0
    clock_skew_us: int | None = None
    """Its clock minus the database's at its last check; None before the first."""
    draining: bool = False
    published_at_us: int | None = None
    session: str = ""
    """Its etcd session (hex), from the key's lease; not part of the value."""

    def to_json(self) -> str:
        value = asdict(self)
        del value["session"]
        return json.dumps(value, separators=(",", ":"))

    @classmethod
    def from_kv(cls, kv: KeyValue) -> "ServerRecord":
        """The record in ``kv`` (its session from the key's lease). Unknown
        fields are ignored and missing ones take their defaults, so servers
        of neighbouring releases read each other; a value that is not a JSON
        object gives a record with only the id (from the key)."""
        server_id = server_of(kv.key) or ""
        try:
            value = json.loads(kv.value)
        except ValueError:
            value = None
        known = {f.name for f in fields(cls)} - {"session", "server_id"}
        values = {k: v for k, v in value.items() if k in known} if isinstance(value, dict) else {}
        return cls(server_id=server_id, session=session_name(kv.lease) if kv.lease else "", **values)


class Presence:
    """Publishes this server's record and reads everyone's.

    ``session`` returns the server's current session (None or a lost one:
    nothing is written until there is a live one); ``record`` the record to
    publish now (its ``published_at_us`` is stamped here)."""

    def __init__(
        self,
        leases: LeaseStore,
        session: Callable[[], Session | None],
        clock: Clock,
        record: Callable[[], ServerRecord],
        *,
        interval: float = DEFAULT_INTERVAL,
        ownership: OwnershipConfig | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self._leases = leases
        self._session = session
        self._clock = clock
        self._record = record
        self.outages = OutageLog(log, "presence", clock)
        self.interval = interval
        self._ownership_root = (ownership or OwnershipConfig()).key_prefix

    async def publish(self) -> bool:
        """Write the record now under the current session; False when there
        is no live session (the next session's first publish writes it).
        Raises :class:`~tickwheel_server.lease.LeaseStoreError` when etcd
        cannot be reached."""
        session = self._session()
        if session is None or session.lost.is_set():
            return False
        record = self._record()
        stamped = ServerRecord(**{**asdict(record), "published_at_us": to_us(self._clock.now())})
        await self._leases.put(server_key(record.server_id), stamped.to_json(), session=session)
        return True

    async def run(self) -> None:
        """Publish every ``interval`` until cancelled; an unreachable etcd
        is logged (:class:`~tickwheel_server.telemetry.outages.OutageLog`)
        and tried again at the next interval."""
        while True:
            await self._clock.sleep(self.interval)
            try:
                await self.publish()
            except LeaseStoreError as error:
                self.outages.failed("publishing this server's record", error)
            else:
                self.outages.ok()

    async def servers(self) -> list[ServerRecord]:
        """Every live server's record (one range read), by server id."""
        return [ServerRecord.from_kv(kv) for kv in await self._leases.get_prefix(SERVERS_PREFIX)]

    async def reaper(self) -> str:
        """The server id holding the reaper election, or '' when none does."""
        kv = await self._leases.get(REAPER_KEY)
        return kv.value.decode(errors="replace") if kv is not None else ""

    async def partition_holders(self) -> dict[int, str]:
        """Partition -> the server id holding its ownership key now (one
        range read); partitions nobody holds are absent."""
        holders: dict[int, str] = {}
        for kv in await self._leases.get_prefix(partitions_prefix(self._ownership_root)):
            partition = partition_of(kv.key, self._ownership_root)
            if partition is not None:
                holders[partition] = kv.value.decode(errors="replace")
        return holders
