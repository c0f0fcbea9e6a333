"""The occurrence audit of fault tests: every occurrence a window should have
had ended in exactly one terminal state, under its one idempotency key, never
early, and tenants that were not the target of a fault were not touched.

What should have happened comes from the schedule engine, never from the
executions table: each audited job's stored definition (``jobs.spec``) gives
its :class:`Schedule`, and the engine its fires from the job's creation (the
instant in its ULID, which is the ``now`` CreateJob computed the first fire
from) up to the end of the window. What happened is read from the store
(``executions``, ``attempts``, ``skips``) and, when given, from what the
target itself saw (:class:`Deliveries`: the ``Idempotency-Key``, attempt and
delivery of every call it received).

:func:`problems` is pure and table-tested against hand-made rows
(tests/unit/test_audit.py); :func:`load` reads the rows of a set of tenants;
:func:`assert_clean` fails listing every problem at once. The rules
(docs/architecture.md, "Terminal states", "Never early", "Delivery"):

- every expected occurrence has exactly one of: an execution under its
  derived id (``<job id>:<nominal instant>``) that is ``succeeded``, ``dead``
  with a reason or ``canceled`` with a reason; or a place in one skip range of
  its job that has a reason. ``scheduled``, ``waiting`` and ``running`` are in
  flight: a problem unless ``in_flight_ok``. Never both, never neither;
- an execution of an audited job that is no expected occurrence (another key
  for an occurrence, or one that should not exist) is a problem; so is a
  skip range whose count is not the number of occurrences it covers;
- an execution's nominal and due instants are the engine's, its tenant the
  job's;
- no attempt was handed out (``attempts.started_at``, the server's clock) or
  started by its worker (``attempts.worker_started_at``) before the
  occurrence's due instant;
- at most one attempt of an execution succeeded, and a succeeded execution's
  success is the attempt and delivery it records; when the target's view is
  given, the target of an HTTP job saw that call, never the same call twice,
  and no key of an audited job that is not an expected occurrence's (a
  duplicate it could not recognise);
- for the tenants in ``unaffected`` (tenant -> the ids of its own workers):
  every execution succeeded on attempt 1, delivery 1, never requeued, with one
  attempt row, by one of its own workers, and the target (when given) saw its
  key exactly once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import execution_id, from_us, to_us
from tickwheel_server.jobspec import schedule_of
from tickwheel_server.schedule import default_engine
from tests.support.attempts import ALL_ATTEMPTS

TERMINAL = ("succeeded", "dead", "canceled")
IN_FLIGHT = ("scheduled", "waiting", "running")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class JobRow:
    id: str
    tenant: str
    spec: bytes
    version: int = 1


@dataclass(frozen=True)
class ExecutionRow:
    id: str
    job_id: str
    tenant: str
    status: str
    nominal_at: int
    due_at: int
    attempt: int = 1
    delivery: int = 1
    reap_count: int = 0
    dead_reason: str = ""
    handed_out_at: int | None = None


@dataclass(frozen=True)
class AttemptRow:
    execution_id: str
    attempt: int
    delivery: int
    status: str
    started_at: int
    worker_id: str
    worker_started_at: int | None = None
    error: str = ""


@dataclass(frozen=True)
class SkipRow:
    job_id: str
    from_at: int
    to_at: int
    count: int
    reason: str


@dataclass(frozen=True)
class Occurrence:
    """One occurrence the schedule says a job should have had."""

    job_id: str
    tenant: str
    nominal_at: int
    due_at: int

    @property
    def key(self) -> str:
        """Its execution id: the idempotency key a target sees."""
        return execution_id(self.job_id, from_us(self.nominal_at))


@dataclass
class Deliveries:
    """What a target saw: (attempt, delivery) of each call, by ``Idempotency-Key``.

    Thread-safe enough for an ``http.server`` handler thread appending while
    the test reads: appends to lists and dict assignment are atomic in CPython.
    """

    calls: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def saw(self, key: str, attempt: int, delivery: int) -> None:
        self.calls.setdefault(key, []).append((attempt, delivery))

    def count(self, key: str) -> int:
        return len(self.calls.get(key, ()))


@dataclass(frozen=True)
class Snapshot:
    """The audited jobs and what the store holds for them."""

    jobs: Sequence[JobRow]
    executions: Sequence[ExecutionRow]
    attempts: Sequence[AttemptRow]
    skips: Sequence[SkipRow]


# --------------------------------------------------------------------------- expectation


def created_at(job_id: str) -> datetime:
    """The instant in a job id's ULID (``job_`` + 26 Crockford characters; the
    first 10 are milliseconds since the epoch): CreateJob's ``now``."""
    text = job_id.removeprefix("job_")[:10]
    millis = 0
    for char in text:
        millis = millis * 32 + _CROCKFORD.index(char)
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=millis)


