"""What a job's calendar makes of one claim's plan: pure, table-tested, no I/O.

The claim's plan (:func:`~tickwheel_server.policy.claim.plan_claim`) lists
nominal occurrences; the calendar rule (:mod:`~tickwheel_server.schedule.calendarrule`)
decides each one. :func:`apply_calendar` keeps the occurrences that run
(their due instant moved where the rule moved it, their nominal instant and
so their execution id unchanged), folds consecutive skipped occurrences into
skip ranges (recorded with reason ``calendar``, ``continues_at`` the next
nominal occurrence so the next claim extends the range in place) and counts
the dropped ones. The cursor, the misfire skip and ``runs`` (what
``max_runs`` counts: nominal occurrences) are the plan's own.
:func:`decide_previous_for` is the ``previous`` rule for one occurrence of a
schedule, wherever the occurrence before it is not at hand.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from ..schedule import Fire, Schedule, ScheduleError, next_fire
from ..schedule.businessdays import BusinessCalendar
from ..schedule.calendarrule import CalendarRule, Decision, Verdict, decide, decide_previous, reached_at
from .claim import Plan, PlannedExecution, PlannedSkip


class CalendarPlan(NamedTuple):
    plan: Plan
    """The plan with only the executions that run, each at its decided due instant."""
    skips: list[PlannedSkip]
    """Skip ranges of consecutive skipped occurrences, oldest first."""
    dropped: int
    """Occurrences dropped without a record (``only``)."""


def apply_calendar(plan: Plan, decide: Callable[[PlannedExecution, datetime | None], Decision]) -> CalendarPlan:
    """``plan`` as the calendar leaves it. ``decide(execution, next_nominal_at)``
    is the rule for one occurrence given the schedule's next nominal
    instant after it (the next planned one, else the plan's cursor, else
    None when the schedule ends)."""
    planned = plan.executions
    cursor = plan.next_fire.nominal_at if plan.next_fire is not None else None
    kept: list[PlannedExecution] = []
    skips: list[PlannedSkip] = []
    dropped = 0
    open_range: PlannedSkip | None = None
    for index, execution in enumerate(planned):
        following = planned[index + 1].nominal_at if index + 1 < len(planned) else cursor
        decision = decide(execution, following)
        if decision.verdict is Verdict.SKIP:
            if open_range is None:
                open_range = PlannedSkip(execution.nominal_at, execution.nominal_at, 1, following)
            else:
                open_range = PlannedSkip(open_range.from_at, execution.nominal_at, open_range.count + 1, following)
            continue
        if open_range is not None:
            skips.append(open_range)
            open_range = None
        if decision.verdict is Verdict.RUN:
            kept.append(execution if decision.due_at == execution.due_at else execution._replace(due_at=decision.due_at))
        else:
            dropped += 1
    if open_range is not None:
        skips.append(open_range)
    return CalendarPlan(plan._replace(executions=kept), skips, dropped)


class PreviewedFire(NamedTuple):
    fire: Fire
    """The fire as the calendar leaves it: ``due_at`` moved, ``note`` saying why (the DST note kept before it)."""
    skipped: bool
    """The calendar skips it (recorded when it comes): ``due_at`` is then the nominal instant."""


def preview_with_calendar(
    fires: list[Fire], after_last: Fire | None, decide: Callable[[PlannedExecution, datetime | None], Decision]
) -> list[PreviewedFire]:
    """A preview's ``fires`` (consecutive, oldest first; ``after_last`` the
    fire after them, None when the schedule ends) as the calendar rule
    decides them: dropped ones (``only``) left out, skipped ones marked,
    moved ones due at the moved instant, each with the rule's note."""
    shown: list[PreviewedFire] = []
    for index, fire in enumerate(fires):
        following = fires[index + 1] if index + 1 < len(fires) else after_last
        decision = decide(
            PlannedExecution(fire.nominal_at, fire.due_at, 1), None if following is None else following.nominal_at
        )
        note = "; ".join(part for part in (fire.note, decision.note) if part)
        if decision.verdict is Verdict.RUN:
            shown.append(PreviewedFire(fire._replace(due_at=decision.due_at, note=note), False))
        elif decision.verdict is Verdict.SKIP:
            shown.append(PreviewedFire(fire._replace(due_at=fire.nominal_at, note=note), True))
    return shown


