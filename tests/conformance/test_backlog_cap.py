"""The backlog cap (``policy/backlog.py``) on SQLite and PostgreSQL, through
the real claim (``DispatchStore``), hand-out (``ExecutionQueue``), history
and job store, at fixed instants of a fake clock: a job no worker takes
keeps at most its cap of executions not started, the occurrences past it
are one ``backlog`` skip range that history shows, a worker that comes
takes the kept ones oldest first and the claims create the next ones
again, and pause, resume and update act on a capped job as on any other.
Each scenario ends with the audit of ``test_job_changes``: every
occurrence is one execution row or in one skip range."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.ids import execution_id, from_us, to_us
from tickwheel_server.policy.backlog import BACKLOG_REASON, NOT_STARTED_CAP
from tickwheel_server.store.executions import ResultIn
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.jobexecutions import PAGE
from tickwheel_server.store.tables import executions

from . import test_job_changes
from .test_job_changes import MINUTE, SECOND, TWO_AM, WORKERS, World, daily

w = test_job_changes.w  # the fixture: a world of the real stores, as there

HOUR = timedelta(hours=1)
ALLOW = job_pb2.OVERLAP_POLICY_ALLOW  # nothing here records the runs' ends: no occurrence skipped for overlap


async def nobody_takes(w: World, start: datetime, end: datetime) -> None:
    """The dispatcher's claims every 30 s from ``start`` to ``end``, no worker anywhere."""
    at = start
    while at <= end:
        await w.claim(at)
        at += 30 * SECOND


def not_started(w: World, job_id: str) -> list[datetime]:
    return sorted(from_us(r.nominal_at) for r in w.rows(job_id).values() if r.status in ("scheduled", "waiting"))


def minutes(first: datetime, count: int) -> list[datetime]:
    return [first + n * MINUTE for n in range(count)]


async def test_a_job_nobody_takes_keeps_its_cap_and_one_backlog_range_history_shows(w: World) -> None:
    job = await w.create(daily("* * * * *", overlap_policy=ALLOW), TWO_AM - 45 * SECOND)
    await nobody_takes(w, TWO_AM - 30 * SECOND, TWO_AM + 2 * HOUR)
    stored = await w.jobs.get("acme", job.id)
    assert stored.next_run_at == TWO_AM + 2 * HOUR + 2 * MINUTE, "the cursor keeps the look-ahead, as always"
    assert not_started(w, job.id) == minutes(TWO_AM, NOT_STARTED_CAP), "the oldest ten, and no row more"
    [skip] = w.skips(job.id)
    assert (skip.reason, from_us(skip.from_at), from_us(skip.to_at), skip.count, from_us(skip.continues_at)) == (
        BACKLOG_REASON, TWO_AM + NOT_STARTED_CAP * MINUTE, TWO_AM + 2 * HOUR + MINUTE, 122 - NOT_STARTED_CAP,
        stored.next_run_at,
    ), "one range, extended in place claim after claim"
    page = await HistoryStore(w.engine, w.clock).list_executions("acme", job.id, limit=NOT_STARTED_CAP)
    assert [s.reason for s in page.skips] == [BACKLOG_REASON]
    assert (page.skips[0].from_at, page.skips[0].count) == (TWO_AM + NOT_STARTED_CAP * MINUTE, 112)
    w.audit(stored, TWO_AM, TWO_AM + 2 * HOUR + MINUTE)


