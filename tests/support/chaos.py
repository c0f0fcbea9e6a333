"""The chaos run's plan and audit (tests/integration/test_chaos.py): the
seeded plans of faults and jobs, the expected occurrences computed without
the server's schedule engine, and the per-occurrence audit. Pure;
table-tested against hand-made rows in tests/unit/test_chaos_audit.py."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter
from tickwheel.v1 import job_pb2

from tests.support import audit
from tests.support.faults import SESSION_TTL, Call, RecordingTarget
from tickwheel.shared.ids import execution_id, from_us, to_us

TENANTS = ("acme", "globex", "initech")
WORKERS = {"w-acme-globex": ("acme", "globex"), "w-globex-initech": ("globex", "initech"),
           "w-initech-acme": ("initech", "acme")}  # fmt: skip
"""Each worker's id and the tenants its credential holds: every tenant has two."""
SERVERS = ("s0", "s1", "s2")
MUTEX_KEY = "chaos-mutex"
JITTER_WINDOW = 5
"""Seconds: the jitter window of the cron jobs that are not exact."""
CRON_ROOM = timedelta(seconds=8)
"""A window holds a minute boundary at least this long before its end: the
recurring jobs fire there, jitter and a hand-out included, within it."""


# --------------------------------------------------------------------------- the target


def chaos_target() -> RecordingTarget:
    """The run's target (:class:`RecordingTarget`): ``/ok``, ``/brief``,
    ``/hold`` (1.5 s), ``/flaky`` (fails attempt 1), ``/fail``."""
    return RecordingTarget(hold=1.5)


OUTCOME = {"/ok": ("succeeded", 1), "/brief": ("succeeded", 1), "/hold": ("succeeded", 1),
           "/flaky": ("succeeded", 2), "/fail": ("dead", 2)}  # fmt: skip
"""The terminal state and final attempt number each target path implies."""


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Fault:
    kind: str  # kill_server, freeze_server, kill_worker, restart_postgres, restart_etcd
    subject: str  # a server or worker id, "postgres" or "etcd"
    at: float  # seconds after the run's start
    lasts: float  # seconds until the restart (or SIGCONT)

    def __str__(self) -> str:
        return f"{self.at:5.1f}s +{self.lasts:.1f}s {self.kind} {self.subject}"


KINDS = ("kill_server", "freeze_server", "kill_worker", "restart_postgres", "restart_etcd")
DURATION = {
    "kill_server": (0.5, 4.0),
    "freeze_server": (SESSION_TTL + 1.0, SESSION_TTL + 3.0),  # past the session TTL
    "kill_worker": (0.5, 3.0),
    "restart_postgres": (0.5, 3.0),
    "restart_etcd": (0.5, SESSION_TTL + 2.0),  # sometimes within the TTL, sometimes past it
}


def fault_plan(rng: random.Random, span: float, extra: int | None = None) -> list[Fault]:
    """Each kind of fault once and ``extra`` more (one to three when None),
    at instants in ``[1, span)``; one subject is never hit twice at once, at
    most two servers and two workers are down (or frozen) at once (a fault
    that finds no such place in 100 draws is left out)."""
    more = rng.randint(1, 3)
    kinds = list(KINDS) + [rng.choice(KINDS) for _ in range(more if extra is None else extra)]
    rng.shuffle(kinds)
    plan: list[Fault] = []

    def busy(fault: Fault, others: list[Fault]) -> list[Fault]:
        return [o for o in others if o.at < fault.at + fault.lasts + 0.5 and fault.at < o.at + o.lasts + 0.5]

    for kind in kinds:
        for _ in range(100):
            low, high = DURATION[kind]
            lasts = round(rng.uniform(low, high), 1)
            at = round(rng.uniform(1.0, span - lasts), 1)
            if kind in ("kill_server", "freeze_server"):
                subject = rng.choice(SERVERS)
            elif kind == "kill_worker":
                subject = rng.choice(sorted(WORKERS))
            else:
                subject = kind.removeprefix("restart_")
            fault = Fault(kind, subject, at, lasts)
            overlapping = busy(fault, plan)
            if any(o.subject == subject for o in overlapping):
                continue
            if subject in SERVERS and sum(o.subject in SERVERS for o in overlapping) >= 2:
                continue
            if subject in WORKERS and sum(o.subject in WORKERS for o in overlapping) >= 2:
                continue
            plan.append(fault)
            break
    return sorted(plan, key=lambda f: f.at)