_TICK = timedelta(microseconds=1)


def decide_previous_for(
    cal: BusinessCalendar, name: str, schedule: Schedule, nominal_at: datetime, due_at: datetime,
    not_before: datetime | None,
) -> Decision:
    """The ``previous`` rule of calendar ``name`` (``cal``) for ``schedule``'s
    occurrence at ``nominal_at`` (due at ``due_at``), never moved before
    ``not_before``: the collision with the occurrence before it is found by
    walking the schedule forward from the moved instant (the engine has no
    previous fire). Raises what the engine or the rule raises."""

    def first_from(at: datetime) -> datetime | None:
        fire = next_fire(schedule, at - _TICK)
        return None if fire is None else fire.nominal_at

    return decide_previous(
        cal, name, nominal_at, due_at, zone=schedule.zone, first_from=first_from, not_before=not_before
    )


def rule_decider(
    cal: BusinessCalendar, ref, schedule: Schedule, now: datetime | None
) -> Callable[[PlannedExecution, datetime | None], Decision]:
    """The ``decide`` a preview passes to :func:`preview_with_calendar` for
    a job naming calendar ``ref`` (``cal``) with ``schedule``: its rule as
    the claim applies it, a ``previous`` move never before ``now``."""
    if ref.rule is CalendarRule.PREVIOUS:
        return lambda execution, following: decide_previous_for(
            cal, ref.name, schedule, execution.nominal_at, execution.due_at, now
        )
    return lambda execution, following: decide(
        cal, ref.name, ref.rule, execution.nominal_at, execution.due_at, zone=schedule.zone, next_nominal_at=following
    )


Instant = Callable[[Fire], datetime]

_RULE_ERRORS = (ScheduleError, LookupError, ValueError, OverflowError)


def resume_instants(cal: BusinessCalendar, ref, schedule: Schedule) -> tuple[Instant | None, Instant | None]:
    """For a resume's paused span (:func:`~.jobchanges.paused_span`'s
    ``due_of`` and ``reach_of``) of a job naming calendar ``ref`` (``cal``)
    with ``schedule``: when an occurrence is due as the calendar leaves it
    (the instant a user sees: moved by ``next`` or ``previous``, the fire's
    own otherwise), which is what its lateness is judged by, as the claim
    judges it; and when it came due (a ``previous`` move: its moved instant,
    before its nominal one; None: the nominal instant). The moves are the
    rule's own, not limited by the resume's instant (``not_before`` None):
    whether a move into the past still runs is the resume's threshold to
    say. An occurrence the rule cannot compute keeps its own instants (the
    claim then quarantines the job)."""
    if ref.rule is CalendarRule.NEXT:

        def decision(fire: Fire) -> Decision:
            return decide(
                cal, ref.name, ref.rule, fire.nominal_at, fire.due_at, zone=schedule.zone, next_nominal_at=None
            )

    elif ref.rule is CalendarRule.PREVIOUS:

        def decision(fire: Fire) -> Decision:
            return decide_previous_for(cal, ref.name, schedule, fire.nominal_at, fire.due_at, None)

    else:
        return None, None

    def due_of(fire: Fire) -> datetime:
        try:
            decided = decision(fire)
        except _RULE_ERRORS:
            return fire.due_at
        return decided.due_at if decided.verdict is Verdict.RUN and decided.due_at is not None else fire.due_at

    def reach_of(fire: Fire) -> datetime:
        try:
            return reached_at(decision(fire), fire.nominal_at, fire.due_at)
        except _RULE_ERRORS:
            return fire.nominal_at

    return due_of, reach_of if ref.rule is CalendarRule.PREVIOUS else None
