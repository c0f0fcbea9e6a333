"""Hand-out through the store and results, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.ids import from_us, to_us
from tickwheel_server.circuits import CircuitBreaker
from tickwheel_server.policy.breaker import BreakerSettings
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.executions import NOT_HELD, Capability, Lost, ResultIn, Retry
from tickwheel_server.store.history import HistoryStore, attempt_history
from tickwheel_server.store.queue import ExecutionQueue
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import executions, jobs
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.support.plans import captured

# Every recorded attempt: the table's rows and those plain successes keep on their execution rows.
attempts = attempt_history()

ANY_ECHO = Capability(("acme",), ("echo",), True)


@pytest.fixture
async def store(migrated_engine, clock) -> ExecutionQueue:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await TenantStore(migrated_engine, clock).create(Tenant(name="globex"))
    return ExecutionQueue(migrated_engine, clock, rng=random.Random(7))


def add_execution(engine, clock, ident: str, *, due_in: float = 0.0, tenant: str = "acme", handler: str | None = "echo",
                  max_attempts: int = 3, job_id: str | None = None, spec: job_pb2.Job | None = None,
                  origin: str = "scheduled", nominal_in: float | None = None) -> None:
    """A ``scheduled`` execution due ``due_in`` seconds from now, of job
    ``job_id`` (by default a job of its own, so executions do not overlap),
    created with ``spec`` (a handler job with ``max_attempts``) if missing."""
    if spec is None:
        spec = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=handler or "x")))
        spec.retry_policy.max_attempts = max_attempts
        spec.retry_policy.initial_backoff.FromSeconds(1)
        spec.retry_policy.max_backoff.FromSeconds(10)
    job_id = job_id or f"job_{ident}"
    due = to_us(clock.now() + timedelta(seconds=due_in))
    nominal = due if nominal_in is None else to_us(clock.now() + timedelta(seconds=nominal_in))
    with engine.begin() as conn:
        if not conn.execute(sa.select(jobs.c.id).where(jobs.c.id == job_id)).first():
            insert_jobs(conn, [dict(
                id=job_id, tenant=tenant, partition=0, name="j", state="active", spec=spec.SerializeToString(),
                time_zone="UTC", next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x",
                pause_reason="", paused_at=None, version=1, created_at=0, updated_at=0)])
        conn.execute(executions.insert().values(
            id=ident, job_id=job_id, tenant=tenant, partition=0, origin=origin, nominal_at=nominal, due_at=due,
            ready_at=due, attempt=1, delivery=0, status="scheduled", owner=None, worker_id=None, handler=handler,
            missed_count=1, reap_count=0, payload=b"p", error="", dead_reason="", created_at=0, finished_at=None))


def committed_unanswered(real):
    """A store's ``_tx`` that commits through ``real`` and then raises as if the COMMIT's answer was lost."""
    async def tx(fn, **options):
        await real(fn, **options)
        raise AmbiguousCommitError("the connection broke after COMMIT")
    return tx


async def lost_before_commit(fn, **options):
    """A store's ``_tx`` whose connection broke before its COMMIT reached the store: nothing committed."""
    raise AmbiguousCommitError("the connection broke before COMMIT")


def result(handed, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED, **overrides) -> ResultIn:
    values = dict(execution_id=handed.id, delivery=handed.delivery, attempt=handed.attempt, outcome=outcome,
                  error="", worker_id="w1", tenants=("acme",))
    values.update(overrides)
    return ResultIn(**values)


async def test_nothing_is_handed_out_before_its_ready_instant(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1", due_in=0.5)
    assert await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10) == []
    assert await store.handout.hand_out_ready("s1", clock.now() + timedelta(seconds=0.499999), ANY_ECHO, 10) == []
    handed = await store.handout.hand_out_ready("s1", clock.now() + timedelta(seconds=0.5), ANY_ECHO, 10)
    assert [(h.id, h.delivery, h.attempt, h.payload) for h in handed] == [("e1", 1, 1, b"p")]
    assert handed[0].definition.target.handler.name == "echo"  # the job's definition travels with it, parsed
    assert await store.handout.hand_out_ready("s2", clock.now() + timedelta(seconds=5), ANY_ECHO, 10) == []


