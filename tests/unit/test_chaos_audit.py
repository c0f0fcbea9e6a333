"""The chaos run's plan and audit (tests/support/chaos.py) against hand-made
rows: the fault plan keeps its promises for any seed, the expected instants
follow the job's zone, and each rule of the audit fails when broken."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from tickwheel.v1 import job_pb2

from tests.support import audit
from tests.support.chaos import (
    CRON_ROOM, KINDS, MUTEX_KEY, SERVERS, WORKERS, PlannedJob, chaos_problems, expected_nominals, fault_plan, job_plan,
    window_end,
)
from tests.support.faults import Call
from tickwheel.shared.ids import execution_id, new_job_id, to_us

UTC = timezone.utc
T0 = datetime(2030, 5, 1, 8, 10, 0, 250_000, tzinfo=UTC)
UNTIL = T0 + timedelta(seconds=55)
URL = "http://127.0.0.1:9"


@pytest.mark.parametrize("seed", range(40))
def test_a_fault_plan_has_every_kind_and_never_hits_one_subject_twice_at_once(seed: int) -> None:
    plan = fault_plan(random.Random(seed), 45.0)
    assert plan == fault_plan(random.Random(seed), 45.0), "a seed replays its plan"
    assert set(KINDS) <= {fault.kind for fault in plan} and len(plan) <= len(KINDS) + 3
    for fault in plan:
        assert 1.0 <= fault.at and fault.at + fault.lasts <= 45.0
        during = [o for o in plan if o is not fault and o.at < fault.at + fault.lasts and fault.at < o.at + o.lasts]
        assert fault.subject not in {o.subject for o in during}
        assert sum(o.subject in SERVERS for o in during) < 2 or fault.subject not in SERVERS
        assert sum(o.subject in WORKERS for o in during) < 2 or fault.subject not in WORKERS
    assert len(fault_plan(random.Random(seed), 45.0, extra=0)) == len(KINDS)
    freezes = [fault for fault in plan if fault.kind == "freeze_server"]
    assert all(fault.lasts > 2 for fault in freezes), "a freeze outlasts the session TTL"


def test_expected_instants_follow_the_jobs_zone_not_utc() -> None:
    # 08:10 UTC is 13:55 in Kathmandu (+05:45): its hour 14 starts at 08:15 UTC.
    job = PlannedJob("acme", "kathmandu", "/ok", "cron", expression="* 14 * * *", zone="Asia/Kathmandu")
    until = T0.replace(minute=20, microsecond=0)
    assert expected_nominals(job, T0, until) == [datetime(2030, 5, 1, 8, m, tzinfo=UTC) for m in range(15, 20)]
    # The same expression in UTC has none in that window.
    assert expected_nominals(replace(job, zone="UTC"), T0, until) == []
    once = PlannedJob("acme", "once", "/ok", "once", once_at=T0 + timedelta(seconds=3))
    assert expected_nominals(once, T0, until) == [T0 + timedelta(seconds=3)]


def test_the_job_plan_is_the_seeds_and_names_every_target_kind() -> None:
    jobs = job_plan(random.Random(7), T0, UNTIL)
    assert [(j.name, j.once_at) for j in jobs] == [(j.name, j.once_at) for j in job_plan(random.Random(7), T0, UNTIL)]
    assert {j.path for j in jobs} == {"/ok", "/brief", "/hold", "/flaky", "/fail"}
    assert all(T0 < j.once_at < UNTIL for j in jobs if j.schedule == "once")
    assert sum(j.mutex for j in jobs) == 4


@pytest.mark.parametrize("offset", range(0, 3600, 11))
def test_every_recurring_job_fires_in_its_window_whenever_it_starts(offset: int) -> None:
    # Any start in an hour (an hour boundary of some zone falls in some windows:
    # London's at :00, Kathmandu's at :15, Kolkata's at :30).
    start = datetime(2030, 5, 1, 8, 0, tzinfo=UTC) + timedelta(seconds=offset, microseconds=123_456)
    until = window_end(start, 40.0)
    assert 39 < (until - start).total_seconds() <= 71
    boundaries = [n for n in expected_nominals(PlannedJob("a", "m", "/ok", "cron", expression="* * * * *"), start, until)]
    assert boundaries and boundaries[-1] <= until - CRON_ROOM
    for job in job_plan(random.Random(offset), start, until):
        if job.schedule == "cron":
            fires = expected_nominals(job, start - timedelta(seconds=4), until)
            assert bool(fires) == job.bounded, (job.name, job.expression, job.zone, fires)


# --------------------------------------------------------------------------- the audit


def planned(path: str = "/ok", *, tenant: str = "acme", at: datetime = T0 + timedelta(seconds=5), **changes) -> PlannedJob:
    job = PlannedJob(tenant, f"once{path}", path, "once", once_at=at, **changes)
    job.job_id = new_job_id(T0)
    return job


def rows_of(job: PlannedJob) -> audit.JobRow:
    return audit.JobRow(job.job_id, job.tenant, job.proto(URL, UNTIL).SerializeToString())


class Run:
    """A window's jobs and what the store and target hold for them, built up by the cases below."""

    def __init__(self, *jobs: PlannedJob) -> None:
        self.jobs = list(jobs)
        self.executions: list[audit.ExecutionRow] = []
        self.attempts: list[audit.AttemptRow] = []
        self.skips: list[audit.SkipRow] = []
        self.deliveries = audit.Deliveries()
        self.calls: list[Call] = []
        self.triggers: dict[str, str] = {}

    def ran(self, job: PlannedJob, *, worker: str = "w-acme-globex", late: int = 1000, attempts: int = 1,
            status: str = "succeeded", key: str | None = None, began: float = 0.0, **changes) -> None:
        """One execution of ``job``'s occurrence, each attempt failing but the last, which ends ``status``."""
        due = to_us(job.once_at)
        key = key or execution_id(job.job_id, job.once_at)
        for attempt in range(1, attempts + 1):
            ended = "succeeded" if attempt == attempts and status == "succeeded" else "failed"
            self.attempts.append(audit.AttemptRow(key, attempt, 1, ended, due + late * attempt, worker))
            self.deliveries.saw(key, attempt, 1)
            self.calls.append(Call(key, attempt, 1, began, began + 1.5, 200 if ended == "succeeded" else 500))
        row = audit.ExecutionRow(key, job.job_id, job.tenant, status, due, due, attempts, 1, 0,
                                 "" if status == "succeeded" else "attempts exhausted", due + late)  # fmt: skip
        self.executions.append(replace(row, **changes))

    def problems(self) -> list[str]:
        snapshot = audit.Snapshot([rows_of(job) for job in self.jobs], self.executions, self.attempts, self.skips)
        return chaos_problems(self.jobs, snapshot, UNTIL, self.deliveries, self.calls, self.triggers)