async def test_a_worker_arriving_later_takes_them_in_order_and_the_rest_follow(w: World) -> None:
    job = await w.create(daily("* * * * *", overlap_policy=ALLOW), TWO_AM - 45 * SECOND)
    await nobody_takes(w, TWO_AM - 30 * SECOND, TWO_AM + HOUR)
    came = TWO_AM + HOUR + 10 * SECOND
    handed = await w.queue.handout.hand_out_ready("s1", came, WORKERS, 100)
    assert [h.id for h in handed] == [execution_id(job.id, t) for t in minutes(TWO_AM, NOT_STARTED_CAP)], (
        "the kept ones, oldest first; nothing early"
    )
    await w.queue.outcomes.record_results([
        ResultIn(execution_id=h.id, delivery=h.delivery, attempt=h.attempt,
                 outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED, error="", worker_id="w1", tenants=("acme",))
        for h in handed
    ])  # fmt: skip
    await w.claim(came + 50 * SECOND)  # the claim that reaches 03:02: room again
    assert not_started(w, job.id) == [TWO_AM + HOUR + 2 * MINUTE], "the next occurrence is created, not skipped"
    [skip] = w.skips(job.id)
    assert from_us(skip.to_at) == TWO_AM + HOUR + MINUTE and skip.continues_at == to_us(TWO_AM + HOUR + 2 * MINUTE)
    later = TWO_AM + HOUR + 2 * MINUTE
    assert [h.id for h in await w.queue.handout.hand_out_ready("s1", later, WORKERS, 100)] == [
        execution_id(job.id, later)
    ]
    await nobody_takes(w, later + 30 * SECOND, later + 5 * MINUTE)  # nobody again: a new range after the run
    assert len(not_started(w, job.id)) == 6 and len(w.skips(job.id)) == 1  # 03:03 to 03:08
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, later + 5 * MINUTE)


async def test_the_cap_counts_every_execution_not_started_of_the_job(w: World) -> None:
    """Triggers waiting count: a job whose queue is full gets no occurrence more."""
    job = await w.create(daily("* * * * *", overlap_policy=ALLOW), TWO_AM - 45 * SECOND)
    w.clock.set(TWO_AM - 40 * SECOND)
    for n in range(NOT_STARTED_CAP):
        await w.manual.trigger("acme", job.id, f"t{n}")
    await w.claim(TWO_AM - 30 * SECOND)
    assert [r.origin for r in w.rows(job.id).values()] == ["trigger"] * NOT_STARTED_CAP
    [skip] = w.skips(job.id)
    assert (skip.reason, from_us(skip.from_at), skip.count) == (BACKLOG_REASON, TWO_AM, 1)


async def test_a_run_all_catch_up_is_not_cut_by_the_cap(w: World) -> None:
    job_spec = daily("* * * * *", overlap_policy=ALLOW, misfire_policy=job_pb2.MISFIRE_POLICY_RUN_ALL)
    job_spec.misfire_run_all_limit = 30
    job = await w.create(job_spec, TWO_AM - 45 * SECOND)
    await w.claim(TWO_AM + HOUR)  # a dispatcher down for an hour: 30 run, the older 30 skipped (misfire)
    # 02:00 to 02:58 missed (02:59 is on the threshold): the 30 most recent run, and 02:59 to 03:01
    assert len(not_started(w, job.id)) == 33
    assert [(s.reason, s.count) for s in w.skips(job.id)] == [("misfire", 29)]
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, TWO_AM + HOUR + MINUTE)


async def test_pausing_and_resuming_a_capped_job(w: World) -> None:
    job = await w.create(daily("* * * * *", overlap_policy=ALLOW), TWO_AM - 45 * SECOND)
    await nobody_takes(w, TWO_AM - 30 * SECOND, TWO_AM + HOUR)
    assert await w.pause(job.id, TWO_AM + HOUR + 5 * SECOND) == NOT_STARTED_CAP
    resumed_at = TWO_AM + HOUR + 10 * MINUTE
    resumed, skip, released = await w.resume(job.id, resumed_at)
    assert released == 0, "the held ones were more than the threshold late: into the paused span"
    # 03:02 to 03:08 skipped; 03:09 (on the threshold) and 03:10 came due within it: they run late.
    assert (skip.reason, skip.from_at, skip.count) == ("job_paused", TWO_AM + HOUR + 2 * MINUTE, 7)
    assert resumed.next_run_at == TWO_AM + HOUR + 9 * MINUTE
    held, backlog, paused = w.skips(job.id)
    assert (held.reason, from_us(held.from_at), held.count) == ("job_paused", TWO_AM, NOT_STARTED_CAP), (
        "the held ones a range of their own: the backlog range lies between them and the paused span"
    )
    assert (backlog.reason, paused.id) == (BACKLOG_REASON, skip.id)
    assert not_started(w, job.id) == []
    await nobody_takes(w, resumed_at, resumed_at + 20 * MINUTE)
    assert len(not_started(w, job.id)) == NOT_STARTED_CAP and len(w.skips(job.id)) == 4
    w.audit(await w.jobs.get("acme", job.id), TWO_AM, resumed_at + 21 * MINUTE)