async def test_a_new_version_of_a_definition_is_read_by_the_hand_out_and_the_outcome(
    store, migrated_engine, clock
) -> None:
    add_execution(migrated_engine, clock, "e1", job_id="job_1", max_attempts=3)
    [first] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)
    assert first.definition.target.handler.name == "echo" and first.definition.retry.max_attempts == 3
    changed = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    changed.retry_policy.max_attempts = 1
    changed.timeout.FromSeconds(7)
    with migrated_engine.begin() as conn:  # what JobStore.update writes: the definition with the next version
        conn.execute(jobs.update().where(jobs.c.id == "job_1").values(
            spec=changed.SerializeToString(), version=jobs.c.version + 1))
    [ack] = await store.outcomes.record_results([result(first, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom")])
    assert ack.accepted and ack.retry is None, "the new version allows one attempt: dead, not retried"
    add_execution(migrated_engine, clock, "e2", job_id="job_1")
    [second] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)
    assert (second.id, second.definition.version, second.definition.timeout_us) == ("e2", 2, 7_000_000)


async def test_an_outcome_needing_nothing_of_a_damaged_definition_is_recorded(migrated_engine, clock) -> None:
    """A success of a handler target reads nothing of its job's definition,
    so a definition that no longer parses does not stop it being recorded;
    a retry (its policy) and an HTTP target's success (its host, for the
    breaker) still need it, and fail."""
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    store = ExecutionQueue(migrated_engine, clock, rng=random.Random(7),
                           breaker=CircuitBreaker(BreakerSettings(), clock))
    for ident, handler in (("done", "echo"), ("retry", "echo"), ("call", None)):
        add_execution(migrated_engine, clock, ident, handler=handler)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), Capability(("acme",), ("echo",), True), 10)}
    with migrated_engine.begin() as conn:  # a new version this server cannot read
        conn.execute(jobs.update().values(spec=b"\x0a\xff", version=jobs.c.version + 1))
    [ack] = await store.outcomes.record_results([result(handed["done"])])
    assert ack.accepted and ack.reason == ""
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(executions.c.status).where(executions.c.id == "done")).scalar() == "succeeded"
        assert conn.execute(sa.select(attempts.c.status).where(attempts.c.execution_id == "done")).scalar() == "succeeded"
    for needing in (result(handed["retry"], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE), result(handed["call"])):
        with pytest.raises(Exception, match="does not parse"):
            await store.outcomes.record_results([needing])
    with migrated_engine.connect() as conn:
        assert dict(conn.execute(sa.select(executions.c.id, executions.c.status)).all()) == {
            "done": "succeeded", "retry": "running", "call": "running"}


async def test_hand_out_respects_tenants_handlers_http_and_the_limit(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "echo-1")
    add_execution(migrated_engine, clock, "echo-2")
    add_execution(migrated_engine, clock, "http-1", handler=None)
    add_execution(migrated_engine, clock, "other-1", handler="billing")
    add_execution(migrated_engine, clock, "globex-1", tenant="globex")
    only_http = await store.handout.hand_out_ready("s1", clock.now(), Capability(("acme",), (), True), 10)
    assert [h.id for h in only_http] == ["http-1"]
    one = await store.handout.hand_out_ready("s1", clock.now(), Capability(("acme",), ("echo",), False), 1)
    assert len(one) == 1 and one[0].id.startswith("echo-")
    rest = await store.handout.hand_out_ready("s1", clock.now(), Capability(("acme",), ("echo", "nothing"), False), 10)
    assert len(rest) == 1 and rest[0].id.startswith("echo-") and rest[0].id != one[0].id


async def test_concurrent_claims_never_hand_out_one_execution_twice(store, migrated_engine, clock) -> None:
    for index in range(40):
        add_execution(migrated_engine, clock, f"e{index:02d}")
    batches = await asyncio.gather(*(store.handout.hand_out_ready(f"s{n}", clock.now(), ANY_ECHO, 15) for n in range(4)))
    handed = [h.id for batch in batches for h in batch]
    assert len(handed) == len(set(handed)) == 40


async def test_success_is_recorded_once_with_an_attempt_row(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    clock.advance(2)
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    acks = await store.outcomes.record_results([result(handed)])
    assert [(a.accepted, a.reason) for a in acks] == [(True, "")]
    again = await store.outcomes.record_results([result(handed)])
    assert [(a.accepted, a.reason) for a in again] == [(True, "already recorded")]
    with migrated_engine.connect() as conn:
        row = conn.execute(sa.select(executions).where(executions.c.id == "e1")).one()
        history = conn.execute(sa.select(attempts)).all()
    assert (row.status, row.owner, row.finished_at is not None) == ("succeeded", None, True)
    assert [(h.attempt, h.delivery, h.status, h.worker_id) for h in history] == [(1, 1, "succeeded", "w1")]
    assert history[0].lateness_us == 2_000_000


async def test_one_batch_of_mixed_outcomes_writes_each_row_as_its_outcome_decides(store, migrated_engine, clock) -> None:
    """Plain successes are written apart from the other outcomes on
    PostgreSQL (one statement with the ids as its one array): in one batch, a
    plain success, a success that reports error text, a retry and a dead
    letter each end as they would alone, and the attempts and ready instants
    of the successes are kept."""
    for ident in ("plain", "noisy", "retry", "dead"):
        add_execution(migrated_engine, clock, ident, max_attempts=3)
    clock.advance(2)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 4)}
    with migrated_engine.connect() as conn:
        before = {r.id: r for r in conn.execute(sa.select(executions))}
    acks = await store.outcomes.record_results([
        result(handed["plain"]),
        result(handed["noisy"], error="a warning"),
        result(handed["retry"], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom"),
        result(handed["dead"], worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="404"),
    ])
    assert [a.accepted for a in acks] == [True] * 4
    with migrated_engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(sa.select(executions))}
        history = {h.execution_id: h for h in conn.execute(sa.select(attempts))}
    now_us = to_us(clock.now())
    for ident in ("plain", "noisy"):
        row = rows[ident]
        assert (row.status, row.attempt, row.ready_at, row.dead_reason, row.owner, row.worker_id, row.handed_out_at) == (
            "succeeded", 1, before[ident].ready_at, "", None, None, None)
        assert row.finished_at is not None and row.finished_at <= now_us
    assert (rows["plain"].error, rows["noisy"].error) == ("", "a warning")
    assert (rows["retry"].status, rows["retry"].attempt, rows["retry"].error, rows["retry"].finished_at) == (
        "scheduled", 2, "boom", None)
    assert rows["retry"].ready_at >= before["retry"].ready_at
    assert (rows["dead"].status, rows["dead"].dead_reason, rows["dead"].error) == ("dead", "failed permanently", "404")
    assert rows["plain"].finished_at == rows["noisy"].finished_at == rows["dead"].finished_at
    assert {k: h.status for k, h in history.items()} == {
        "plain": "succeeded", "noisy": "succeeded", "retry": "failed", "dead": "failed"}


