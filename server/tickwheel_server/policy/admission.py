"""What may start now: the overlap policy of each job and the concurrency
keys, decided for one hand-out round (pure; the store reads the inputs and
applies the decision in the same transaction).

Overlap, per job, when an occurrence is ready while the job is *busy*: an
earlier execution of it is running, waiting for a retry (a retry wait counts
as running), or has not started yet although it is ready or waiting (it is
ahead in line: occurrences of one job start in nominal order).

- ``skip`` (the default): the occurrence does not run; it becomes part of a
  skip range with reason ``overlap`` (the store deletes the row, which was
  never handed out, and records the range).
- ``queue_one``: it waits (status ``waiting``) and is woken when the job is
  free; while one occurrence is already buffered behind the current one,
  further ones are skipped.
- ``allow``: it runs beside the others.
- ``replace``: the newest ready occurrence stops every earlier one (a running
  one through its worker's cancel signal; one not started, or waiting for a
  retry, is canceled at once) and waits for the stopped ones to end; older
  occurrences ready in the same round are canceled too, without starting.

Manual runs (origin ``trigger`` or ``backfill``) are never skipped and never
replace anything: they wait behind a busy job, in nominal order. An execution
whose request allowed overlap (``allow_overlap``) neither waits for its job
nor holds it up.

Concurrency keys, then, for the occurrences the overlap policy lets start,
oldest ready first: an execution starts only if every key its job names has a
free slot (``running < max_running``, counting the slots this round already
took) and no execution waiting on that key is ahead of it (ready earlier);
otherwise it waits on the first such key, in ready order. A key with free
slots and sleeping waiters (a woken execution was canceled, or went back to
wait on another key) gets that many woken.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from tickwheel.v1 import job_pb2

OVERLAP_POLICIES = {
    job_pb2.OVERLAP_POLICY_UNSPECIFIED: "skip",
    job_pb2.OVERLAP_POLICY_SKIP: "skip",
    job_pb2.OVERLAP_POLICY_QUEUE_ONE: "queue_one",
    job_pb2.OVERLAP_POLICY_ALLOW: "allow",
    job_pb2.OVERLAP_POLICY_REPLACE: "replace",
}
MANUAL_ORIGINS = ("trigger", "backfill")


@dataclass(frozen=True, slots=True)
class Rules:
    """What a job's definition says about running beside others."""

    overlap: str = "skip"
    keys: tuple[tuple[str, int], ...] = ()
    """(key, limit) pairs, each key once, sorted by key."""


ANYTHING_GOES = Rules("allow", ())
"""For an execution whose job is gone (deleted while it was ready)."""


_KEYLESS = {overlap: Rules(overlap, ()) for overlap in set(OVERLAP_POLICIES.values())}
"""One shared :class:`Rules` per policy for the jobs that name no key (most)."""


def rules_of(job: job_pb2.Job) -> Rules:
    """The :class:`Rules` of a definition. A key named twice counts once,
    with its last limit."""
    overlap = OVERLAP_POLICIES.get(job.overlap_policy, "skip")
    if not job.concurrency_keys:
        return _KEYLESS[overlap]
    limits = {key.key: max(1, key.limit) for key in job.concurrency_keys}
    return Rules(overlap, tuple(sorted(limits.items())))


class Candidate(NamedTuple):
    """A ready execution this round may hand out (its row is locked). A
    tuple: a round makes thousands, and a frozen dataclass costs four times
    as much to build."""

    id: str
    job_id: str
    tenant: str
    origin: str
    nominal_at: int
    ready_at: int
    attempt: int = 1
    delivery: int = 0
    allow_overlap: bool = False
    wait_key: str | None = None
    """Set when a freed slot of that key woke it."""


@dataclass(frozen=True, slots=True)
class Active:
    """An execution of a candidate's job that has not ended and is not a
    candidate itself. The store passes every running one and every one
    waiting for a retry, and the job's oldest others (enough to know what is
    ahead of each candidate)."""

    id: str
    job_id: str
    tenant: str
    status: str
    """``scheduled``, ``waiting`` or ``running``."""
    origin: str
    nominal_at: int
    ready_at: int
    attempt: int = 1
    allow_overlap: bool = False
    wait_key: str | None = None
    cancel_requested: bool = False


