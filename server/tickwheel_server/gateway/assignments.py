"""The Assignment a worker receives for one hand-out: written as wire bytes
at the deal (:func:`assignment_bytes`), or built ahead as wire bytes (an
armed execution) and only completed at the deal; either way each worker's
batch is made with one parse of its assignments' bytes.

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
from ..wire import EXECUTION_ORIGIN_TO_PROTO, int32_field as _int32, length_prefix as _length, varint

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


def timestamp_field(tag: bytes, micros: int, fields: dict[tuple, bytes]) -> bytes:
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


_EXECUTION_ID, _JOB_ID, _TENANT = b"\x0a", b"\x12", b"\x1a"
"""``Assignment.execution_id``, ``job_id``, ``tenant`` (fields 1-3, length-delimited)."""
_ATTEMPT, _DELIVERY, _PAYLOAD, _MISSED_COUNT, _ORIGIN = b"\x30", b"\x38", b"\x42", b"\x60", b"\x68"
"""``attempt`` (6), ``delivery`` (7), ``missed_count`` (12), ``origin`` (13): varints; ``payload`` (8)."""
def assignment_bytes(handed: HandedOut, now_us: int, memo: dict[tuple | str, bytes]) -> bytes:
    """The Assignment a worker receives for one hand-out (``now_us``: when
    it is sent, which starts its run time limit), serialized, without
    ``traceparent``: each field as protobuf writes it for the message built
    field by field (an empty string or 0 left out; the target, even empty,
    and the instants set), checked by tests/unit/test_assignments.py.
    A deal puts its assignments' bytes in each worker's batch with one
    parse (:class:`PrebuiltBatches`) rather than building each in the
    message. ``memo``: the deal's, by which a deal's assignments share the
    encoding of their instants and numbers (a burst's due instant, one
    deadline per job timeout, the first attempt's numbers) and of their
    tenants' field (by the tenant's name)."""
    definition = handed.definition or NO_DEFINITION  # never None from a store: see HandedOut.definition
    key = (handed.nominal_at_us, handed.due_at_us, now_us + definition.timeout_us, handed.attempt, handed.delivery,
           handed.missed_count, handed.origin)  # fmt: skip
    rest = memo.get(key)
    if rest is None:
        rest = memo[key] = b"".join((
            timestamp_field(_NOMINAL_AT, key[0], memo),
            timestamp_field(_DUE_AT, key[1], memo),
            timestamp_field(_DEADLINE_AT, key[2], memo),
            _int32(_ATTEMPT, handed.attempt),
            _int32(_DELIVERY, handed.delivery),
            _int32(_MISSED_COUNT, handed.missed_count),
            _int32(_ORIGIN, EXECUTION_ORIGIN_TO_PROTO.get(handed.origin, 0)),
        ))  # fmt: skip
    tenant = memo.get(handed.tenant)  # a str key: the memo's others are tuples
    if tenant is None:
        encoded = handed.tenant.encode()
        tenant = memo[handed.tenant] = _TENANT + _length(encoded) + encoded if encoded else b""
    ident, job_id, payload = handed.id.encode(), handed.job_id.encode(), handed.payload
    # Fields may come in any order: protobuf reads the same message.
    return b"".join((
        _EXECUTION_ID + _length(ident) + ident if ident else b"",
        _JOB_ID + _length(job_id) + job_id if job_id else b"",
        tenant,
        _PAYLOAD + _length(payload) + payload if payload else b"",
        _TARGET, definition.target_delimited,  # set even when empty, as ``target=`` sets it
        rest,
    ))  # fmt: skip


def add_assignment(
    batch: worker_pb2.PullResponse, handed: HandedOut, now_us: int,
    stamps: dict[tuple, bytes] | None = None,
) -> worker_pb2.Assignment:
    """Add to ``batch`` the assignment a worker receives for one hand-out
    (:func:`assignment_bytes`, parsed into it), and return it: for one
    assignment alone; a deal adds a batch's with one parse."""
    encoded = assignment_bytes(handed, now_us, {} if stamps is None else stamps)
    item = _ASSIGNMENT_ITEM + varint(len(encoded)) + encoded
    batch.MergeFromString(_ASSIGNMENT_BATCH + varint(len(item)) + item)
    return batch.assignment.assignments[-1]


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
    """One deal's assignments, per receiver, sent at ``now_us``: prebuilt
    ones completed (:meth:`add`) or built now (:meth:`build`), each
    receiver's put in its batch with one parse (:meth:`merge_into`)."""

    __slots__ = ("_now_us", "_deadlines", "_parts")

    def __init__(self, now_us: int) -> None:
        self._now_us = now_us
        self._deadlines: dict[tuple, bytes] = {}
        """Encoded instants (:func:`timestamp_field`): one ``deadline_at`` per job timeout in a
        deal, and the ``nominal_at`` and ``due_at`` of the assignments it builds."""
        self._parts: dict[object, list[bytes]] = {}

    def _deadline(self, timeout_us: int) -> bytes:
        return timestamp_field(_DEADLINE_AT, self._now_us + timeout_us, self._deadlines)

    def add(self, receiver: object, handed: HandedOut, prebuilt: bytes, traceparent: str = "") -> None:
        """Queue for ``receiver`` the assignment ``prebuilt`` (from
        :func:`prebuild` of ``handed``) with its deadline from the send
        instant and ``traceparent`` if any."""
        self._queue(receiver, prebuilt + self._deadline((handed.definition or NO_DEFINITION).timeout_us), traceparent)

    def build(self, receiver: object, handed: HandedOut, traceparent: str = "") -> None:
        """Queue for ``receiver`` the assignment of ``handed``, built now
        (:func:`assignment_bytes`), with ``traceparent`` if any."""
        self._queue(receiver, assignment_bytes(handed, self._now_us, self._deadlines), traceparent)

    def _queue(self, receiver: object, item: bytes, traceparent: str) -> None:
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