async def test_a_stale_delivery_is_rejected_and_changes_nothing(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [first] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    with migrated_engine.begin() as conn:  # as a reaper would: back to scheduled for a second delivery
        conn.execute(executions.update().values(status="scheduled", owner=None))
    [second] = await store.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 1)
    assert second.delivery == first.delivery + 1
    [ack] = await store.outcomes.record_results([result(first)])
    assert not ack.accepted and "stale delivery" in ack.reason
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(executions.c.status)).scalar() == "running"
        assert conn.execute(sa.select(sa.func.count()).select_from(attempts)).scalar() == 0


async def test_retryable_failures_back_off_with_full_jitter_then_dead_letter(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1", max_attempts=3)
    waits = []
    for attempt in (1, 2, 3):
        clock.advance(60)
        [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
        assert handed.attempt == attempt and handed.delivery == attempt  # deliveries only grow
        await store.outcomes.record_results([result(handed, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error=f"boom {attempt}")])
        with migrated_engine.connect() as conn:
            row = conn.execute(sa.select(executions).where(executions.c.id == "e1")).one()
        if attempt < 3:
            assert row.status == "scheduled" and row.attempt == attempt + 1
            waits.append((row.ready_at - to_us(clock.now())) / 1e6)
    assert 0 <= waits[0] <= 1 and 0 <= waits[1] <= 2  # ceilings: 1 s · 2^(n-2)
    assert (row.status, row.dead_reason, row.error) == ("dead", "attempts exhausted (3 of 3)", "boom 3")
    with migrated_engine.connect() as conn:
        errors = conn.execute(sa.select(attempts.c.error).order_by(attempts.c.attempt)).scalars().all()
    assert errors == ["boom 1", "boom 2", "boom 3"]


async def test_a_permanent_failure_is_dead_at_once(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    await store.outcomes.record_results([result(handed, worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="404")])
    with migrated_engine.connect() as conn:
        row = conn.execute(sa.select(executions).where(executions.c.id == "e1")).one()
    assert (row.status, row.dead_reason) == ("dead", "failed permanently")


async def test_release_puts_back_what_was_never_sent(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    await store.requeues.release([(handed.id, handed.delivery)])
    [again] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    assert again.delivery == handed.delivery


async def test_release_gives_a_batch_back_in_one_update_and_only_what_is_still_unsent(
    store, migrated_engine, clock
) -> None:
    """A give-back of many hand-outs is one UPDATE on PostgreSQL (two
    arrays), one per row on SQLite; either way only the rows still
    ``running`` at the delivery named go back, whatever their ids hold
    (a triggered execution's id carries the caller's request id)."""
    hostile = 'job_x:trigger:a"b\\c,{d}\'e f'
    idents = ["e1", "e2", "e3", "e4", "e5", hostile]
    for ident in idents:
        add_execution(migrated_engine, clock, ident)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)}
    assert set(handed) == set(idents)
    await store.outcomes.record_results([result(handed["e2"], worker_pb2.RESULT_OUTCOME_SUCCEEDED)])  # ended
    await store.requeues.release([("e4", handed["e4"].delivery)])  # given back, then handed out again
    [again] = await store.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 1)
    assert (again.id, again.delivery) == ("e4", handed["e4"].delivery)
    await store.requeues.reattach("s2", "w9", [("e4", again.delivery)], tenants=("acme",))
    asked = [(i, handed[i].delivery) for i in ("e1", "e2", "e5", hostile)]
    asked += [("e3", handed["e3"].delivery + 1), ("e4", again.delivery - 1), ("unknown", 1), ("e1'--", 1)]
    with captured(migrated_engine) as seen:
        await store.requeues.release(asked)
    updates = [sent for sent in seen if sent.statement.lstrip().upper().startswith("UPDATE EXECUTIONS")]
    if migrated_engine.dialect.name == "postgresql":
        assert [sent.sets for sent in updates] == [1], [sent.statement for sent in updates]
    else:
        assert sum(sent.sets for sent in updates) == 3
    for ident in ("e1", "e5", hostile):
        row = row_of(migrated_engine, ident)
        assert (row.status, row.owner, row.worker_id, row.handed_out_at, row.delivery) == (
            "scheduled", None, None, None, handed[ident].delivery - 1)
    assert row_of(migrated_engine, "e2").status == "succeeded"
    assert (row_of(migrated_engine, "e3").status, row_of(migrated_engine, "e3").delivery) == (
        "running", handed["e3"].delivery)
    e4 = row_of(migrated_engine, "e4")
    assert (e4.status, e4.owner, e4.worker_id, e4.delivery) == ("running", "s2", "w9", again.delivery)
    back = {h.id for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)}
    assert back == {"e1", "e5", hostile}