@dataclass(slots=True)
class KeyState:
    """A concurrency key's row as locked by this round, and the head of its queue."""

    max_running: int
    running: int
    head_ready_at: int | None = None
    """``ready_at`` of the oldest execution waiting on the key; None when none waits."""


class Start(NamedTuple):
    """A candidate that starts (a tuple: one per execution handed out)."""

    candidate: Candidate
    keys: tuple[str, ...]
    """The keys whose slots it takes."""


@dataclass(frozen=True, slots=True)
class Wait:
    candidate: Candidate
    key: str | None
    """The concurrency key it waits on; None: it waits for its job."""


@dataclass(frozen=True, slots=True)
class Skip:
    candidate: Candidate
    blocker_id: str
    """The execution it was skipped for (skip ranges are kept per blocker)."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """An execution that has not started, canceled at once."""

    id: str
    job_id: str
    tenant: str
    wait_key: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Replace:
    """Every execution of ``job_id`` not started yet, before ``(nominal_at,
    id)`` (the newest ready occurrence), and not allowed to overlap, is
    canceled at once: there may be more than the round read."""

    job_id: str
    tenant: str
    nominal_at: int
    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Stop:
    """A running execution whose worker must be told to cancel it."""

    id: str
    reason: str


@dataclass
class Admission:
    start: list[Start] = field(default_factory=list)
    wait: list[Wait] = field(default_factory=list)
    skip: list[Skip] = field(default_factory=list)
    cancel: list[Cancel] = field(default_factory=list)
    """Candidates of the round canceled without starting (overlap ``replace``)."""
    replace: list[Replace] = field(default_factory=list)
    stop: list[Stop] = field(default_factory=list)
    wake: dict[tuple[str, str], int] = field(default_factory=dict)
    """(tenant, key) → how many of its sleeping waiters to wake."""


def _order(item: Candidate | Active) -> tuple[int, str]:
    return item.nominal_at, item.id


def admit(
    candidates: Sequence[Candidate],
    rules: Mapping[str, Rules],
    active: Iterable[Active],
    keys: Mapping[tuple[str, str], KeyState],
    now_us: int,
) -> Admission:
    """Decide every candidate: start, wait, skip or cancel; and what else the
    round stops, cancels or wakes. ``active``: the candidates' jobs' other
    executions that have not ended; ``keys``: every key the candidates' jobs
    name (rows locked by the caller); ``now_us``: the round's instant (what
    is ready). :func:`decide_overlap` then :func:`decide_keys`."""
    out, admitted = decide_overlap(candidates, rules, active, now_us)
    decide_keys(admitted, rules, keys, out)
    return out


def decide_overlap(
    candidates: Sequence[Candidate], rules: Mapping[str, Rules], active: Iterable[Active], now_us: int
) -> tuple[Admission, list[Candidate]]:
    """The overlap policies: the decision so far (waits, skips, cancels,
    stops) and the candidates their jobs let start, for :func:`decide_keys`."""
    out = Admission()
    ids = {c.id for c in candidates}
    by_job: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        by_job[candidate.job_id].append(candidate)
    others: dict[str, list[Active]] = defaultdict(list)
    for item in active:
        if item.id not in ids:
            others[item.job_id].append(item)
    admitted: list[Candidate] = []
    for job_id in sorted(by_job):
        group, rule = by_job[job_id], rules.get(job_id, ANYTHING_GOES)
        if len(group) == 1 and job_id not in others and rule.overlap != "replace":
            admitted.append(group[0])  # alone, nothing ahead or running: it starts (the common case)
            continue
        group.sort(key=_order)
        admitted += _overlap(group, rule, others.get(job_id, []), now_us, out)
    return out, admitted


def _overlap(group: list[Candidate], rule: Rules, others: list[Active], now_us: int, out: Admission) -> list[Candidate]:
    """The overlap policy for one job's candidates (in nominal order); returns those that may start."""
    if rule.overlap == "allow":
        return group
    others = [a for a in others if not a.allow_overlap]
    # Running-like: it runs, or waits for its retry. Queued: not started but
    # ready or waiting, so ahead in line of anything later.
    running: list[Candidate | Active] = [
        a for a in others if a.status == "running" or (a.status == "scheduled" and a.attempt > 1)
    ]
    queued: list[Candidate | Active] = [
        a for a in others
        if a.status == "waiting" or (a.status == "scheduled" and a.attempt == 1 and a.ready_at <= now_us)
    ]
    if rule.overlap == "replace":
        group, running, queued = _replace(group, running, queued, out)
    admitted: list[Candidate] = []
    for candidate in group:
        if candidate.allow_overlap:
            admitted.append(candidate)
            continue
        ahead = [q for q in queued if _order(q) < _order(candidate)]
        if not running and not ahead:
            admitted.append(candidate)
            running.append(candidate)
            continue
        if candidate.origin in MANUAL_ORIGINS or rule.overlap == "replace":
            out.wait.append(Wait(candidate, None))
            queued.append(candidate)
            continue
        blocker = max(running, key=_order) if running else max(ahead, key=_order)
        if rule.overlap == "queue_one":
            current = None if running else min(ahead, key=_order)
            buffered = [q for q in ahead if q is not current and q.origin == "scheduled"]
            if not buffered:
                out.wait.append(Wait(candidate, None))
                queued.append(candidate)
                continue
        out.skip.append(Skip(candidate, blocker.id))
    return admitted