def expected_occurrences(jobs: Iterable[JobRow], until: datetime) -> list[Occurrence]:
    """Every occurrence of ``jobs`` nominally before ``until``, by the schedule
    engine from each job's definition and creation instant.

    The definition must be the one the job was created with (version 1): an
    update changes which occurrences are expected, which this audit does not
    model.
    """
    engine = default_engine()
    found: list[Occurrence] = []
    for job in jobs:
        if job.version != 1:
            raise ValueError(f"job {job.id} was updated (version {job.version}); the audit models created jobs only")
        schedule = schedule_of(job_pb2.Job.FromString(job.spec), job.id)
        fire = engine.first_fire(schedule, created_at(job.id))
        runs = 0
        while fire is not None and fire.nominal_at < until:
            found.append(Occurrence(job.id, job.tenant, to_us(fire.nominal_at), to_us(fire.due_at)))
            runs += 1
            fire = engine.next_fire(schedule, fire.nominal_at, runs)
    return found


def settle_by(expected: Sequence[Occurrence], now: datetime, timeout: float) -> datetime:
    """When ``expected`` should all have settled: ``timeout`` seconds past
    the later of ``now`` and the latest due instant among them. An
    occurrence is expected by its nominal instant, but it runs from its due
    instant, up to its jitter window later (a cron job's default window is a
    minute): a wait counted from ``now`` alone would take a run not yet due
    for a late one."""
    latest = max([to_us(now), *(o.due_at for o in expected)])
    return from_us(latest) + timedelta(seconds=timeout)


# --------------------------------------------------------------------------- the rules


def _us(value: int | None) -> str:
    return "-" if value is None else from_us(value).isoformat(timespec="milliseconds")