def row_of(engine, ident: str):
    with engine.connect() as conn:
        return conn.execute(sa.select(executions).where(executions.c.id == ident)).one()


def attempts_of(engine, ident: str):
    with engine.connect() as conn:
        return conn.execute(
            sa.select(attempts).where(attempts.c.execution_id == ident).order_by(attempts.c.delivery)
        ).all()


async def test_the_hand_out_instant_is_stored_and_lateness_comes_from_it(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    clock.advance(3)
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    assert row_of(migrated_engine, "e1").handed_out_at == handed.handed_out_at_us == to_us(clock.now())
    clock.advance(10)  # the result comes much later, maybe through another server
    worker_start = handed.handed_out_at_us + 40_000  # what the worker reports, by its clock
    await store.outcomes.record_results([result(handed, worker_started_at_us=worker_start)])
    [attempt] = attempts_of(migrated_engine, "e1")
    assert attempt.started_at == handed.handed_out_at_us and attempt.lateness_us == 3_000_000
    assert attempt.worker_started_at == worker_start  # kept beside the hand-out instant, which lateness uses
    assert row_of(migrated_engine, "e1").handed_out_at is None


async def test_a_results_output_is_kept_on_its_attempt_up_to_4_kib(store, migrated_engine, clock) -> None:
    """Binary output (NUL, quote, backslash, every byte value) is kept as is,
    cut to its first 4 KiB; none is NULL; GetExecution's read carries it and
    a page of executions does not."""
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    handed = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)
    by_id = {h.id: h for h in handed}
    output = bytes(range(256)) * 20  # 5 120 bytes
    await store.outcomes.record_results([result(by_id["e1"], output=output), result(by_id["e2"])])
    assert [a.output for a in attempts_of(migrated_engine, "e1")] == [output[:4096]]
    assert [a.output for a in attempts_of(migrated_engine, "e2")] == [None]
    history = HistoryStore(migrated_engine, clock)
    [kept] = (await history.get_execution("acme", "e1")).attempts
    assert kept.output == output[:4096]
    page = await history.list_executions("acme", "job_e1")
    assert [a.output for e in page.executions for a in e.attempts] == [b""]


async def test_a_worker_that_died_is_requeued_with_the_same_id_and_the_next_delivery(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [first] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    outcome = await store.requeues.requeue("s1", [Lost("e1", first.delivery, "no heartbeat from worker w1 for 30 s", "w1")],
                                  counts=True)
    assert [r.execution_id for r in outcome.requeued] == ["e1"] and not outcome.dead
    row = row_of(migrated_engine, "e1")
    assert (row.status, row.owner, row.reap_count, row.attempt) == ("scheduled", None, 1, 1)
    [second] = await store.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 1)
    assert (second.id, second.delivery, second.attempt) == ("e1", first.delivery + 1, 1)
    [lost] = attempts_of(migrated_engine, "e1")
    assert (lost.delivery, lost.status, lost.worker_id) == (first.delivery, "lost", "w1")
    assert "no heartbeat" in lost.error


async def test_a_requeue_decided_for_another_owner_or_delivery_changes_nothing(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    assert await store.requeues.reattach("s2", "w9", [("e1", handed.delivery)], tenants=("acme",))  # re-attached elsewhere meanwhile
    for owner, delivery in (("s1", handed.delivery), ("s2", handed.delivery + 1)):
        outcome = await store.requeues.requeue(owner, [Lost("e1", delivery, "gone")], counts=True)
        assert not outcome.requeued and outcome.skipped == [("e1", delivery)]
    row = row_of(migrated_engine, "e1")
    assert (row.status, row.owner, row.worker_id, row.reap_count) == ("running", "s2", "w9", 0)
    assert attempts_of(migrated_engine, "e1") == []


async def test_reattach_takes_what_is_still_running_at_that_delivery_and_nothing_else(store, migrated_engine, clock) -> None:
    for ident in ("e1", "e2", "e3"):
        add_execution(migrated_engine, clock, ident)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 3)}
    await store.outcomes.record_results([result(handed["e2"])])  # finished before the worker reconnected
    taken = await store.requeues.reattach("s2", "w1", [("e1", handed["e1"].delivery), ("e2", handed["e2"].delivery),
                                              ("e3", handed["e3"].delivery + 5), ("missing", 1)],
                                tenants=("acme",))
    assert [(t.execution_id, t.delivery) for t in taken] == [("e1", handed["e1"].delivery)]
    assert row_of(migrated_engine, "e1").owner == "s2" and row_of(migrated_engine, "e3").owner == "s1"


