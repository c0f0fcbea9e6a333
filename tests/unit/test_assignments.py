"""An armed execution's Assignment, built ahead (``prebuild``) and completed
at the deal (``PrebuiltBatches``), is the one built in place at the deal
(``add_assignment``): field for field, whatever the origin, payload, target
or missing definition."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.ids import set_timestamp_us
from tickwheel_server.gateway.assignments import PrebuiltBatches, add_assignment, assignment_bytes, prebuild
from tickwheel_server.jobspec import NO_DEFINITION, JobDefinition
from tickwheel_server.store.executions import HandedOut
from tickwheel_server.wire import EXECUTION_ORIGIN_TO_PROTO

SENT_US = 1_765_000_123_456_789


def definition(*, http: bool = False, timeout: int | None = None) -> JobDefinition:
    job = job_pb2.Job(name="j", schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *", time_zone="UTC")))
    if http:
        job.target.http.url = "https://example.com/hook"
    else:
        job.target.handler.name = "billing.charge"
    if timeout is not None:
        job.timeout.FromTimedelta(timedelta(seconds=timeout))
    return JobDefinition.parse("job_1", 1, job.SerializeToString())


CASES = [
    HandedOut("e1", "job_1", "acme", 3, "scheduled", 1_765_000_000_000_001, 1_765_000_000_500_000,
              1_765_000_000_500_000, 1, 1, b"payload", 0, definition(), 0, ""),
    HandedOut("e2", "job_1", "acme", 7, "trigger", 1_765_000_000_000_000, 1_765_000_001_000_000,
              1_765_000_002_000_000, 4, 9, b"", 12, definition(http=True, timeout=30), 0,
              "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    HandedOut("e3", "job_gone", "other", 0, "backfill", 0, 999_999, 999_999, 2, 2, b"\x00" * 300, 1, None, 0, ""),
    HandedOut("e4", "job_1", "acme", 1, "an origin not on the wire", 5, 6, 7, 1, 1, b"x", 0, definition(), 0, ""),
]


@pytest.mark.parametrize("handed", CASES, ids=[h.id for h in CASES])
def test_a_prebuilt_assignment_completed_at_the_deal_is_the_one_built_there(handed: HandedOut) -> None:
    built = worker_pb2.PullResponse()
    add_assignment(built, handed, SENT_US)
    completed = worker_pb2.PullResponse()
    batches = PrebuiltBatches(SENT_US)
    batches.add("worker", handed, prebuild(handed))
    batches.merge_into("worker", completed)
    assert completed == built
    [assignment] = completed.assignment.assignments
    assert assignment.execution_id == handed.id and assignment.payload == handed.payload
    assert not worker_pb2.Assignment.FromString(prebuild(handed)).HasField("deadline_at")  # set at the deal only


@pytest.mark.parametrize("handed", CASES, ids=[h.id for h in CASES])
def test_an_armed_rows_copies_change_one_field_each(handed: HandedOut) -> None:
    from tickwheel_server.store.executions import stamped, without_payload

    assert without_payload(handed) == handed._replace(payload=b"")
    assert stamped(handed, SENT_US) == handed._replace(handed_out_at_us=SENT_US)
    assert type(stamped(handed, 1)) is HandedOut and stamped(handed, 1).handed_out_at_us == 1


@pytest.mark.parametrize("handed", CASES, ids=[h.id for h in CASES])
def test_the_target_serialized_once_is_the_target_copied(handed: HandedOut) -> None:
    """``add_assignment`` sets the target from its definition's bytes
    serialized once: the field it makes is the one ``target=`` makes, byte
    for byte, its presence too when the target is empty (a deleted job's)."""
    built = worker_pb2.PullResponse()
    add_assignment(built, handed, SENT_US)
    [assignment] = built.assignment.assignments
    target = (handed.definition.target if handed.definition is not None else job_pb2.Target())
    assert assignment.HasField("target")
    assert assignment.target == target
    assert assignment.SerializeToString() == worker_pb2.Assignment(
        execution_id=assignment.execution_id, job_id=assignment.job_id, tenant=assignment.tenant,
        nominal_at=assignment.nominal_at, due_at=assignment.due_at, attempt=assignment.attempt,
        delivery=assignment.delivery, payload=assignment.payload, target=target,
        deadline_at=assignment.deadline_at, missed_count=assignment.missed_count, origin=assignment.origin,
    ).SerializeToString()


def test_a_deals_assignments_share_encoded_instants_each_its_own() -> None:
    """The instants of a deal's assignments, encoded once in the deal's
    memo (``stamps``), are each assignment's own: a shared due instant,
    distinct nominal ones, the epoch and one before it, and the deadline
    from each job's timeout, as ``set_timestamp_us`` sets them."""
    stamps: dict = {}
    batch = worker_pb2.PullResponse()
    items = [case._replace(nominal_at_us=nominal, due_at_us=due) for case, nominal, due in zip(
        CASES, (1_765_000_000_000_001, 0, -1_500_000, 1_765_000_000_000_001),
        (1_765_000_000_500_000, 1_765_000_000_500_000, 0, 7),
    )]  # fmt: skip
    for handed in items:
        add_assignment(batch, handed, SENT_US, stamps)
    for handed, assignment in zip(items, batch.assignment.assignments):
        timeout_us = (handed.definition.timeout_us if handed.definition is not None else 300_000_000)
        for field, micros in (("nominal_at", handed.nominal_at_us), ("due_at", handed.due_at_us),
                              ("deadline_at", SENT_US + timeout_us)):
            assert assignment.HasField(field)
            stamp = getattr(assignment, field)
            assert stamp.seconds * 1_000_000 + stamp.nanos // 1000 == micros
            assert 0 <= stamp.nanos < 1_000_000_000
    alone = worker_pb2.PullResponse()
    for handed in items:
        add_assignment(alone, handed, SENT_US)
    assert alone.SerializeToString() == batch.SerializeToString()


EDGES = CASES + [
    CASES[0]._replace(id="e" * 200, job_id="j" * 130, tenant="café", payload=b"p" * 20_000, attempt=300, delivery=128),
    CASES[0]._replace(id="", job_id="", tenant="", payload=b"", attempt=0, delivery=0, missed_count=0),
    CASES[1]._replace(missed_count=-1, attempt=2**31 - 1, delivery=127, nominal_at_us=-1, due_at_us=0),
    CASES[1]._replace(definition=JobDefinition.parse("job_1", 1, b"")),
]


def _fields(encoded: bytes) -> list[bytes]:
    """The top-level fields of a message's wire bytes, each as written (tag
    and value); every tag of an Assignment is one byte."""
    fields, at = [], 0
    while at < len(encoded):
        tag, start = encoded[at], at
        at += 1
        length = 0 if tag & 7 == 0 else None
        shift, value = 0, 0
        while True:  # a varint: the value, or the length of what follows
            byte = encoded[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if length is None:
            at += value
        fields.append(encoded[start:at])
    return fields


def by_protobuf(handed: HandedOut, sent_us: int) -> worker_pb2.Assignment:
    """The Assignment of ``handed`` built by protobuf, field by field."""
    definition = handed.definition or NO_DEFINITION
    assignment = worker_pb2.Assignment(
        execution_id=handed.id, job_id=handed.job_id, tenant=handed.tenant, attempt=handed.attempt,
        delivery=handed.delivery, payload=handed.payload, missed_count=handed.missed_count,
        origin=EXECUTION_ORIGIN_TO_PROTO.get(handed.origin, 0), target=definition.target,
    )
    set_timestamp_us(assignment.nominal_at, handed.nominal_at_us)
    set_timestamp_us(assignment.due_at, handed.due_at_us)
    set_timestamp_us(assignment.deadline_at, sent_us + definition.timeout_us)
    return assignment


@pytest.mark.parametrize("handed", EDGES, ids=[str(n) for n in range(len(EDGES))])
def test_an_assignment_written_as_bytes_is_the_one_protobuf_builds(handed: HandedOut) -> None:
    """``assignment_bytes`` writes each field as protobuf writes it for the
    message, byte for byte once in protobuf's order: every field, empty
    ones left out, the target and the instants present even when empty,
    lengths and numbers of more than one byte, a negative number as
    protobuf's ten bytes."""
    expected = by_protobuf(handed, SENT_US)
    written = assignment_bytes(handed, SENT_US, {})
    assert worker_pb2.Assignment.FromString(written) == expected
    assert sorted(_fields(written)) == sorted(_fields(expected.SerializeToString()))
    batch = worker_pb2.PullResponse()
    dealt = PrebuiltBatches(SENT_US)
    dealt.build("worker", handed, handed.trace_context)
    dealt.merge_into("worker", batch)
    expected.traceparent = handed.trace_context
    assert list(batch.assignment.assignments) == [expected]


def test_a_deals_assignments_share_a_memo_each_its_own_fields() -> None:
    """One deal's assignments, built with one memo, are each the one
    protobuf builds: what the memo shares (instants, numbers) is never
    another assignment's."""
    items = EDGES + [case._replace(origin=origin, missed_count=missed, attempt=attempt, delivery=delivery)
                     for case in CASES[:2] for origin in ("scheduled", "trigger") for missed in (0, 3)
                     for attempt in (1, 2) for delivery in (1, 5)]  # fmt: skip
    batch = worker_pb2.PullResponse()
    dealt = PrebuiltBatches(SENT_US)
    for handed in items:
        dealt.build("worker", handed, handed.trace_context)
    dealt.merge_into("worker", batch)
    expected = [by_protobuf(handed, SENT_US) for handed in items]
    for handed, assignment in zip(items, expected):
        assignment.traceparent = handed.trace_context
    assert list(batch.assignment.assignments) == expected


def test_a_deals_assignments_of_several_tenants_share_each_tenants_field() -> None:
    """A deal encodes each tenant's field once (its memo keeps it by the
    tenant's name, beside its instants), and each assignment carries its
    own tenant, an empty one left out as protobuf leaves it out."""
    items = [CASES[0]._replace(id=f"e{n}", tenant=tenant) for n, tenant in enumerate(("a", "b", "a", "", "b" * 300))]
    memo: dict = {}
    built = [assignment_bytes(handed, SENT_US, memo) for handed in items]
    assert [worker_pb2.Assignment.FromString(data) for data in built] == [by_protobuf(h, SENT_US) for h in items]
    assert {key for key in memo if isinstance(key, str)} == {"a", "b", "", "b" * 300}