# --------------------------------------------------------------------------- the jobs


@dataclass
class PlannedJob:
    tenant: str
    name: str
    path: str
    schedule: str  # "once" or "cron"
    once_at: datetime | None = None
    expression: str = ""
    zone: str = "UTC"
    jitter: int = 0  # seconds of jitter window; 0 means exact
    overlap: int = job_pb2.OVERLAP_POLICY_SKIP
    mutex: bool = False
    bounded: bool = True  # ends at the window's end (a job that would never fire there is refused)
    job_id: str = ""

    def proto(self, url: str, end_at: datetime) -> job_pb2.Job:
        job = job_pb2.Job(name=self.name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url + self.path)),
                          overlap_policy=self.overlap)  # fmt: skip
        if self.schedule == "once":
            job.schedule.once_at.FromDatetime(self.once_at)
        else:
            job.schedule.cron.expression = self.expression
            job.schedule.cron.time_zone = self.zone
            if self.bounded:
                job.end_at.FromDatetime(end_at)
            if self.jitter:
                job.jitter.window.FromSeconds(self.jitter)
            else:
                job.jitter.exact = True
        job.retry_policy.max_attempts = 2 if self.path == "/fail" else 5
        job.retry_policy.initial_backoff.FromMilliseconds(100)
        job.retry_policy.max_backoff.FromMilliseconds(300)
        if self.mutex:
            job.concurrency_keys.add(key=MUTEX_KEY, limit=1)
        return job