async def test_resume_releases_a_queue_longer_than_a_page(w: World) -> None:
    """Rows from before the cap (a backlog a server without it left): the
    resume reads them page by page and releases every one."""
    job = await w.create(daily("0 3 * * *", overlap_policy=ALLOW), TWO_AM - 45 * SECOND)
    queued = _queue(w, job, TWO_AM + 30 * SECOND, 3 * PAGE + 2)
    assert await w.pause(job.id, TWO_AM) == len(queued)
    _, skip, released = await w.resume(job.id, TWO_AM + 10 * SECOND)
    assert (skip, released) == (None, len(queued))
    assert {r.status for r in w.rows(job.id).values()} == {"scheduled"}


async def test_an_update_of_a_capped_job_reaches_its_whole_queue(w: World) -> None:
    job = await w.create(daily("* * * * *", overlap_policy=ALLOW), TWO_AM - 45 * SECOND)
    await nobody_takes(w, TWO_AM - 30 * SECOND, TWO_AM + HOUR)
    queued = _queue(w, job, TWO_AM - HOUR, 2 * PAGE)  # and older rows, as a server without the cap left them

    def change(j: job_pb2.Job) -> None:
        j.payload = b"v2"
        j.target.handler.name = "mail"

    _, canceled = await w.update(job.id, TWO_AM + HOUR + 5 * SECOND, change)
    rows = w.rows(job.id)
    assert canceled == 0 and len(rows) == NOT_STARTED_CAP + len(queued)
    assert {(r.payload, r.handler) for r in rows.values()} == {(b"v2", "mail")}

    def every_two_minutes(j: job_pb2.Job) -> None:
        j.schedule.cron.expression = "*/2 * * * *"

    _, canceled = await w.update(job.id, TWO_AM + HOUR + 10 * SECOND, every_two_minutes)
    rows = w.rows(job.id)
    odd = [r for r in rows.values() if from_us(r.nominal_at).minute % 2]
    assert canceled == len(odd) == (NOT_STARTED_CAP + len(queued)) // 2
    assert {r.status for r in odd} == {"canceled"}
    assert {r.status for r in rows.values() if not from_us(r.nominal_at).minute % 2} == {"scheduled"}


def _queue(w: World, job, first: datetime, count: int) -> list[str]:
    """``count`` minutely occurrences from ``first``, not started, as the claim inserts them."""
    rows = [
        dict(id=execution_id(job.id, first + n * MINUTE), job_id=job.id, tenant="acme", partition=job.partition,
             origin="scheduled", nominal_at=to_us(first + n * MINUTE), due_at=to_us(first + n * MINUTE),
             ready_at=to_us(first + n * MINUTE), attempt=1, delivery=0, status="scheduled", handler="echo",
             missed_count=1, reap_count=0, payload=b"v1", error="", dead_reason="", created_at=0, allow_overlap=False)
        for n in range(count)
    ]  # fmt: skip
    with w.engine.begin() as conn:
        conn.execute(executions.insert(), rows)
    return [row["id"] for row in rows]


@pytest.mark.parametrize("policy", [job_pb2.OVERLAP_POLICY_SKIP, job_pb2.OVERLAP_POLICY_QUEUE_ONE])
async def test_under_overlap_skip_or_queue_one_the_cap_holds_too(w: World, policy) -> None:
    job = await w.create(daily("* * * * *", overlap_policy=policy), TWO_AM - 45 * SECOND)
    await nobody_takes(w, TWO_AM - 30 * SECOND, TWO_AM + HOUR)
    assert len(not_started(w, job.id)) == NOT_STARTED_CAP
    assert [s.reason for s in w.skips(job.id)] == [BACKLOG_REASON]
    rows = sa.select(executions.c.id)  # nothing else was written for the job
    with w.engine.connect() as conn:
        assert len(conn.execute(rows.where(executions.c.job_id == job.id)).all()) == NOT_STARTED_CAP