async def test_a_result_after_a_requeue_is_rejected_and_noted_on_the_lost_attempt(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [first] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    await store.requeues.requeue("s1", [Lost("e1", first.delivery, "worker w1 disconnected", "w1")], counts=True)
    for _ in range(2):  # the worker sends it again after a reconnect: still rejected, noted once
        [ack] = await store.outcomes.record_results([result(first)])
        assert not ack.accepted and "was requeued" in ack.reason
    row = row_of(migrated_engine, "e1")
    assert (row.status, row.delivery) == ("scheduled", first.delivery)
    [lost] = attempts_of(migrated_engine, "e1")
    assert lost.status == "lost" and lost.error.count("late result (succeeded)") == 1
    [second] = await store.handout.hand_out_ready("s2", clock.now(), ANY_ECHO, 1)
    [ack] = await store.outcomes.record_results([result(first)])
    assert not ack.accepted
    [ack] = await store.outcomes.record_results([result(second)])
    assert ack.accepted and row_of(migrated_engine, "e1").status == "succeeded"


async def test_a_result_the_credential_could_not_have_been_handed_is_unknown_and_writes_nothing(
    store, migrated_engine, clock
) -> None:
    """A result for an execution of a handler the credential may not run is
    answered as an unknown execution's, running or requeued, and notes
    nothing; a late result from another worker than the one that held the
    lost delivery notes nothing either (the holder's own is still noted)."""
    add_execution(migrated_engine, clock, "e1")
    [first] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    reports_only = lambda tenant, handler: tenant == "acme" and handler == "report"  # noqa: E731
    [ack] = await store.outcomes.record_results([result(first, may_serve=reports_only)])
    assert (ack.accepted, ack.reason) == (False, NOT_HELD)
    await store.requeues.requeue("s1", [Lost("e1", first.delivery, "worker w1 disconnected", "w1")], counts=True)
    [ack] = await store.outcomes.record_results([result(first, may_serve=reports_only)])
    assert (ack.accepted, ack.reason) == (False, NOT_HELD)
    [ack] = await store.outcomes.record_results([result(first, worker_id="w2")])
    assert not ack.accepted and "was requeued" in ack.reason
    [lost] = attempts_of(migrated_engine, "e1")
    assert lost.error == "worker w1 disconnected"
    [ack] = await store.outcomes.record_results([result(first)])
    [lost] = attempts_of(migrated_engine, "e1")
    assert lost.error.count("late result (succeeded) from worker w1") == 1


async def test_requeued_past_the_poison_cap_is_dead_lettered_once(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    letters = []
    store = ExecutionQueue(migrated_engine, clock, poison_cap=2, on_dead_letter=lambda conn, letter: letters.append(letter))
    add_execution(migrated_engine, clock, "e1")
    for round_ in range(3):
        [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
        outcome = await store.requeues.requeue("s1", [Lost("e1", handed.delivery, f"worker w{round_} died")], counts=True)
    assert not outcome.requeued and [d.execution_id for d in outcome.dead] == ["e1"]
    row = row_of(migrated_engine, "e1")
    assert (row.status, row.reap_count) == ("dead", 3) and row.dead_reason.startswith("poison")
    assert [(l.execution_id, l.poison) for l in letters] == [("e1", True)]
    assert [a.status for a in attempts_of(migrated_engine, "e1")] == ["lost"] * 3
    assert await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1) == []


async def test_a_re_attachment_and_a_requeue_write_their_batch_in_one_update(migrated_engine, clock) -> None:
    """Each is one UPDATE over arrays on PostgreSQL (one per row on
    SQLite), with each row's own end: requeued, canceled (asked to stop),
    dead (past the poison cap); a worker's id and the reason carry any
    character; a delivery not held is neither re-attached nor requeued."""
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    store = ExecutionQueue(migrated_engine, clock, poison_cap=1)
    for ident in ("e1", "e2", "e3", "e4"):
        add_execution(migrated_engine, clock, ident)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)}
    worker = 'w"\\x,{1} \'; --'
    held = [(i, handed[i].delivery) for i in ("e1", "e2", "e3")] + [("e4", handed["e4"].delivery + 1)]
    with captured(migrated_engine) as attaching:
        attached = await store.requeues.reattach("s2", worker, held, tenants=("acme",))
    assert sorted(r.execution_id for r in attached) == ["e1", "e2", "e3"]
    assert [(row_of(migrated_engine, i).owner, row_of(migrated_engine, i).worker_id) for i in ("e1", "e4")] == [
        ("s2", worker), ("s1", None)]
    await HistoryStore(migrated_engine, clock).cancel_execution("acme", "e2")  # asked to stop
    with migrated_engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.id == "e3").values(reap_count=1))  # at the cap
    lost = [Lost(i, handed[i].delivery, f"worker {worker} went silent", worker) for i in ("e1", "e2", "e3", "e4")]
    with captured(migrated_engine) as requeuing:
        done = await store.requeues.requeue("s2", lost, counts=True)
    assert ([r.execution_id for r in done.requeued], done.canceled, [d.execution_id for d in done.dead]) == (
        ["e1"], ["e2"], ["e3"])
    assert done.skipped == [("e4", handed["e4"].delivery)]
    ends = {i: row_of(migrated_engine, i) for i in ("e1", "e2", "e3", "e4")}
    assert [(r.status, r.owner, r.worker_id, r.error) for r in (ends["e1"], ends["e2"], ends["e3"])] == [
        (status, None, None, f"worker {worker} went silent") for status in ("scheduled", "canceled", "dead")]
    assert (ends["e1"].reap_count, ends["e3"].reap_count, ends["e3"].dead_reason.startswith("poison")) == (1, 2, True)
    assert ends["e2"].cancel_requested_at is None and ends["e2"].finished_at is not None
    assert (ends["e4"].status, ends["e4"].owner) == ("running", "s1")
    for seen in (attaching, requeuing):
        sets = [sent.sets for sent in seen if sent.statement.startswith("UPDATE executions")]
        assert sets == ([1] if migrated_engine.dialect.name == "postgresql" else [3]), sets


