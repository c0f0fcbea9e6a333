"""The lease store's key space (``lease/keys.py``): the rooms do not overlap,
so a prefix read or watch of one sees none of another's keys, and every
builder with a parser round-trips while the parsers refuse what is not
theirs."""

from __future__ import annotations

import pytest

from tickwheel_server.dispatcher.ownership import OwnershipConfig
from tickwheel_server.lease import keys

PREFIXES = {
    "servers": keys.SERVERS_PREFIX,
    "drains": keys.DRAINS_PREFIX,
    "members": keys.members_prefix(),
    "partitions": keys.partitions_prefix(),
    "wakes": keys.wakes_prefix(),
}
ELECTIONS = {"reaper": keys.REAPER_KEY, "retention": keys.RETENTION_KEY, "compaction": keys.COMPACTION_KEY}
SINGLE = {"revocations": keys.revocations_key()}
"""Keys that are neither a prefix nor an election: one key for the cluster."""


def test_every_key_is_under_the_root_and_every_prefix_ends_with_a_slash() -> None:
    for name, key in {**PREFIXES, **ELECTIONS, **SINGLE}.items():
        assert key.startswith(keys.ROOT) and key != keys.ROOT, name
    for name, prefix in PREFIXES.items():
        assert prefix.endswith("/"), name  # "servers/" must not also match "servers-old/..."
    for name, key in {**ELECTIONS, **SINGLE}.items():
        assert not key.endswith("/"), name
    assert len(set({**ELECTIONS, **SINGLE}.values())) == len(ELECTIONS) + len(SINGLE), "no two rooms share a key"


@pytest.mark.parametrize("room", sorted(PREFIXES))
def test_no_prefix_is_a_prefix_of_another_rooms_key(room: str) -> None:
    prefix = PREFIXES[room]
    for other, key in {**PREFIXES, **ELECTIONS, **SINGLE}.items():
        if other != room:
            assert not key.startswith(prefix), f"{other} ({key}) lies under {room} ({prefix})"


@pytest.mark.parametrize("room", sorted(PREFIXES))
def test_a_key_built_in_one_room_is_read_by_no_other(room: str) -> None:
    built = {
        "servers": keys.server_key("s1"),
        "drains": keys.drain_key("s1", "0123abcd"),
        "members": keys.member_key("s1"),
        "partitions": keys.partition_key(7),
        "wakes": keys.wake_key("s1"),
    }
    for other, prefix in PREFIXES.items():
        assert built[room].startswith(prefix) == (other == room), (room, other)
    assert keys.server_of(built[room]) == ("s1" if room == "servers" else None)
    assert keys.member_of(built[room]) == ("s1" if room == "members" else None)
    assert keys.partition_of(built[room]) == (7 if room == "partitions" else None)


@pytest.mark.parametrize("server_id", ["s1", "srv-b", "a.b_c", "x" * 200])
def test_server_and_member_keys_round_trip(server_id: str) -> None:
    assert keys.server_of(keys.server_key(server_id)) == server_id
    assert keys.member_of(keys.member_key(server_id)) == server_id
    root = "/test-7f3a/"
    assert keys.member_of(keys.member_key(server_id, root), root) == server_id
    assert keys.member_of(keys.member_key(server_id, root)) is None  # another cluster's root


@pytest.mark.parametrize("partition", [0, 1, 9, 10, 255, 4095])
def test_partition_keys_round_trip(partition: int) -> None:
    assert keys.partition_of(keys.partition_key(partition)) == partition
    root = "/test-7f3a/"
    assert keys.partition_of(keys.partition_key(partition, root), root) == partition
    assert keys.partition_of(keys.partition_key(partition, root)) is None


@pytest.mark.parametrize(
    ("key", "member", "partition"),
    [
        ("/tickwheel/members/", None, None),  # an empty id
        ("/tickwheel/members/s1/extra", None, None),  # deeper than a member key
        ("/tickwheel/partitions/", None, None),
        ("/tickwheel/partitions/-1", None, None),
        ("/tickwheel/partitions/1a", None, None),
        ("/tickwheel/partitions/\u00b2", None, None),  # a digit to str.isdigit(), not to int()
        ("/tickwheel/partitions/\u0663", None, None),  # an Arabic-Indic three
        ("/tickwheel/partitions/3/x", None, None),
        ("/tickwheel/membersx/s1", None, None),
        ("/tickwheel/servers/s1", None, None),
    ],
)
def test_parsers_refuse_what_is_not_theirs(key: str, member: str | None, partition: int | None) -> None:
    assert keys.member_of(key) == member
    assert keys.partition_of(key) == partition


def test_drain_requests_of_one_server_are_not_under_anothers_prefix() -> None:
    assert keys.drain_key("s1", "r").startswith(keys.drains_prefix("s1"))
    assert not keys.drain_key("s10", "r").startswith(keys.drains_prefix("s1"))
    assert not keys.drain_key("s1", "r").startswith(keys.drains_prefix("s10"))


def test_ownership_uses_this_key_space() -> None:
    config = OwnershipConfig()
    assert config.key_prefix == keys.ROOT
    assert config.member_key("s1") == keys.member_key("s1")
    assert config.partition_key(3) == keys.partition_key(3)
    assert (config.members_prefix, config.partitions_prefix) == (PREFIXES["members"], PREFIXES["partitions"])


def test_a_session_is_named_by_its_lease_id_in_hex() -> None:
    assert keys.session_name(0x694D7A1B2C3D4E5F) == "694d7a1b2c3d4e5f"
    assert keys.session_name(10) == "a"


@pytest.mark.parametrize("server_id", ["s1", "srv-b", "a.b_c", "host.example.com-4242", "x" * keys.MAX_SERVER_ID])
def test_a_server_id_that_names_a_server(server_id: str) -> None:
    assert keys.server_id_problem(server_id) is None


@pytest.mark.parametrize("server_id,problem", [
    ("", "required"),
    ("x" * (keys.MAX_SERVER_ID + 1), "at most"),
    ("a/b", "without '/'"),
    ("a ready", "whitespace"),  # would end a claim's wake put like a hand-out's (dispatcher/wakeup.py)
    ("a claim ready", "whitespace"),
    ("a\tb", "whitespace"),
    ("a\nb", "whitespace"),
    ("a\x00b", "printable"),
    ("a\u200bb", "printable"),
])
def test_a_server_id_that_cannot_name_a_server_is_refused(server_id: str, problem: str) -> None:
    found = keys.server_id_problem(server_id)
    assert found is not None and problem in found
