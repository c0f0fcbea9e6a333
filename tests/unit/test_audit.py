"""The fault tests' occurrence audit (tests/support/audit.py), against hand-made rows:
each rule it enforces is shown to fail when broken."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from tickwheel.v1 import job_pb2

from tests.support.audit import (
    AttemptRow, Deliveries, ExecutionRow, JobRow, Occurrence, SkipRow, Snapshot, created_at, expected_occurrences,
    problems, settle_by, unsettled,
)
from tickwheel.shared.ids import new_job_id, to_us

T0 = datetime(2030, 5, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc)
S = 1_000_000  # a second, in microseconds


HOOK = job_pb2.Target(http=job_pb2.HttpTarget(url="http://127.0.0.1:9/hook"))


def once_job(at: datetime, tenant: str = "acme", made: datetime = T0) -> JobRow:
    job = job_pb2.Job(name="once", target=HOOK)
    job.schedule.once_at.FromDatetime(at)
    return JobRow(new_job_id(made), tenant, job.SerializeToString())


def cron_job(expression: str, tenant: str = "acme", made: datetime = T0, exact: bool = True) -> JobRow:
    job = job_pb2.Job(name="cron", target=HOOK)
    job.schedule.cron.expression = expression
    job.jitter.exact = exact
    return JobRow(new_job_id(made), tenant, job.SerializeToString())


def ran(o: Occurrence, *, status: str = "succeeded", attempt: int = 1, delivery: int = 1, worker: str = "w1",
        late: int = 1000, **changes) -> tuple[ExecutionRow, list[AttemptRow]]:
    """An execution of ``o`` that ended ``status`` and its attempt rows (one per delivery up to ``delivery``)."""
    row = ExecutionRow(o.key, o.job_id, o.tenant, status, o.nominal_at, o.due_at, attempt, delivery,
                       delivery - 1, "" if status == "succeeded" else "some reason", o.due_at + late)
    rows = [
        AttemptRow(o.key, attempt, d, status if d == delivery else "lost", o.due_at + late * d, worker,
                   o.due_at + late * d + 10)
        for d in range(1, delivery + 1)
    ]
    return replace(row, **changes), rows


def snapshot(jobs, *runs, skips=()) -> Snapshot:
    return Snapshot(list(jobs), [r for r, _ in runs], [a for _, rows in runs for a in rows], list(skips))


@pytest.fixture
def window():
    """Three one-off jobs of acme, one of globex, and a minutely cron job of acme over five minutes."""
    jobs = [once_job(T0 + timedelta(seconds=5 + i)) for i in range(3)]
    other = once_job(T0 + timedelta(seconds=6), tenant="globex")
    cron = cron_job("* * * * *")
    until = T0 + timedelta(minutes=5)
    expected = expected_occurrences([*jobs, other, cron], until)
    return [*jobs, other, cron], expected, cron


def test_created_at_is_the_instant_of_the_job_ids_ulid() -> None:
    assert created_at(new_job_id(T0)) == T0.replace(microsecond=250_000)


def test_expected_occurrences_come_from_the_schedule_after_the_jobs_creation(window) -> None:
    jobs, expected, cron = window
    of_cron = [o for o in expected if o.job_id == cron.id]
    # Created at 12:00:00.25, a minutely job fires at 12:01 … 12:05 before 12:05:00.25 (not at 12:00, before creation).
    assert [o.nominal_at for o in of_cron] == [to_us(T0.replace(microsecond=0) + timedelta(minutes=m)) for m in range(1, 6)]
    assert len(expected) == 4 + 5
    # Jitter comes from the engine too: the default window spreads the due instant from the nominal.
    jittered = cron_job("* * * * *", exact=False)
    [first, *_] = expected_occurrences([jittered], T0 + timedelta(minutes=2))
    assert first.due_at >= first.nominal_at
    with pytest.raises(ValueError, match="updated"):
        expected_occurrences([replace(cron, version=2)], T0 + timedelta(minutes=2))


def test_settling_is_waited_for_from_the_latest_due_instant_not_from_now() -> None:
    """A cron run nominally inside a fault's window runs from its due
    instant, up to its jitter window (a minute) later: 35 s after the fault
    it may not be due yet, so the wait counts from that due instant (what a
    full suite once took for a run late after a read-only fault)."""
    nominal = T0.replace(microsecond=0)
    fault_end = nominal + timedelta(seconds=3)
    cron = Occurrence("cron", "globex", to_us(nominal), to_us(nominal + timedelta(seconds=50)))
    once = Occurrence("once", "acme", to_us(nominal - timedelta(seconds=2)), to_us(nominal - timedelta(seconds=2)))
    assert settle_by([once, cron], fault_end, 35) == nominal + timedelta(seconds=85)
    # What is due already, or nothing at all: from now.
    assert settle_by([once], fault_end, 35) == fault_end + timedelta(seconds=35)
    assert settle_by([], fault_end, 35) == fault_end + timedelta(seconds=35)


def test_a_window_where_everything_ran_once_is_clean(window) -> None:
    jobs, expected, cron = window
    runs = [ran(o) for o in expected if o.job_id != cron.id or o.nominal_at < expected[-1].nominal_at]
    # The cron job's last occurrence was missed and recorded as skipped, with a reason.
    last = expected[-1]
    skip = SkipRow(cron.id, last.nominal_at, last.nominal_at, 1, "misfire")
    deliveries = Deliveries()
    for row, _ in runs:
        deliveries.saw(row.id, row.attempt, row.delivery)
    assert problems(expected, snapshot(jobs, *runs, skips=[skip]), deliveries=deliveries,
                    unaffected={"globex": ["w1"]}) == []
    assert unsettled(expected, snapshot(jobs, *runs, skips=[skip])) == []


def test_an_occurrence_with_no_execution_and_no_skip_is_lost(window) -> None:
    jobs, expected, _ = window
    runs = [ran(o) for o in expected[1:]]
    [problem] = problems(expected, snapshot(jobs, *runs))
    assert problem.startswith(f"{expected[0].key}: lost")
    assert unsettled(expected, snapshot(jobs, *runs)) == [expected[0].key]


def test_an_occurrence_both_run_and_skipped_or_under_a_second_key_is_a_duplicate(window) -> None:
    jobs, expected, cron = window
    runs = [ran(o) for o in expected]
    last = expected[-1]
    found = problems(expected, snapshot(jobs, *runs, skips=[SkipRow(cron.id, last.nominal_at, last.nominal_at, 1, "overlap")]))
    assert found == [f"{last.key}: both an execution (succeeded) and skipped ('overlap')"]
    # The same occurrence run again under another id (a key the target cannot recognise).
    twin, twin_attempts = ran(last)
    twin = replace(twin, id=last.key + ".again")
    found = problems(expected, snapshot(jobs, *runs, (twin, [replace(a, execution_id=twin.id) for a in twin_attempts])))
    assert found == [f"{twin.id}: an execution (succeeded) that is no expected occurrence of job {cron.id}"]


def test_in_flight_is_a_problem_unless_allowed_and_dead_or_canceled_need_a_reason(window) -> None:
    jobs, expected, _ = window
    runs = [ran(o) for o in expected]
    runs[0] = ran(expected[0], status="running")
    runs[1] = ran(expected[1], status="dead", dead_reason="")
    runs[2] = ran(expected[2], status="canceled", dead_reason="")
    found = problems(expected, snapshot(jobs, *runs))
    assert found == [
        f"{expected[0].key}: still running (attempt 1, delivery 1)",
        f"{expected[1].key}: dead without a reason",
        f"{expected[2].key}: canceled without a reason",
    ]
    assert problems(expected, snapshot(jobs, *runs), in_flight_ok=True) == found[1:]


def test_an_attempt_handed_out_or_started_before_its_due_instant_is_early(window) -> None:
    jobs, expected, _ = window
    runs = [ran(o) for o in expected]
    first = expected[0]
    row, [attempt] = runs[0]
    runs[0] = (row, [replace(attempt, started_at=first.due_at - 1)])
    row, [attempt] = runs[1]
    runs[1] = (row, [replace(attempt, worker_started_at=expected[1].due_at - S)])
    found = problems(expected, snapshot(jobs, *runs))
    assert len(found) == 2
    assert found[0].startswith(f"{first.key} attempt 1 delivery 1: handed out at") and "early" in found[0]
    assert found[1].startswith(f"{expected[1].key} attempt 1 delivery 1: worker started at") and "early" in found[1]
    # The execution's own hand-out stamp is checked too.
    runs = [ran(o) for o in expected]
    runs[2] = (replace(runs[2][0], handed_out_at=expected[2].due_at - 5), runs[2][1])
    [problem] = problems(expected, snapshot(jobs, *runs))
    assert "before it was due" in problem


def test_instants_and_tenant_must_be_the_schedules(window) -> None:
    jobs, expected, _ = window
    runs = [ran(o) for o in expected]
    runs[0] = (replace(runs[0][0], due_at=expected[0].due_at + S), runs[0][1])
    runs[1] = (replace(runs[1][0], tenant="globex"), runs[1][1])
    found = problems(expected, snapshot(jobs, *runs))
    assert "the schedule says" in found[0] and "tenant 'globex'" in found[1] and len(found) == 2


def test_the_targets_view_is_checked_for_http_jobs_only(window) -> None:
    jobs, expected, _ = window
    handler = job_pb2.Job(name="h", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    handler.schedule.once_at.FromDatetime(T0 + timedelta(seconds=9))
    job = JobRow(new_job_id(T0), "acme", handler.SerializeToString())
    [occurrence] = expected_occurrences([job], T0 + timedelta(minutes=1))
    # A handler never calls the HTTP target: nothing to have been received.
    assert problems([occurrence], snapshot([job], ran(occurrence)), deliveries=Deliveries()) == []


def test_two_successes_or_a_success_the_target_never_received_are_problems(window) -> None:
    jobs, expected, _ = window
    runs = [ran(o) for o in expected]
    row, [attempt] = runs[0]
    runs[0] = (replace(row, delivery=2), [attempt, replace(attempt, delivery=2)])
    found = problems(expected, snapshot(jobs, *runs))
    assert found == [
        f"{expected[0].key}: succeeded 2 times: [(1, 1), (1, 2)]",
        f"{expected[0].key}: succeeded at attempt 1 delivery 2, but its succeeded attempts are [(1, 1), (1, 2)]",
    ]
    deliveries = Deliveries()
    for row, _ in runs[1:]:
        deliveries.saw(row.id, row.attempt, row.delivery)
    deliveries.saw(expected[1].key, 1, 1)  # the same call twice
    deliveries.saw(expected[2].job_id + ":2030-05-01T12:00:07.5Z", 1, 1)  # a key no occurrence has
    run = [ran(o) for o in expected]
    found = problems(expected, snapshot(jobs, *run), deliveries=deliveries)
    assert found == [
        f"{expected[0].key}: succeeded at attempt 1 delivery 1, which the target never received (it saw [])",
        f"{expected[1].key}: the target received the same (attempt, delivery) more than once: [(1, 1)]",
        f"{expected[2].job_id}:2030-05-01T12:00:07.5Z: the target received 1 call(s) under a key no occurrence has",
    ]


def test_a_skip_range_must_count_the_occurrences_it_covers(window) -> None:
    jobs, expected, cron = window
    of_cron = [o for o in expected if o.job_id == cron.id]
    runs = [ran(o) for o in expected if o not in of_cron]
    skip = SkipRow(cron.id, of_cron[0].nominal_at, of_cron[-1].nominal_at, 3, "paused")
    [problem] = problems(expected, snapshot(jobs, *runs, skips=[skip]))
    assert "counts 3, the schedule has 5" in problem
    assert problems(expected, snapshot(jobs, *runs, skips=[replace(skip, count=5)])) == []
    [problem] = problems(expected, snapshot(jobs, *runs, skips=[replace(skip, count=5, reason="")]))
    assert problem.endswith("without a reason")


def test_an_unaffected_tenant_ran_each_execution_once_by_its_own_workers(window) -> None:
    jobs, expected, _ = window
    theirs = next(o for o in expected if o.tenant == "globex")
    others = [ran(o) for o in expected if o is not theirs]
    clean = ran(theirs, worker="g1")
    deliveries = Deliveries()
    for row, _ in [*others, clean]:
        deliveries.saw(row.id, 1, 1)
    assert problems(expected, snapshot(jobs, *others, clean), unaffected={"globex": ["g1"]}) == []
    # Recorded by another tenant's worker (a forged result): the audit of the
    # occurrence alone is clean, the tenant was still affected.
    forged = ran(theirs, worker="hostile")
    [problem] = problems(expected, snapshot(jobs, *others, forged), unaffected={"globex": ["g1"]})
    assert "not one success by its own workers ['g1']" in problem
    # Requeued and run twice (a re-attach stolen and dropped): a recognisable duplicate, still affected.
    twice = ran(theirs, worker="g1", delivery=2)
    deliveries.saw(theirs.key, 1, 2)
    found = problems(expected, snapshot(jobs, *others, twice), deliveries=None, unaffected={"globex": ["g1"]})
    assert "affected: succeeded, attempt 1, delivery 2, requeued 1 times" in found[0]
    found = problems(expected, snapshot(jobs, *others, clean), deliveries=deliveries, unaffected={"globex": ["g1"]})
    assert found == [f"tenant globex: {theirs.key} reached its target 2 times: [(1, 1), (1, 2)]"]
    # Dead-lettered by a forged failure.
    dead = ran(theirs, worker="hostile", status="dead", dead_reason="forged")
    found = problems(expected, snapshot(jobs, *others, dead), unaffected={"globex": ["g1"]})
    assert any("affected: dead" in line and "forged" in line for line in found)
    # A tenant with nothing to compare is not silently clean.
    assert problems(expected, snapshot(jobs, *others, clean), unaffected={"initech": ["i1"]}) == [
        "tenant initech: no executions to compare (the test ran none?)"
    ]