def window_end(start: datetime, least: float) -> datetime:
    """The end of a window starting at ``start``: at least ``least`` seconds
    later and holding a minute boundary (cron's resolution) at least
    :data:`CRON_ROOM` before its end, so that the recurring jobs fire
    (jitter included) inside it; whole seconds."""
    boundary = (start + timedelta(seconds=2)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return max(start + timedelta(seconds=least), boundary + CRON_ROOM).replace(microsecond=0)


def local_hour(zone: str, at: datetime, shift: int = 0) -> int:
    return (at.astimezone(ZoneInfo(zone)).hour + shift) % 24


def job_plan(rng: random.Random, start: datetime, until: datetime) -> list[PlannedJob]:
    """The recurring jobs and one-offs due across ``[start + 1 s, until - 2 s)``.

    The window holds a minute boundary at least ``CRON_ROOM`` before its end
    (the caller chose ``until`` so): the recurring jobs' hour fields name
    each zone's local hour at the last such boundary, so that each fires
    there (a job that never fires in its window is refused)."""
    anchor = (until - CRON_ROOM).replace(second=0, microsecond=0)
    jobs = [
        PlannedJob("acme", "every-minute-london", "/brief", "cron", expression="* * * * *", zone="Europe/London",
                   jitter=JITTER_WINDOW),
        PlannedJob("acme", "queue-one", "/hold", "cron", expression="* * * * *", overlap=job_pb2.OVERLAP_POLICY_QUEUE_ONE),
        PlannedJob("globex", "this-hour-new-york", "/ok", "cron",
                   expression=f"* {local_hour('America/New_York', anchor)} * * *", zone="America/New_York"),
        PlannedJob("globex", "this-hour-kathmandu-flaky", "/flaky", "cron",
                   expression=f"* {local_hour('Asia/Kathmandu', anchor)} * * *", zone="Asia/Kathmandu"),
        PlannedJob("initech", "this-hour-lord-howe", "/ok", "cron",
                   expression=f"* {local_hour('Australia/Lord_Howe', anchor)} * * *", zone="Australia/Lord_Howe",
                   jitter=JITTER_WINDOW),
        PlannedJob("initech", "other-hour-kolkata", "/ok", "cron",
                   expression=f"* {local_hour('Asia/Kolkata', anchor, 12)} * * *", zone="Asia/Kolkata", bounded=False),
    ]  # fmt: skip
    span_ms = int((until - start).total_seconds() * 1000) - 3000
    paths = ["/ok"] * 8 + ["/brief"] * 4 + ["/hold"] * 4 + ["/flaky"] * 3 + ["/fail"]
    for tenant in TENANTS:
        chosen = ["/flaky", "/fail"] + [rng.choice(paths) for _ in range(12)]
        for index, path in enumerate(chosen):
            at = start + timedelta(milliseconds=1000 + rng.randrange(span_ms))
            jobs.append(PlannedJob(tenant, f"once-{index}{path.replace('/', '-')}", path, "once", once_at=at))
    for index in range(2):  # two pairs under one concurrency key, each pair due at one instant
        at = start + timedelta(milliseconds=1000 + rng.randrange(span_ms))
        for side in "ab":
            jobs.append(PlannedJob("acme", f"mutex-{index}{side}", "/hold", "once", once_at=at, mutex=True))
    return jobs


def expected_nominals(job: PlannedJob, created: datetime, until: datetime) -> list[datetime]:
    """The job's nominal instants in the window, computed without the
    server's engine: the requested instant, or croniter in the job's zone
    from its creation (exclusive) up to ``until`` (its ``end_at``, exclusive)."""
    if job.schedule == "once":
        return [job.once_at]
    found = []
    it = croniter(job.expression, created.astimezone(ZoneInfo(job.zone)))
    while (fire := it.get_next(datetime).astimezone(timezone.utc)) < until:
        found.append(fire)
    return found


# --------------------------------------------------------------------------- the audit


def chaos_problems(jobs: Sequence[PlannedJob], snapshot: audit.Snapshot, until: datetime, deliveries: audit.Deliveries,
                   calls: Sequence[Call], triggers: Mapping[str, str] | None = None) -> list[str]:
    """Every broken rule of the run, one line per occurrence or job
    (tests/integration/test_chaos.py's docstring): ``jobs`` as planned and
    created, what the store holds, the window's end, what the target saw,
    and the manual triggers made (execution id -> job id): each ran once,
    never before its due instant, and never beside a run of its job's
    schedule (it queues behind one)."""
    triggers = dict(triggers or {})
    by_id = {job.job_id: job for job in jobs}
    expected: list[audit.Occurrence] = []
    found: list[str] = []
    engine_view = {(o.job_id, o.nominal_at): o for o in audit.expected_occurrences(snapshot.jobs, until)}
    executions = {row.id: row for row in snapshot.executions}
    for job in jobs:
        for nominal in expected_nominals(job, audit.created_at(job.job_id), until):
            ours = engine_view.pop((job.job_id, to_us(nominal)), None)
            key = execution_id(job.job_id, nominal)
            if ours is None:
                found.append(f"{key} ({job.tenant}/{job.name}): expected by croniter, not by the schedule engine")
                due = to_us(nominal)
            elif job.jitter:
                due = ours.due_at  # jitter is a hash of the job id: the engine's, bounded here
                if not to_us(nominal) <= due < to_us(nominal + timedelta(seconds=job.jitter)):
                    found.append(f"{key} ({job.tenant}/{job.name}): due {from_us(due)} outside its jitter window")
            else:
                due = to_us(nominal)
            expected.append(audit.Occurrence(job.job_id, job.tenant, to_us(nominal), due))
    for (job_id, nominal), _ in sorted(engine_view.items()):
        found.append(f"{execution_id(job_id, from_us(nominal))}: expected by the schedule engine, not by croniter")

    scheduled = replace(snapshot, executions=[row for row in snapshot.executions if row.id not in triggers])
    seen = audit.Deliveries({key: calls_of for key, calls_of in deliveries.calls.items() if key not in triggers})
    found += audit.problems(expected, scheduled, deliveries=seen)
    attempts_of = defaultdict(list)
    for attempt in snapshot.attempts:
        attempts_of[attempt.execution_id].append(attempt)
    for key, job_id in sorted(triggers.items()):
        row = executions.get(key)
        if row is None:
            found.append(f"{key} ({by_id[job_id].name}): lost: a trigger that was answered has no execution")
            continue
        if row.job_id != job_id or row.tenant != by_id[job_id].tenant:
            found.append(f"{key}: job {row.job_id} of {row.tenant}, triggered for {job_id} of {by_id[job_id].tenant}")
        for run in attempts_of[key]:
            if run.started_at < row.due_at or (run.worker_started_at or row.due_at) < row.due_at:
                found.append(f"{key} attempt {run.attempt} delivery {run.delivery}: started at {from_us(run.started_at)} "
                             f"(worker {run.worker_started_at}), early (due {from_us(row.due_at)})")  # fmt: skip
        repeated = [call for call in set(deliveries.calls.get(key, [])) if deliveries.calls[key].count(call) > 1]
        if repeated or (row.status == "succeeded" and (row.attempt, row.delivery) not in deliveries.calls.get(key, [])):
            found.append(f"{key}: the target saw {deliveries.calls.get(key, [])}; it ended {row.status} at attempt "
                         f"{row.attempt} delivery {row.delivery}")  # fmt: skip
    outcomes = [(o.key, by_id[o.job_id]) for o in expected] + [(key, by_id[job]) for key, job in triggers.items()]
    for key, job in outcomes:
        row = executions.get(key)
        if row is None:
            continue  # named above
        status, attempt = OUTCOME[job.path]
        if (row.status, row.attempt) != (status, attempt):
            found.append(f"{key} ({job.tenant}/{job.name} {job.path}): {row.status} at attempt {row.attempt} "
                         f"(delivery {row.delivery}, requeued {row.reap_count}, {row.dead_reason!r}), "
                         f"expected {status} at attempt {attempt}")  # fmt: skip
        tried = sorted({a.attempt for a in attempts_of[key]})
        if tried != list(range(1, attempt + 1)):
            found.append(f"{key} ({job.tenant}/{job.name}): attempts {tried} recorded, expected 1..{attempt}")
        for run in attempts_of[key]:
            if run.status == "lost" and not run.worker_id:
                continue  # requeued by the reaper: a hand-out does not write its worker, so the store knows none
            if row.tenant not in WORKERS.get(run.worker_id, ()):
                found.append(f"{key} ({row.tenant}): attempt {run.attempt} delivery {run.delivery} run by "
                             f"{run.worker_id!r}, which holds no credential for {row.tenant}")  # fmt: skip
    for skip in snapshot.skips:
        if skip.job_id in by_id and not (by_id[skip.job_id].overlap == job_pb2.OVERLAP_POLICY_QUEUE_ONE
                                         and skip.reason.lower() == "overlap"):
            found.append(f"{skip.job_id} ({by_id[skip.job_id].name}): skipped {skip.count} ({skip.reason!r})")

    pairs: dict[datetime, list[str]] = defaultdict(list)
    for job in jobs:
        if job.mutex:
            pairs[job.once_at].append(execution_id(job.job_id, job.once_at))
    for keys in pairs.values():
        found += _ran_at_once(keys[0], keys[1], executions, calls, f"under {MUTEX_KEY!r} (limit 1)")
    for key, job_id in triggers.items():
        for occurrence in expected:
            if occurrence.job_id == job_id:
                found += _ran_at_once(key, occurrence.key, executions, calls, "(a trigger queues behind a running one)")
    return found


def _ran_at_once(one: str, other: str, executions: Mapping[str, audit.ExecutionRow], calls: Sequence[Call],
                 rule: str) -> list[str]:
    """A line if the target's successful calls of ``one`` and ``other``
    overlapped, unless either was requeued (the worker that lost it may
    still have been running it)."""
    rows = [executions.get(one), executions.get(other)]
    if any(r is None or r.delivery != 1 or r.reap_count for r in rows):
        return []
    spans = [[(c.began, c.ended) for c in calls if c.key == k and c.status == 200] for k in (one, other)]
    return [f"{one} and {other} ran at once {rule}: {a} {b}"
            for a in spans[0] for b in spans[1] if a[0] < b[1] and b[0] < a[1]]  # fmt: skip


