"""What one claim does to one job: pure, table-tested, no I/O.

Given a job's schedule cursor (its next fire), ``now`` and the look-ahead,
:func:`plan_claim` decides which occurrences become executions, which are
recorded as skipped (misfire policy), and where the cursor moves. The
dispatcher's claim (``store/dispatch.py``) applies the plan in its claim
transaction.

Which occurrences are missed and which of them run is the misfire rule
(:mod:`tickwheel_server.policy.misfire`); this module walks the schedule to
find them, within bounds.

Never stuck, and bounded: a plan looks at no more than ``scan_limit``
occurrences, plus ``run_all_limit`` more under ``run_all``. A job missed for
longer than that is planned in several claims: each records what it may
certainly skip (one range, extended in place by the next claim through
``continues_at``) and moves the cursor on, until the claim that reaches the
first occurrence that is not missed. Under ``run_all`` an occurrence is
certainly skipped only when at least ``run_all_limit`` missed ones follow it:
a claim that walked ``scan_limit + run_all_limit`` missed occurrences and
found more skips the first ``scan_limit`` and leaves the cursor on the next,
so the last claim sees the whole tail and runs exactly the
``run_all_limit`` most recent, whatever ``scan_limit`` is. Going backwards
from the claim instant would need a previous-fire function the engine does
not have (and ``max_runs`` counts forwards); this walk costs at most
``scan_limit + run_all_limit`` next fires per job per claim.

``runs`` counts occurrences consumed from the schedule, run or skipped; it is
what ``max_runs`` limits.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from ..schedule import Fire
from .misfire import RUN_ALL, check_policy, decide_missed, is_missed

DEFAULT_SCAN_LIMIT = 10_000


class PlannedExecution(NamedTuple):
    nominal_at: datetime
    due_at: datetime
    missed_count: int
    """How many occurrences this execution stands for (1 when none was missed)."""


class PlannedSkip(NamedTuple):
    from_at: datetime
    to_at: datetime
    count: int
    continues_at: datetime | None
    """The nominal instant after ``to_at`` (the cursor), or None when the schedule ended."""


class Plan(NamedTuple):
    """One job's plan. Named tuples, not dataclasses: a claim builds one per
    job it claims, thousands a batch, and a named tuple is several times
    cheaper to build."""

    executions: list[PlannedExecution]
    skip: PlannedSkip | None = None
    next_fire: Fire | None = None
    """The new cursor: the first occurrence not yet planned (None: the schedule ended)."""
    runs: int = 0
    """Occurrences consumed by this plan."""


def plan_claim(
    cursor: Fire,
    following: Callable[[Fire, int], Fire | None],
    *,
    now: datetime,
    horizon: datetime,
    policy: str,
    threshold: timedelta,
    run_all_limit: int,
    carried_missed: int = 0,
    scan_limit: int = DEFAULT_SCAN_LIMIT,
    due_of: Callable[[Fire], datetime] | None = None,
    reach_of: Callable[[Fire], datetime] | None = None,
) -> Plan:
    """Plan the occurrences from ``cursor`` (the job's next fire) whose nominal
    instant (or ``reach_of(fire)``) is at or before ``horizon`` (now + look-ahead).

    ``following(fire, runs)`` returns the fire after ``fire`` once ``runs``
    occurrences have been consumed in this plan (the engine's
    ``next_fire(schedule, fire.nominal_at, runs_so_far=job_runs + runs)``).
    ``carried_missed`` is how many missed occurrences earlier claims already
    recorded for this run of misses (the open skip range's count), so a
    ``run_once`` execution reports the whole run. ``due_of(fire)`` is the
    instant an occurrence will really be due when something moves it after
    this plan (a job's calendar moving it to the next business day): an
    occurrence is missed when that instant is past the threshold, not its
    schedule's; None means the fire's own ``due_at``. The planned executions
    keep the fire's own ``due_at`` for the mover to move. ``reach_of(fire)``
    is the instant the claim must reach an occurrence by when that is before
    its nominal instant (a ``previous`` calendar rule running it on an
    earlier day); it must grow with the occurrences, as nominal instants do.
    None means the nominal instant.
    """
    due = due_of if due_of is not None else _own_due
    check_policy(policy, run_all_limit)
    if scan_limit < 1:
        raise ValueError("scan_limit must be >= 1")
    keep = run_all_limit if policy == RUN_ALL else 0
    missed: list[Fire] = []
    upcoming: list[Fire] = []
    fire: Fire | None = cursor
    runs = 0
    while (
        fire is not None
        and (fire.nominal_at if reach_of is None else reach_of(fire)) <= horizon
        and runs < scan_limit + keep
    ):
        if is_missed(due(fire), now=now, threshold=threshold):
            missed.append(fire)
        else:
            upcoming.append(fire)
        runs += 1
        fire = following(fire, runs)
    still_missing = (
        fire is not None
        and (fire.nominal_at if reach_of is None else reach_of(fire)) <= horizon
        and is_missed(due(fire), now=now, threshold=threshold)
    )
    executions: list[PlannedExecution] = []
    skipped: list[Fire] = []
    if missed and still_missing and keep and len(missed) > keep:
        # More are missed than this claim walked: only those with ``keep``
        # missed ones after them are certainly too old to run. The rest are
        # walked again by the next claim, from the new cursor.
        skipped = missed[: len(missed) - keep]
        fire = missed[len(skipped)]
        # Occurrences before the new cursor that are not missed (their due
        # instant moved on, see ``due_of``) run now: the cursor passes them.
        upcoming = [f for f in upcoming if f.nominal_at < fire.nominal_at]
        runs = len(skipped) + len(upcoming)
    elif missed and still_missing:
        skipped = missed
    elif missed:
        decision = decide_missed(policy, missed, run_all_limit=run_all_limit, carried_missed=carried_missed)
        executions += [PlannedExecution(f.nominal_at, f.due_at, count) for f, count in decision.run]
        skipped = decision.skipped
    executions += [PlannedExecution(f.nominal_at, f.due_at, 1) for f in upcoming]
    # In schedule order (already so unless ``due_of`` kept an earlier occurrence from being missed).
    executions.sort(key=lambda e: e.nominal_at)
    skip = None
    if skipped:
        last = skipped[-1].nominal_at
        after = [e.nominal_at for e in executions if e.nominal_at > last]
        after_skip = after[0] if after else (fire.nominal_at if fire is not None else None)
        skip = PlannedSkip(skipped[0].nominal_at, skipped[-1].nominal_at, len(skipped), after_skip)
    return Plan(executions, skip, fire, runs)


def _own_due(fire: Fire) -> datetime:
    return fire.due_at


def plan_paused(
    cursor: Fire,
    following: Callable[[Fire, int], Fire | None],
    *,
    horizon: datetime,
    scan_limit: int = DEFAULT_SCAN_LIMIT,
    reach_of: Callable[[Fire], datetime] | None = None,
) -> Plan:
    """Plan a job of a paused tenant: every occurrence from ``cursor`` whose
    nominal instant (or ``reach_of(fire)``, as :func:`plan_claim` takes it)
    is at or before ``horizon`` is skipped, none runs.

    The same walk as a ``skip`` misfire whatever the lateness: one skip
    range over what was scanned (``continues_at`` the new cursor, so the
    next claim extends it in place), the cursor moved past it, ``runs``
    counted towards ``max_runs`` as a paused job's span is. At most
    ``scan_limit`` occurrences are scanned, so a job paused for years is
    planned in several claims, never stuck. The horizon is the claim's (now +
    look-ahead), the one an active job's occurrences are created up to: so
    the cursor of a paused tenant's job never lags behind the clock and a
    resume needs no catching up; the price is that occurrences up to one
    look-ahead past the resume were already skipped.
    """
    first: Fire | None = None
    last: Fire | None = None
    fire: Fire | None = cursor
    runs = 0
    while (
        fire is not None
        and (fire.nominal_at if reach_of is None else reach_of(fire)) <= horizon
        and runs < scan_limit
    ):
        first = first or fire
        last = fire
        runs += 1
        fire = following(fire, runs)
    skip = None
    if first is not None and last is not None:
        skip = PlannedSkip(first.nominal_at, last.nominal_at, runs, fire.nominal_at if fire is not None else None)
    return Plan([], skip, fire, runs)