def test_a_clean_window_has_no_problem() -> None:
    ok, flaky, fail = planned("/ok"), planned("/flaky"), planned("/fail", tenant="globex")
    run = Run(ok, flaky, fail)
    run.ran(ok)
    run.ran(flaky, attempts=2)
    run.ran(fail, attempts=2, status="dead")
    assert run.problems() == []


def test_a_lost_occurrence_is_named() -> None:
    ok, other = planned("/ok"), planned("/ok")
    run = Run(ok, other)
    run.ran(ok)
    [line] = run.problems()
    assert line.startswith(execution_id(other.job_id, other.once_at)) and "lost" in line


def test_a_second_execution_of_one_job_is_named() -> None:
    ok = planned("/ok")
    run = Run(ok)
    run.ran(ok)
    run.ran(ok, key=execution_id(ok.job_id, ok.once_at + timedelta(seconds=1)))
    assert any("no expected occurrence" in line for line in run.problems())


def test_a_hand_out_before_the_due_instant_is_named() -> None:
    ok = planned("/ok")
    run = Run(ok)
    run.ran(ok, late=-1000)
    assert any("early" in line for line in run.problems())


def test_a_retried_job_that_succeeded_at_once_or_a_dead_one_that_succeeded_is_named() -> None:
    flaky, fail = planned("/flaky"), planned("/fail")
    run = Run(flaky, fail)
    run.ran(flaky)
    run.ran(fail)
    found = run.problems()
    assert any("succeeded at attempt 1" in line and "expected succeeded at attempt 2" in line for line in found)
    assert any("expected dead at attempt 2" in line for line in found)


def test_an_attempt_by_a_worker_without_the_tenants_credential_is_named() -> None:
    ok = planned("/ok", tenant="initech")
    run = Run(ok)
    run.ran(ok, worker="w-acme-globex")
    assert any("holds no credential for initech" in line for line in run.problems())
    # The reaper's lost row names no worker: that is no problem; a success naming none is.
    run = Run(ok)
    run.ran(ok, worker="w-globex-initech")
    run.attempts.append(audit.AttemptRow(run.executions[0].id, 1, 0, "lost", to_us(ok.once_at) + 10, ""))
    assert run.problems() == []
    run.attempts[0] = replace(run.attempts[0], worker_id="")
    assert any("holds no credential" in line for line in run.problems())


