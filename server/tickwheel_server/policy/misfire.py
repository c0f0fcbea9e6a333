"""The misfire rule: when an occurrence is missed, and which missed ones run. Pure.

Misfires (docs/architecture.md, Semantics): an occurrence is *missed* when it
is more than the job's threshold late at claim time (``now - due_at >
threshold``); exactly at the threshold it is still on time, and an
occurrence is never missed before its due instant. For a run of missed
occurrences, oldest first:

- ``run_once`` runs the latest, carrying how many it stands for, and skips
  the rest;
- ``run_all`` runs the most recent ``run_all_limit`` and skips older ones;
- ``skip`` skips them all.

:func:`~tickwheel_server.policy.claim.plan_claim` walks a job's occurrences,
asks :func:`is_missed` of each and :func:`decide_missed` of the run it found.
No clock is read: ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..schedule import Fire

RUN_ONCE = "run_once"
RUN_ALL = "run_all"
SKIP = "skip"
POLICIES = (RUN_ONCE, RUN_ALL, SKIP)


def check_policy(policy: str, run_all_limit: int) -> None:
    """ValueError unless ``policy`` is one of :data:`POLICIES` and ``run_all_limit`` >= 1."""
    if policy not in POLICIES:
        raise ValueError(f"unknown misfire policy {policy!r}")
    if run_all_limit < 1:
        raise ValueError("run_all_limit must be >= 1")


def is_missed(due_at: datetime, *, now: datetime, threshold: timedelta) -> bool:
    """True when an occurrence due at ``due_at`` is more than ``threshold`` late at ``now``."""
    return now - due_at > threshold


@dataclass(frozen=True)
class MisfireDecision:
    """What becomes of a run of missed occurrences."""

    run: list[tuple[Fire, int]] = field(default_factory=list)
    """The occurrences that run, oldest first, each with how many occurrences it stands for."""
    skipped: list[Fire] = field(default_factory=list)
    """The occurrences recorded as skipped, oldest first (all before the ones that run)."""


def decide_missed(policy: str, missed: Sequence[Fire], *, run_all_limit: int, carried_missed: int = 0) -> MisfireDecision:
    """Decide the whole run ``missed`` (oldest first, every one missed).

    ``carried_missed`` is how many missed occurrences of the same run earlier
    claims already recorded as skipped, so a ``run_once`` execution reports
    the whole run. Every occurrence of ``missed`` is either run or skipped,
    and the skipped ones are the oldest.
    """
    check_policy(policy, run_all_limit)
    if not missed:
        return MisfireDecision()
    if policy == RUN_ONCE:
        return MisfireDecision(run=[(missed[-1], len(missed) + carried_missed)], skipped=list(missed[:-1]))
    if policy == RUN_ALL:
        recent = list(missed[-run_all_limit:])
        return MisfireDecision(run=[(f, 1) for f in recent], skipped=list(missed[: len(missed) - len(recent)]))
    return MisfireDecision(skipped=list(missed))
