"""The caps on worker streams (``gateway.connections``): what is counted,
what a reconnect may pass, and the settings that set them."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tickwheel_server.config import ConfigError, load_server_config
from tickwheel_server.gateway.connections import Connections, StreamCaps, StreamRefused, WorkerConnection
from tickwheel_server.store.credentials import WorkerCredential

from .policy.test_breaker import CONFIG_ENV, server_args


def credential(name: str) -> WorkerCredential:
    return WorkerCredential(id=name, tenants=("acme",), handlers=(), http=False, description="",
                            created_at=datetime(2026, 12, 6, tzinfo=timezone.utc))


def stream(credential_id: str, worker_id: str, slots: int = 1) -> WorkerConnection:
    return WorkerConnection(worker_id=worker_id, credential=credential(credential_id), handlers=frozenset({"echo"}),
                            http=False, slots=slots, connected_at=datetime(2026, 12, 6, tzinfo=timezone.utc))


def test_hellos_under_way_count_so_a_wave_of_them_cannot_pass_the_cap() -> None:
    connections = Connections(StreamCaps(max_streams_per_credential=2))
    first, second = stream("wc1", "a"), stream("wc1", "b")
    connections.reserve(first)
    connections.reserve(second)  # neither registered yet: their hellos are being answered
    with pytest.raises(StreamRefused, match="max_streams_per_credential = 2"):
        connections.reserve(stream("wc1", "c"))
    connections.reserve(stream("wc2", "c"))  # another credential's
    connections.release(second)
    connections.release(second)  # idempotent
    connections.reserve(stream("wc1", "c"))
    assert connections.held_by("wc1") == (2, 2) and connections.refused == 1


def test_a_reconnect_replaces_its_stream_past_a_full_cap_one_hello_at_a_time() -> None:
    connections = Connections(StreamCaps(max_streams=2, max_slots_per_credential=10))
    old = stream("wc1", "a", slots=6)
    connections.reserve(old)
    connections.add(old)
    connections.reserve(other := stream("wc2", "b"))
    connections.add(other)
    again = stream("wc1", "a", slots=6)
    connections.reserve(again)  # the server is full, but this one replaces "a" (its 6 slots too)
    with pytest.raises(StreamRefused, match="max_worker_streams = 2"):
        connections.reserve(stream("wc1", "a"))  # a second hello of "a" under way passes nothing
    assert connections.add(again) is old and old.closed.is_set()
    connections.release(old)  # the old stream's end
    assert connections.held_by("wc1") == (1, 6)
    connections.release(other)
    with pytest.raises(StreamRefused, match=r"state 6 slots; 5 more .*max_slots_per_credential = 10"):
        connections.reserve(stream("wc1", "z", slots=5))


def test_the_caps_come_from_defaults_environment_and_flags() -> None:
    config = load_server_config(server_args(), CONFIG_ENV)
    assert config.stream_caps == StreamCaps(4000, 1000, 50_000)
    config = load_server_config(server_args("--max-worker-streams", "10", "--max-slots-per-credential", "99"),
                                {**CONFIG_ENV, "TICKWHEEL_MAX_STREAMS_PER_CREDENTIAL": "3"})
    assert config.stream_caps == StreamCaps(10, 3, 99)


@pytest.mark.parametrize(("flag", "value"), [("--max-worker-streams", "0"), ("--max-streams-per-credential", "-1"),
                                             ("--max-slots-per-credential", "10000001")])
def test_a_cap_out_of_bounds_stops_the_server_naming_it(flag, value) -> None:
    with pytest.raises(ConfigError, match=rf"\({flag}\): must be between 1 and"):
        load_server_config(server_args(flag, value), CONFIG_ENV)


def test_a_streams_capability_is_made_once_and_again_when_a_field_it_reads_is_replaced() -> None:
    connection = WorkerConnection("w1", WorkerCredential(
        id="c1", tenants=("globex", "acme"), handlers=("mail", "echo"), http=True, description="",
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    ), frozenset({"echo", "mail", "sms"}), True, 1, datetime(2026, 1, 1, tzinfo=timezone.utc))  # fmt: skip
    first = connection.capability
    assert (first.tenants, first.handlers, first.http) == (("acme", "globex"), ("echo", "mail"), True)
    assert connection.capability is first, "every round reads it: made once"
    connection.credential = WorkerCredential(
        id="c9", tenants=("initech",), handlers=(), http=False, description="",
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )
    again = connection.capability
    assert (again.tenants, again.handlers, again.http) == (("initech",), ("echo", "mail", "sms"), False)
    connection.handlers = frozenset({"echo"})
    assert connection.capability.handlers == ("echo",)