def test_a_skip_is_named_unless_it_is_the_queue_one_jobs_overlap() -> None:
    ok = planned("/ok")
    run = Run(ok)
    run.ran(ok)
    run.skips.append(audit.SkipRow(ok.job_id, to_us(ok.once_at) + 1, to_us(ok.once_at) + 1, 0, "misfire"))
    assert any("skipped 0 ('misfire')" in line for line in run.problems())


def test_a_pair_under_one_concurrency_key_that_ran_at_once_is_named() -> None:
    at = T0 + timedelta(seconds=9)
    a, b = planned("/hold", at=at, mutex=True), planned("/hold", at=at, mutex=True)
    run = Run(a, b)
    run.ran(a, began=100.0)
    run.ran(b, began=101.6)
    assert run.problems() == []
    run = Run(a, b)
    run.ran(a, began=100.0)
    run.ran(b, began=101.0)
    assert any(f"ran at once under {MUTEX_KEY!r}" in line for line in run.problems())
    # A requeued one may still run on the worker that lost it: not held against the key.
    run = Run(a, b)
    run.ran(a, began=100.0, delivery=2, reap_count=1)
    run.ran(b, began=101.0)
    assert not any("ran at once" in line for line in run.problems())


def test_the_independent_expectation_and_the_engines_must_agree() -> None:
    job = PlannedJob("acme", "kathmandu", "/ok", "cron", expression="* 14 * * *", zone="Asia/Kathmandu")
    job.job_id = new_job_id(T0)
    until = T0.replace(minute=17, microsecond=0)
    run = Run(job)
    for minute in (15, 16):
        nominal = T0.replace(minute=minute, second=0, microsecond=0)
        run.executions.append(audit.ExecutionRow(execution_id(job.job_id, nominal), job.job_id, "acme", "succeeded",
                                                 to_us(nominal), to_us(nominal), 1, 1, 0, "", to_us(nominal) + 5))
        run.attempts.append(audit.AttemptRow(execution_id(job.job_id, nominal), 1, 1, "succeeded", to_us(nominal) + 5,
                                             "w-acme-globex"))  # fmt: skip
        run.deliveries.saw(execution_id(job.job_id, nominal), 1, 1)
    snapshot = audit.Snapshot([audit.JobRow(job.job_id, "acme", job.proto(URL, until).SerializeToString())],
                              run.executions, run.attempts, [])  # fmt: skip
    assert chaos_problems([job], snapshot, until, run.deliveries, []) == []
    # A definition stored in another zone than the one planned: the engine expects other instants.
    stored = job.proto(URL, until)
    stored.schedule.cron.time_zone = "Asia/Kolkata"  # +05:30: hour 14 starts at 08:30 UTC
    snapshot = replace(snapshot, jobs=[audit.JobRow(job.job_id, "acme", stored.SerializeToString())])
    found = chaos_problems([job], snapshot, until, run.deliveries, [])
    assert sum("expected by croniter, not by the schedule engine" in line for line in found) == 2
    assert job_pb2.Job.FromString(snapshot.jobs[0].spec).schedule.cron.time_zone == "Asia/Kolkata"


def test_a_trigger_runs_once_never_early_and_never_beside_its_jobs_run() -> None:
    job = planned("/hold")
    key = f"{job.job_id}:trigger:t1"
    run = Run(job)
    run.triggers[key] = job.job_id
    run.ran(job, began=100.0)
    lost = f"{key} (once/hold): lost: a trigger that was answered has no execution"
    assert [line for line in run.problems() if line.startswith(key)] == [lost]
    run.ran(job, key=key, began=101.6)  # after the scheduled run's call ended: queued behind it
    assert run.problems() == []
    run.executions[-1] = replace(run.executions[-1], status="dead", dead_reason="x")
    assert any(line.startswith(f"{key} (acme/once/hold /hold): dead") for line in run.problems())

    run = Run(job)
    run.triggers[key] = job.job_id
    run.ran(job, began=100.0)
    run.ran(job, key=key, began=100.5)
    assert any("ran at once (a trigger queues behind a running one)" in line for line in run.problems())

    run = Run(job)
    run.triggers[key] = job.job_id
    run.ran(job, began=100.0)
    run.ran(job, key=key, began=102.0, late=-5)
    assert any(line.startswith(f"{key} attempt 1 delivery 1: started at") and "early" in line for line in run.problems())
    # The target saw the trigger's key, which is no occurrence's: not a problem for a trigger.
    run.attempts = [replace(a, started_at=a.started_at + 10) for a in run.attempts]
    assert run.problems() == []
    del run.deliveries.calls[key]
    assert any(line.startswith(f"{key}: the target saw []") for line in run.problems())
