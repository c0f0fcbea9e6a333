"""The Assignment a worker receives for one hand-out: built in place in a
batch at the deal, or built ahead as wire bytes (an armed execution) and
only completed at the deal.

An armed execution's Assignment is known seconds before its instant except
for what its sending decides: ``deadline_at`` (the send instant plus the
job's timeout) and ``traceparent`` (a span the deal opens). :func:`prebuild`
serializes the rest when it is armed; :class:`PrebuiltBatches` appends the
two fields at the deal and gives each worker its batch with one parse of
the concatenated bytes. Protobuf's wire format allows both: a message's
fields may come in any order, and a ``repeated`` field's elements are
concatenated length-delimited records.
"""

from __future__ import annotations

from google.protobuf import timestamp_pb2

from tickwheel.v1 import worker_pb2

from tickwheel.shared.ids import set_timestamp_us

from ..jobspec import NO_DEFINITION
from ..store.executions import HandedOut
from ..wire import EXECUTION_ORIGIN_TO_PROTO, varint

_ASSIGNMENT_ITEM = b"\x0a"
"""``Assignments.assignments`` (field 1, length-delimited)."""
_ASSIGNMENT_BATCH = b"\x12"
"""``PullResponse.assignment`` (field 2, length-delimited)."""
_DEADLINE_AT = b"\x52"
"""``Assignment.deadline_at`` (field 10, length-delimited)."""
_TRACEPARENT = b"\x5a"
"""``Assignment.traceparent`` (field 11, length-delimited)."""
_TARGET = b"\x4a"
"""``Assignment.target`` (field 9, length-delimited)."""
_NOMINAL_AT = b"\x22"
"""``Assignment.nominal_at`` (field 4, length-delimited)."""
_DUE_AT = b"\x2a"
"""``Assignment.due_at`` (field 5, length-delimited)."""


def timestamp_field(tag: bytes, micros: int, fields: dict[tuple[bytes, int], bytes]) -> bytes:
    """The Timestamp field ``tag`` set to ``micros`` since the epoch (as
    :func:`set_timestamp_us` sets it), encoded: from ``fields``, the memo
    of one deal, or encoded once into it. A deal's assignments share a few
    instants (a burst's due instant, one deadline per job timeout)."""
    field = fields.get((tag, micros))
    if field is None:
        stamp = timestamp_pb2.Timestamp()
        set_timestamp_us(stamp, micros)
        encoded = stamp.SerializeToString()
        field = fields[tag, micros] = tag + varint(len(encoded)) + encoded
    return field


def add_assignment(
    batch: worker_pb2.PullResponse, handed: HandedOut, now_us: int,
    stamps: dict[tuple[bytes, int], bytes] | None = None,
) -> worker_pb2.Assignment:
    """Add to ``batch`` the assignment a worker receives for one hand-out
    (``now_us``: when it is sent, which starts its run time limit). Built
    in place in the batch: an Assignment built apart is copied whole when
    it is put in one. ``stamps``: the deal's memo of encoded instants
    (:func:`timestamp_field`), shared by its assignments."""
    definition = handed.definition or NO_DEFINITION  # the job was deleted while it was ready
    assignment = batch.assignment.assignments.add(
        execution_id=handed.id,
        job_id=handed.job_id,
        tenant=handed.tenant,
        attempt=handed.attempt,
        delivery=handed.delivery,
        payload=handed.payload,
        missed_count=handed.missed_count,
        origin=EXECUTION_ORIGIN_TO_PROTO.get(handed.origin, 0),
    )
    # The target as its definition serialized it once, and the instants as
    # the deal encoded them once, in one parse: it costs less than copying
    # the target field by field and setting each instant's two fields, and
    # sets each field even when empty, as ``target=`` and
    # :func:`set_timestamp_us` do.
    if stamps is None:
        stamps = {}
    assignment.MergeFromString(
        _TARGET + definition.target_delimited + timestamp_field(_NOMINAL_AT, handed.nominal_at_us, stamps)
        + timestamp_field(_DUE_AT, handed.due_at_us, stamps)
        + timestamp_field(_DEADLINE_AT, now_us + definition.timeout_us, stamps)
    )
    return assignment


def prebuild(handed: HandedOut) -> bytes:
    """``handed``'s Assignment without ``deadline_at`` and ``traceparent``,
    serialized: what :meth:`PrebuiltBatches.add` completes at the deal.
    Built alone (no batch to build it in, no deadline to clear): the same
    fields as :func:`add_assignment` sets, checked by
    tests/unit/test_assignments.py."""
    definition = handed.definition or NO_DEFINITION
    assignment = worker_pb2.Assignment(
        execution_id=handed.id,
        job_id=handed.job_id,
        tenant=handed.tenant,
        attempt=handed.attempt,
        delivery=handed.delivery,
        payload=handed.payload,
        target=definition.target,
        missed_count=handed.missed_count,
        origin=EXECUTION_ORIGIN_TO_PROTO.get(handed.origin, 0),
    )
    set_timestamp_us(assignment.nominal_at, handed.nominal_at_us)
    set_timestamp_us(assignment.due_at, handed.due_at_us)
    return assignment.SerializeToString()


class PrebuiltBatches:
    """One deal's prebuilt assignments, per receiver, sent at ``now_us``."""

    __slots__ = ("_now_us", "_deadlines", "_parts")

    def __init__(self, now_us: int) -> None:
        self._now_us = now_us
        self._deadlines: dict[tuple[bytes, int], bytes] = {}
        """Encoded ``deadline_at`` fields (:func:`timestamp_field`): one per job timeout in a deal."""
        self._parts: dict[object, list[bytes]] = {}

    def _deadline(self, timeout_us: int) -> bytes:
        return timestamp_field(_DEADLINE_AT, self._now_us + timeout_us, self._deadlines)

    def add(self, receiver: object, handed: HandedOut, prebuilt: bytes, traceparent: str = "") -> None:
        """Queue for ``receiver`` the assignment ``prebuilt`` (from
        :func:`prebuild` of ``handed``) with its deadline from the send
        instant and ``traceparent`` if any."""
        item = prebuilt + self._deadline((handed.definition or NO_DEFINITION).timeout_us)
        if traceparent:
            encoded = traceparent.encode()
            item += _TRACEPARENT + varint(len(encoded)) + encoded
        parts = self._parts.get(receiver)
        if parts is None:
            parts = self._parts[receiver] = []
        parts.append(_ASSIGNMENT_ITEM + varint(len(item)) + item)

    def merge_into(self, receiver: object, batch: worker_pb2.PullResponse) -> None:
        """Append ``receiver``'s queued assignments to ``batch`` (one parse)."""
        parts = self._parts.pop(receiver, None)
        if parts:
            inner = b"".join(parts)
            batch.MergeFromString(_ASSIGNMENT_BATCH + varint(len(inner)) + inner)