def problems(
    expected: Sequence[Occurrence],
    snapshot: Snapshot,
    *,
    deliveries: Deliveries | None = None,
    unaffected: Mapping[str, Iterable[str]] | None = None,
    in_flight_ok: bool = False,
) -> list[str]:
    """Every broken rule (see the module docstring), one line each; empty when the window is clean."""
    found: list[str] = []
    jobs = {job.id for job in snapshot.jobs}
    http_jobs = {job.id for job in snapshot.jobs if job_pb2.Job.FromString(job.spec).target.WhichOneof("kind") == "http"}
    by_id = {row.id: row for row in snapshot.executions}
    attempts_of: dict[str, list[AttemptRow]] = defaultdict(list)
    for attempt in snapshot.attempts:
        attempts_of[attempt.execution_id].append(attempt)
    skips_of: dict[str, list[SkipRow]] = defaultdict(list)
    for skip in snapshot.skips:
        skips_of[skip.job_id].append(skip)
    nominal_of_job: dict[str, list[int]] = defaultdict(list)
    for occurrence in expected:
        nominal_of_job[occurrence.job_id].append(occurrence.nominal_at)

    expected_keys = set()
    for occurrence in expected:
        key = occurrence.key
        expected_keys.add(key)
        row = by_id.get(key)
        covering = [s for s in skips_of[occurrence.job_id] if s.from_at <= occurrence.nominal_at <= s.to_at]
        if len(covering) > 1:
            found.append(f"{key}: in {len(covering)} skip ranges")
        if row is not None and covering:
            found.append(f"{key}: both an execution ({row.status}) and skipped ({covering[0].reason!r})")
        if row is None:
            if not covering:
                found.append(f"{key}: lost: no execution and no skip range (due {_us(occurrence.due_at)})")
            continue
        if row.status in IN_FLIGHT:
            if not in_flight_ok:
                found.append(f"{key}: still {row.status} (attempt {row.attempt}, delivery {row.delivery})")
        elif row.status not in TERMINAL:
            found.append(f"{key}: unknown status {row.status!r}")
        elif row.status in ("dead", "canceled") and not row.dead_reason:
            found.append(f"{key}: {row.status} without a reason")
        if (row.nominal_at, row.due_at) != (occurrence.nominal_at, occurrence.due_at):
            found.append(
                f"{key}: nominal/due {_us(row.nominal_at)}/{_us(row.due_at)}, the schedule says "
                f"{_us(occurrence.nominal_at)}/{_us(occurrence.due_at)}"
            )
        if row.tenant != occurrence.tenant:
            found.append(f"{key}: tenant {row.tenant!r}, its job's is {occurrence.tenant!r}")
        if row.handed_out_at is not None and row.handed_out_at < occurrence.due_at:
            found.append(f"{key}: handed out at {_us(row.handed_out_at)}, before it was due at {_us(occurrence.due_at)}")
        key_of_http_job = deliveries is not None and occurrence.job_id in http_jobs
        runs = attempts_of.get(key, [])
        for attempt in runs:
            where = f"{key} attempt {attempt.attempt} delivery {attempt.delivery}"
            if attempt.started_at < occurrence.due_at:
                found.append(f"{where}: handed out at {_us(attempt.started_at)}, early (due {_us(occurrence.due_at)})")
            if attempt.worker_started_at is not None and attempt.worker_started_at < occurrence.due_at:
                found.append(
                    f"{where}: worker started at {_us(attempt.worker_started_at)}, early (due {_us(occurrence.due_at)})"
                )
        successes = [a for a in runs if a.status == "succeeded"]
        if len(successes) > 1:
            found.append(f"{key}: succeeded {len(successes)} times: {[(a.attempt, a.delivery) for a in successes]}")
        if row.status == "succeeded":
            if [(a.attempt, a.delivery) for a in successes] != [(row.attempt, row.delivery)]:
                found.append(
                    f"{key}: succeeded at attempt {row.attempt} delivery {row.delivery}, but its succeeded "
                    f"attempts are {[(a.attempt, a.delivery) for a in successes]}"
                )
            if key_of_http_job and (row.attempt, row.delivery) not in deliveries.calls.get(key, []):
                found.append(
                    f"{key}: succeeded at attempt {row.attempt} delivery {row.delivery}, which the target never "
                    f"received (it saw {deliveries.calls.get(key, [])})"
                )
        if key_of_http_job:
            repeated = [call for call, n in Counter(deliveries.calls.get(key, [])).items() if n > 1]
            if repeated:
                found.append(f"{key}: the target received the same (attempt, delivery) more than once: {repeated}")

    for row in snapshot.executions:
        if row.job_id in jobs and row.id not in expected_keys:
            found.append(f"{row.id}: an execution ({row.status}) that is no expected occurrence of job {row.job_id}")
    for job_id, ranges in skips_of.items():
        if job_id not in jobs:
            continue
        for skip in ranges:
            if not skip.reason:
                found.append(f"{job_id}: skip range {_us(skip.from_at)}..{_us(skip.to_at)} without a reason")
            covered = sum(1 for nominal in nominal_of_job[job_id] if skip.from_at <= nominal <= skip.to_at)
            if covered != skip.count:
                found.append(
                    f"{job_id}: skip range {_us(skip.from_at)}..{_us(skip.to_at)} counts {skip.count}, "
                    f"the schedule has {covered} occurrences there"
                )
    if deliveries is not None:
        for key, calls in deliveries.calls.items():
            job_id = key.split(":", 1)[0]
            if job_id in http_jobs and key not in expected_keys:
                found.append(f"{key}: the target received {len(calls)} call(s) under a key no occurrence has")

    for tenant, workers in (unaffected or {}).items():
        own = set(workers)
        rows = [row for row in snapshot.executions if row.tenant == tenant]
        if not rows:
            found.append(f"tenant {tenant}: no executions to compare (the test ran none?)")
        for row in rows:
            runs = attempts_of.get(row.id, [])
            shape = (row.status, row.attempt, row.delivery, row.reap_count)
            if shape != ("succeeded", 1, 1, 0):
                found.append(
                    f"tenant {tenant}: {row.id} affected: {row.status}, attempt {row.attempt}, delivery "
                    f"{row.delivery}, requeued {row.reap_count} times{', ' + repr(row.dead_reason) if row.dead_reason else ''}"
                )
            recorded = [(a.attempt, a.delivery, a.status, a.worker_id) for a in runs]
            if len(runs) != 1 or runs[0].status != "succeeded" or runs[0].worker_id not in own or runs[0].error:
                found.append(f"tenant {tenant}: {row.id} attempts {recorded}, not one success by its own workers {sorted(own)}")
            if deliveries is not None and row.job_id in http_jobs and deliveries.count(row.id) != 1:
                found.append(f"tenant {tenant}: {row.id} reached its target {deliveries.count(row.id)} times: "
                             f"{deliveries.calls.get(row.id, [])}")
    return found