async def test_a_session_loss_reap_does_not_count_towards_poison(store, migrated_engine, clock) -> None:
    for index in range(5):
        add_execution(migrated_engine, clock, f"e{index}")
    await store.handout.hand_out_ready("dead-session", clock.now(), ANY_ECHO, 5)
    assert await store.requeues.running_owners() == ["dead-session"]
    first = await store.requeues.reap_owner("dead-session", "server session expired", limit=3)
    second = await store.requeues.reap_owner("dead-session", "server session expired", limit=3)
    assert (len(first.requeued), len(second.requeued)) == (3, 2)
    assert await store.requeues.running_owners() == []
    with migrated_engine.connect() as conn:
        rows = conn.execute(sa.select(executions.c.status, executions.c.reap_count)).all()
    assert {tuple(r) for r in rows} == {("scheduled", 0)}


async def test_restamp_moves_running_executions_to_the_new_session(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    [handed, _] = await store.handout.hand_out_ready("old", clock.now(), ANY_ECHO, 2)
    await store.outcomes.record_results([result(handed)])
    assert await store.requeues.restamp("old", "new") == 1
    assert await store.requeues.running_owners() == ["new"]


async def test_restamp_walks_in_bounded_batches_and_a_stopped_walk_resumes_beside_the_reaper(
    store, migrated_engine, clock, monkeypatch
) -> None:
    for index in range(5):  # > 2 batches of 2
        add_execution(migrated_engine, clock, f"e{index}")
    await store.handout.hand_out_ready("old", clock.now(), ANY_ECHO, 5)
    requeues = type(store.requeues)
    real = requeues._restamp_batch
    batches: list[int] = []

    def failing_second(conn, old, new, batch):
        if len(batches) == 1:
            raise RuntimeError("connection lost")
        batches.append(real(conn, old, new, batch))
        return batches[-1]

    monkeypatch.setattr(requeues, "_restamp_batch", staticmethod(failing_second))
    with pytest.raises(RuntimeError):
        await store.requeues.restamp("old", "new", batch=2)
    assert batches == [2], "the first batch committed on its own, the second wrote nothing"
    reaped = await store.requeues.reap_owner("old", "server session expired", limit=1)  # the reaper meanwhile
    assert len(reaped.requeued) == 1
    monkeypatch.setattr(requeues, "_restamp_batch", staticmethod(real))
    assert await store.requeues.restamp("old", "new", batch=2) == 2, "the caller's retry: the rest, once each"
    assert await store.requeues.running_owners() == ["new"]
    with migrated_engine.connect() as conn:
        rows = conn.execute(sa.select(executions.c.id, executions.c.status, executions.c.owner)).all()
    assert sorted((r.status, r.owner) for r in rows) == [("running", "new")] * 4 + [("scheduled", None)]
    assert reaped.requeued[0].execution_id in {r.id for r in rows if r.status == "scheduled"}, "reaped stays reaped"
    assert await store.requeues.restamp("new", "newer", batch=4) == 4, "a full last batch reads one more, empty"
    with pytest.raises(ValueError):
        await store.requeues.restamp("newer", "x", batch=0)


async def test_retries_keep_the_delivery_and_report_their_ready_instant(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    [ack] = await store.outcomes.record_results([result(handed, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom")])
    row = row_of(migrated_engine, "e1")
    assert ack.retry is not None and (ack.retry.execution_id, ack.retry.ready_at_us) == ("e1", row.ready_at)
    assert (row.status, row.attempt, row.delivery) == ("scheduled", 2, handed.delivery)
    [again] = await store.outcomes.record_results([result(handed, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom")])
    # Repeated while the retry waits: its instant again (the first answer may have been lost with its COMMIT's).
    assert again.accepted and again.reason == "already recorded" and again.retry == ack.retry
    [retried] = await store.handout.hand_out_ready("s1", from_us(row.ready_at), ANY_ECHO, 1)
    [late] = await store.outcomes.record_results([result(handed, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="boom")])
    assert late.accepted and late.reason == "already recorded" and late.retry is None, "handed out: no retry to report"


# -- scope: a worker credential's tenants (issue 15, items 1 to 3) -------------------------------------


def counts(engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (conn.execute(sa.select(sa.func.count()).select_from(attempts)).scalar(),
                conn.execute(sa.select(sa.func.count()).select_from(executions)
                             .where(executions.c.status == "running")).scalar())


async def test_a_result_for_another_tenants_execution_is_answered_as_an_unknown_id(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "g-run", tenant="globex")
    add_execution(migrated_engine, clock, "g-done", tenant="globex")
    add_execution(migrated_engine, clock, "g-lost", tenant="globex")
    globex = Capability(("globex",), ("echo",), True)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), globex, 3)}
    await store.outcomes.record_results([result(handed["g-done"], tenants=("globex",))])
    await store.requeues.requeue("s1", [Lost("g-lost", handed["g-lost"].delivery, "worker gone", "w0")], counts=True)
    before = attempts_of(migrated_engine, "g-lost")[0].error
    hostile = [
        result(handed["g-run"]),  # SUCCEEDED for globex's running execution
        result(handed["g-run"], worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="forged"),
        result(handed["g-done"]),  # recorded already: must not say so
        result(handed["g-lost"]),  # requeued: must not say so, nor note it
        result(handed["g-run"], execution_id="no-such-execution"),
    ]
    acks = await store.outcomes.record_results(hostile)
    assert [(a.accepted, a.reason) for a in acks] == [(False, "no such execution held by this worker")] * 5
    assert row_of(migrated_engine, "g-run").status == "running"
    assert attempts_of(migrated_engine, "g-lost")[0].error == before
    assert [a.status for a in attempts_of(migrated_engine, "g-run")] == []
    # globex's own worker then ends it, once.
    [ack] = await store.outcomes.record_results([result(handed["g-run"], tenants=("globex",))])
    assert (ack.accepted, ack.reason) == (True, "")
    assert row_of(migrated_engine, "g-run").status == "succeeded"


async def test_a_result_not_held_is_classified_but_never_applied(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 2)}
    await store.outcomes.record_results([result(handed["e2"])])
    acks = await store.outcomes.record_results([result(handed["e1"], held=False), result(handed["e2"], held=False)])
    assert [(a.accepted, a.reason) for a in acks] == [
        (False, "no such execution held by this worker"), (True, "already recorded"),
    ]
    assert row_of(migrated_engine, "e1").status == "running" and attempts_of(migrated_engine, "e1") == []


async def test_reattach_takes_only_the_credentials_tenants_and_no_other_workers(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "a1")
    add_execution(migrated_engine, clock, "g1", tenant="globex")
    acme = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    globex = await store.handout.hand_out_ready("s1", clock.now(), Capability(("globex",), ("echo",), True), 1)
    held = [(h.id, h.delivery) for h in acme + globex]
    taken = await store.requeues.reattach("s2", "hostile", held, tenants=("acme",))
    assert [t.execution_id for t in taken] == ["a1"]
    row = row_of(migrated_engine, "g1")
    assert (row.status, row.owner, row.worker_id) == ("running", "s1", None)
    # Once re-attached by one worker, another worker of the tenant cannot take it over.
    taken = await store.requeues.reattach("s3", "other", held, tenants=("acme", "globex"))
    assert [t.execution_id for t in taken] == ["g1"]
    assert row_of(migrated_engine, "a1").owner == "s2" and row_of(migrated_engine, "a1").worker_id == "hostile"
    assert [t.execution_id for t in await store.requeues.reattach("s4", "hostile", held[:1], tenants=("acme",))] == ["a1"]


# -- a hand-out round's COMMIT that went unanswered (session 16) ---------------------------------------


def held_by(engine, ident: str) -> tuple:
    row = row_of(engine, ident)
    return row.status, row.owner, row.delivery, row.handed_out_at


async def test_a_round_whose_commit_went_unanswered_is_undone_by_the_next(
    store, migrated_engine, clock, monkeypatch
) -> None:
    """As when PostgreSQL stops during the COMMIT: the round may have
    committed, and no server sends what it handed out (the call raised);
    those rows must not stay ``running`` until the safety net's timeout.
    The next round undoes exactly them (back to ``scheduled``, the delivery
    taken back), then hands them out again; a row this server handed out in
    an answered round, another server's, or one handed out again since, is
    not touched."""
    for ident in ("e0", "e1", "e2", "e3"):
        add_execution(migrated_engine, clock, ident)
    handout, real = store.handout, store.handout._tx
    elsewhere = ExecutionQueue(migrated_engine, clock).handout  # server s2's
    [known] = await handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)  # answered: e0 is sent
    [other] = await elsewhere.hand_out_ready("s2", clock.now(), ANY_ECHO, 1)  # another server's e1

    monkeypatch.setattr(handout, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 2)
    doubted = {i: held_by(migrated_engine, i) for i in ("e2", "e3")}
    assert {(status, owner, delivery) for status, owner, delivery, _ in doubted.values()} == {("running", "s1", 1)}
    # e3 is taken back meanwhile (as by a stream that closed) and handed out again by s2: not the round's any more.
    await store.requeues.release([("e3", 1)])
    [again_e3] = await elsewhere.hand_out_ready("s2", clock.now(), ANY_ECHO, 1)
    assert again_e3.id == "e3"
    monkeypatch.setattr(handout, "_tx", lost_before_commit)
    with pytest.raises(AmbiguousCommitError):  # nothing committed: nothing of its own to undo
        await handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    monkeypatch.setattr(handout, "_tx", real)
    assert len(handout.in_doubt.entries) == 1

    add_execution(migrated_engine, clock, "e4")
    clock.advance(1)
    again = await handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)
    assert sorted((h.id, h.delivery) for h in again) == [("e2", 1), ("e4", 1)]  # e2 undone, then handed out once
    assert held_by(migrated_engine, "e2") == ("running", "s1", 1, again[0].handed_out_at_us)
    assert held_by(migrated_engine, "e0") == ("running", "s1", 1, known.handed_out_at_us)
    assert held_by(migrated_engine, "e1") == ("running", "s2", 1, other.handed_out_at_us)
    assert held_by(migrated_engine, "e3") == ("running", "s2", 1, again_e3.handed_out_at_us)
    assert handout.in_doubt.entries == []


async def test_a_round_in_doubt_is_undone_before_any_claim_and_gives_its_key_slots_back(
    store, migrated_engine, clock, monkeypatch
) -> None:
    """With no claim to follow (no worker has credit), the gateway's next
    round undoes it in a transaction of its own (``InDoubt.settle``); the
    concurrency-key slot the round took is given back, so the key's next
    run is not held back by a run that never went out."""
    from tickwheel_server.store.tables import concurrency_keys

    keyed = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    keyed.concurrency_keys.add(key="k", limit=1)
    add_execution(migrated_engine, clock, "k1", spec=keyed, job_id="job_k1")
    with migrated_engine.begin() as conn:
        conn.execute(concurrency_keys.insert().values(tenant="acme", name="k", max_running=1, running=0,
                                                      limit_set_at=0))
    handout, real = store.handout, store.handout._tx

    monkeypatch.setattr(handout, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    monkeypatch.setattr(handout, "_tx", real)

    def slots() -> int:
        with migrated_engine.connect() as conn:
            return conn.execute(sa.select(concurrency_keys.c.running)).scalar_one()

    assert held_by(migrated_engine, "k1")[:3] == ("running", "s1", 1) and slots() == 1
    await handout.in_doubt.settle()
    assert held_by(migrated_engine, "k1") == ("scheduled", None, 0, None) and slots() == 0
    assert handout.in_doubt.entries == []
    await handout.in_doubt.settle()  # nothing left: no transaction, nothing changed
    assert held_by(migrated_engine, "k1") == ("scheduled", None, 0, None)


async def test_results_whose_commit_went_unanswered_are_written_again_and_recorded_once(
    store, migrated_engine, clock, monkeypatch
) -> None:
    """The results' writer retries a batch whose COMMIT went unanswered
    (it may have committed): each result is then acknowledged ``already
    recorded`` and nothing is recorded twice; a retry it scheduled is still
    reported for the timer wheel; a batch that did not commit is recorded by
    the second write. At least once, and never twice."""
    for ident in ("ok", "again", "dead", "lost-commit"):
        add_execution(migrated_engine, clock, ident, max_attempts=2)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 4)}
    outcomes, real = store.outcomes, store.outcomes._tx

    batch = [result(handed["ok"]), result(handed["again"], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="x"),
             result(handed["dead"], worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="y")]
    monkeypatch.setattr(outcomes, "_tx", committed_unanswered(real))
    with pytest.raises(AmbiguousCommitError):
        await outcomes.record_results(batch)
    monkeypatch.setattr(outcomes, "_tx", lost_before_commit)
    with pytest.raises(AmbiguousCommitError):
        await outcomes.record_results([result(handed["lost-commit"])])
    monkeypatch.setattr(outcomes, "_tx", real)
    acks = await outcomes.record_results(batch + [result(handed["lost-commit"])])
    assert [(a.accepted, a.reason) for a in acks] == [(True, "already recorded")] * 3 + [(True, "")]
    retry_at = row_of(migrated_engine, "again").ready_at
    assert [a.retry for a in acks] == [None, Retry("again", 0, retry_at), None, None]
    assert {i: row_of(migrated_engine, i).status for i in handed} == {
        "ok": "succeeded", "again": "scheduled", "dead": "dead", "lost-commit": "succeeded"}
    assert [a.status for a in attempts_of(migrated_engine, "again")] == ["failed"]
    assert [a.status for a in attempts_of(migrated_engine, "dead")] == ["failed"]
    assert [a.status for a in attempts_of(migrated_engine, "ok")] == ["succeeded"]