def _replace(group, running, queued, out: Admission):
    """``replace``: the newest scheduled occurrence of the round stops what is
    older; returns the group, running and queued left afterwards."""
    replacers = [c for c in group if c.origin == "scheduled" and not c.allow_overlap]
    if not replacers:
        return group, running, queued
    newest = replacers[-1]
    reason = f"canceled: replaced by {newest.id}"
    out.replace.append(Replace(newest.job_id, newest.tenant, newest.nominal_at, newest.id, reason))
    for item in group:
        if item is not newest and not item.allow_overlap and _order(item) < _order(newest):
            out.cancel.append(Cancel(item.id, item.job_id, item.tenant, item.wait_key, reason))
    still_running = []
    for item in running:
        if item.status == "running":
            if not item.cancel_requested:
                out.stop.append(Stop(item.id, reason))
            still_running.append(item)
        elif _order(item) > _order(newest):  # a retry wait after it is not replaced: it stays ahead
            still_running.append(item)
    group = [c for c in group if c.allow_overlap or _order(c) >= _order(newest)]
    queued = [q for q in queued if _order(q) > _order(newest)]
    return group, still_running, queued


_READY_ORDER = attrgetter("ready_at", "id")


def decide_keys(
    admitted: list[Candidate], rules: Mapping[str, Rules], keys: Mapping[tuple[str, str], KeyState], out: Admission
) -> None:
    """The concurrency keys, for the candidates the overlap policies admitted:
    adds their starts and key waits to ``out``, and the wake-ups of keys with
    free slots and sleeping waiters."""
    taken: Counter[tuple[str, str]] = Counter()
    for candidate in sorted(admitted, key=_READY_ORDER):
        keyed = rules.get(candidate.job_id, ANYTHING_GOES).keys
        if not keyed:  # no keys: nothing to wait for here (the common case)
            out.start.append(Start(candidate, ()))
            continue
        names = tuple(name for name, _ in keyed)
        blocked = None
        for name in names:
            state = keys[(candidate.tenant, name)]
            free = state.max_running - state.running - taken[(candidate.tenant, name)]
            if free <= 0 or (state.head_ready_at is not None and state.head_ready_at < candidate.ready_at):
                blocked = name
                break
        if blocked is not None:
            out.wait.append(Wait(candidate, blocked))
            continue
        for name in names:
            taken[(candidate.tenant, name)] += 1
        out.start.append(Start(candidate, names))
    for pair, state in keys.items():
        free = state.max_running - state.running - taken[pair]
        if state.head_ready_at is not None and free > 0:
            out.wake[pair] = free
