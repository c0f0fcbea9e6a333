"""Every skip reason the store records reaches the wire as its own enum value."""

from __future__ import annotations

from tickwheel.v1 import execution_pb2

from tickwheel_server.api.convert import SKIP_REASON_TO_PROTO
from tickwheel_server.policy.backlog import BACKLOG_REASON
from tickwheel_server.store.history import SKIP_REASONS


def test_each_stored_reason_has_its_own_value_on_the_wire() -> None:
    values = [SKIP_REASON_TO_PROTO.get(reason, execution_pb2.SKIP_REASON_UNSPECIFIED) for reason in SKIP_REASONS]
    assert execution_pb2.SKIP_REASON_UNSPECIFIED not in values and len(set(values)) == len(SKIP_REASONS)
    assert SKIP_REASON_TO_PROTO[BACKLOG_REASON] == execution_pb2.SKIP_REASON_BACKLOG