def unsettled(expected: Sequence[Occurrence], snapshot: Snapshot) -> list[str]:
    """The keys of expected occurrences with neither a terminal execution nor a skip (for polling)."""
    status = {row.id: row.status for row in snapshot.executions}
    skipped = defaultdict(list)
    for skip in snapshot.skips:
        skipped[skip.job_id].append(skip)
    return [
        o.key for o in expected
        if status.get(o.key) not in TERMINAL
        and not any(s.from_at <= o.nominal_at <= s.to_at for s in skipped[o.job_id])
    ]  # fmt: skip


# --------------------------------------------------------------------------- the store


def load(engine: sa.Engine, tenants: Iterable[str]) -> Snapshot:
    """The jobs of ``tenants`` and their executions, attempts and skip ranges."""
    names = sorted(set(tenants))
    with engine.connect() as conn:
        jobs = [
            JobRow(r.id, r.tenant, bytes(r.spec), r.version)
            for r in conn.execute(
                sa.text("SELECT id, tenant, spec, version FROM jobs WHERE tenant IN :t ORDER BY id").bindparams(
                    sa.bindparam("t", expanding=True)
                ),
                {"t": names},
            )
        ]
        ids = [job.id for job in jobs] or [""]
        executions = [
            ExecutionRow(r.id, r.job_id, r.tenant, r.status, r.nominal_at, r.due_at, r.attempt, r.delivery,
                         r.reap_count, r.dead_reason, r.handed_out_at)
            for r in conn.execute(
                sa.text(
                    "SELECT id, job_id, tenant, status, nominal_at, due_at, attempt, delivery, reap_count, "
                    "dead_reason, handed_out_at FROM executions WHERE job_id IN :ids OR tenant IN :t"
                ).bindparams(sa.bindparam("ids", expanding=True), sa.bindparam("t", expanding=True)),
                {"ids": ids, "t": names},
            )
        ]  # fmt: skip
        execution_ids = [row.id for row in executions] or [""]
        attempts = [
            AttemptRow(r.execution_id, r.attempt, r.delivery, r.status, r.started_at, r.worker_id,
                       r.worker_started_at, r.error)
            for r in conn.execute(
                sa.text(
                    "SELECT execution_id, attempt, delivery, status, started_at, worker_id, worker_started_at, error "
                    f"FROM {ALL_ATTEMPTS} AS attempts WHERE execution_id IN :ids ORDER BY execution_id, delivery, attempt"
                ).bindparams(sa.bindparam("ids", expanding=True)),
                {"ids": execution_ids},
            )
        ]  # fmt: skip
        skips = [
            SkipRow(r.job_id, r.from_at, r.to_at, r.count, r.reason)
            for r in conn.execute(
                sa.text("SELECT job_id, from_at, to_at, count, reason FROM skips WHERE job_id IN :ids").bindparams(
                    sa.bindparam("ids", expanding=True)
                ),
                {"ids": ids},
            )
        ]
    return Snapshot(jobs, executions, attempts, skips)


def assert_clean(
    engine: sa.Engine,
    tenants: Iterable[str],
    until: datetime,
    *,
    deliveries: Deliveries | None = None,
    unaffected: Mapping[str, Iterable[str]] | None = None,
) -> Snapshot:
    """Audit the jobs of ``tenants`` (and the ``unaffected`` tenants' executions)
    over the window ending ``until``; fail listing every problem. Returns what it read."""
    audited = set(tenants) | set(unaffected or {})
    snapshot = load(engine, audited)
    expected = expected_occurrences(snapshot.jobs, until)
    found = problems(expected, snapshot, deliveries=deliveries, unaffected=unaffected)
    shown = found[:24] + ([f"… and {len(found) - 24} more"] if len(found) > 24 else [])
    assert not found, f"audit of {sorted(audited)} ({len(expected)} occurrences): {len(found)} problem(s):\n  " + (
        "\n  ".join(shown)
    )
    return snapshot
