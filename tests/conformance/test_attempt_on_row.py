"""A plain success keeps its attempt on its execution row (migration 0025):
no row in ``attempts``, yet every reader of history answers as before.

Plain: succeeded, no error text, its attempt and ready instant kept. Any
other outcome (a failure, a retry, a dead letter, a success with error
text, a requeue's ``lost``) still writes its attempt row.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel.shared.ids import to_us
from tickwheel_server.policy.rollups import day_of
from tickwheel_server.store.executions import Lost
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import attempt_rollups, attempts, executions

from .test_handout import ANY_ECHO, add_execution, result, store  # noqa: F401 (store: the fixture)


def table_rows(engine, ident: str) -> list:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(attempts.c.attempt, attempts.c.delivery, attempts.c.status)
            .where(attempts.c.execution_id == ident).order_by(attempts.c.delivery)
        ).all()


async def test_a_plain_success_writes_no_attempt_row_and_reads_back_as_one(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    add_execution(migrated_engine, clock, "e2")
    clock.advance(2)
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 10)}
    worker_start = handed["e1"].handed_out_at_us + 40_000
    clock.advance(1)
    acks = await store.outcomes.record_results([
        result(handed["e1"], output=b"\x00out'\\", worker_started_at_us=worker_start),
        result(handed["e2"], outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED, error="took the slow path"),
    ])
    assert [(a.accepted, a.reason) for a in acks] == [(True, ""), (True, "")]
    assert table_rows(migrated_engine, "e1") == []  # on the row
    assert table_rows(migrated_engine, "e2") == [(1, 1, "succeeded")]  # error text: an attempt row

    history = HistoryStore(migrated_engine, clock)
    execution = await history.get_execution("acme", "e1")
    assert (execution.status, execution.worker_id, execution.owner) == ("succeeded", None, None)
    [attempt] = execution.attempts
    assert (attempt.execution_id, attempt.attempt, attempt.delivery, attempt.status, attempt.worker_id,
            attempt.error, attempt.output) == ("e1", 1, 1, "succeeded", "w1", "", b"\x00out'\\")
    assert to_us(attempt.started_at) == handed["e1"].handed_out_at_us
    assert attempt.finished_at == execution.finished_at == clock.now()
    assert attempt.lateness == timedelta(seconds=2)
    page = await history.list_executions("acme", "job_e1")
    assert [(a.attempt, a.status, a.output) for e in page.executions for a in e.attempts] == [(1, "succeeded", b"")]
    last = await history.last_run("acme", "job_e1")
    assert last is not None and [a.status for a in last.attempts] == ["succeeded"]

    # The same result again is acknowledged and changes nothing; a later delivery's is stale.
    again = await store.outcomes.record_results([result(handed["e1"]), result(handed["e1"], delivery=2)])
    assert [(a.accepted, a.reason) for a in again] == [
        (True, "already recorded"), (False, "stale delivery: the current one is 1 (succeeded)")]
    assert table_rows(migrated_engine, "e1") == []


async def test_a_success_after_a_requeue_and_a_retry_lists_every_attempt_in_order(store, migrated_engine, clock) -> None:
    """Delivery 1 lost, delivery 2 failed (retry), delivery 3 succeeded
    plainly: rows for the first two, the row for the third; read back as
    three attempts, oldest first."""
    add_execution(migrated_engine, clock, "e1")
    [first] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    await store.requeues.requeue("s1", [Lost("e1", first.delivery, "no heartbeat", "w1")], counts=True)
    [second] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    [ack] = await store.outcomes.record_results([result(second, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="x")])
    assert ack.retry is not None
    clock.advance(60)
    [third] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    await store.outcomes.record_results([result(third)])
    assert table_rows(migrated_engine, "e1") == [(1, 1, "lost"), (1, 2, "failed")]
    execution = await HistoryStore(migrated_engine, clock).get_execution("acme", "e1")
    assert [(a.attempt, a.delivery, a.status) for a in execution.attempts] == [
        (1, 1, "lost"), (1, 2, "failed"), (2, 3, "succeeded")]


async def test_retention_rolls_up_the_attempt_on_the_row_with_its_execution(store, migrated_engine, clock) -> None:
    add_execution(migrated_engine, clock, "e1")
    clock.advance(2)
    [handed] = await store.handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 1)
    await store.outcomes.record_results([result(handed)])
    later = clock.now() + timedelta(days=31)
    batch = await RetentionStore(migrated_engine, clock).prune_executions(later)
    assert (batch.executions, batch.attempts) == (1, 1)
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(executions)).scalar() == 0
        [rollup] = conn.execute(sa.select(attempt_rollups)).all()
    assert (rollup.job_id, rollup.day, rollup.runs, rollup.failures) == ("job_e1", day_of(handed.handed_out_at_us), 1, 0)
    assert rollup.lateness_p99_us == pytest.approx(2_000_000, rel=0.01)  # the sketch's relative accuracy
