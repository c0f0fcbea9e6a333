"""How many of a job's executions may wait not started: the cap a claim keeps. Pure.

A claim creates a recurring job's occurrences ahead of their instant; when no
worker takes them (no worker serves the handler, the tenant's workers are
all gone) they stay ``scheduled`` and the next claim adds more: a minutely
job would grow 1 440 rows a day for as long as nobody comes. So a claim
creates an occurrence only while the job has fewer than its cap of
executions not started (:func:`not_started_cap`, counted by the claim's own
SELECT up to :data:`MAX_NOT_STARTED_CAP`); the occurrences past it are
recorded as one ``backlog`` skip range, extended in place claim after claim,
and the cursor moves on as usual. Nothing runs early, no occurrence is lost
silently, and the rows a job keeps are bounded whatever the time nobody
takes them. The oldest waiting occurrences are the ones kept: a worker that
comes takes them in order, and once fewer than the cap wait, the next claim
creates occurrences again (docs/architecture.md, "Backlog cap").
"""

from __future__ import annotations

from .claim import Plan, PlannedSkip
from .misfire import RUN_ALL

BACKLOG_REASON = "backlog"
"""The skip reason of the occurrences a claim did not create because the job's cap was reached."""

NOT_STARTED_CAP = 10
"""Executions a job may have not started (any origin: scheduled, retries
waiting, triggers, backfills) before a claim stops creating its occurrences.
A healthy minutely job has one or two (the look-ahead is a minute); ten
leaves room for those, a retry, a trigger and a worker's short absence (a
deploy), and bounds ten million jobs nobody takes to a hundred million rows
instead of a growth without end."""

MAX_RUN_ALL_LIMIT = 10_000
"""The API's bound on ``misfire_run_all_limit`` (``jobspec.MAX_RUN_ALL_LIMIT``, which a test keeps equal)."""
MAX_NOT_STARTED_CAP = NOT_STARTED_CAP + MAX_RUN_ALL_LIMIT
"""The largest cap a job can have (``run_all`` with the API's largest
``misfire_run_all_limit``): the claim counts a job's waiting executions up
to it, so the count is a bounded range scan."""


def not_started_cap(policy: str, run_all_limit: int) -> int:
    """The job's cap: :data:`NOT_STARTED_CAP`, and under ``run_all`` its
    ``run_all_limit`` more (a catch-up after an outage creates that many at
    once, beside the occurrences on time: neither is cut by the cap when
    nothing else waits), never more than :data:`MAX_NOT_STARTED_CAP`."""
    if policy == RUN_ALL:
        return NOT_STARTED_CAP + min(MAX_RUN_ALL_LIMIT, max(0, run_all_limit))
    return NOT_STARTED_CAP


def cap_plan(plan: Plan, waiting: int, cap: int) -> tuple[Plan, PlannedSkip | None]:
    """``plan`` keeping, of its executions (in schedule order), as many as
    ``cap`` leaves room for beside the ``waiting`` executions the job
    already has not started; the rest as one skip range (reason
    :data:`BACKLOG_REASON`) continuing at the plan's new cursor, so the next
    claim extends it in place. The cursor and ``runs`` are unchanged: a
    skipped occurrence is consumed as a run, as a misfire's is. The plan's
    own skip (misfire) stays as it was. None when nothing is past the cap."""
    if cap < 1:
        raise ValueError("cap must be >= 1")
    room = max(0, cap - waiting)
    if len(plan.executions) <= room:
        return plan, None
    kept, over = plan.executions[:room], plan.executions[room:]
    continues_at = plan.next_fire.nominal_at if plan.next_fire is not None else None
    skip = PlannedSkip(over[0].nominal_at, over[-1].nominal_at, len(over), continues_at)
    return plan._replace(executions=kept), skip
