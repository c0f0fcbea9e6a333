"""The max-jobs quota spread over slots, so that concurrent creates of one
tenant do not all write one row: how a slot's allowance is granted.

A tenant's job count is held in :data:`SLOTS` rows, one per slot, each with
``used`` (the tenant's jobs that slot counts) and ``allowance`` (how many it
may count). A create takes units from one slot with a conditional update
(``used + n <= allowance``); a delete takes its unit out of the slot that
counted the job, used and allowance both, so the unit returns to the pool
at the next deal. Only when a slot runs dry is the whole tenant read and its
allowances dealt again (:func:`deal`), under the row locks of every slot.

The invariant that makes the quota exact across servers: every slot has
``used <= allowance``, and the allowances add up to at most
``max(max_jobs, jobs counted)``. So the tenant's job count (the sum of
``used``) passes ``max_jobs`` only when ``max_jobs`` was lowered below it,
and then no create succeeds until deletes bring it under
(docs/architecture.md, "Job writes at scale").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SLOTS = 32
"""Rows per tenant. More slots make two concurrent creates less likely to
pick the same row; a dry slot costs one read of them all."""
RESERVE_CALLS = 8
"""A slot that ran dry is dealt, beyond its even share, a reserve of this
many more of what it just asked for (at most half of what is left): the
process that asked keeps taking from it (``store.quota.SlotPicker`` prefers
it), so a bulk load deals every few calls instead of nearly every call."""


@dataclass(frozen=True)
class Deal:
    """What :func:`deal` decided: ``granted`` units for the asking slot and
    every slot's new (used, allowance)."""

    granted: int
    slots: dict[int, tuple[int, int]]


def deal(used: Mapping[int, int], max_jobs: int, *, slot: int = 0, want: int = 0) -> Deal:
    """Grant ``slot`` up to ``want`` units and spread what is left of
    ``max_jobs`` over the :data:`SLOTS` slots.

    ``used`` maps each slot to what it counts (a missing slot counts 0).
    ``granted`` = min(want, max_jobs - total used), never negative; it is
    added to ``slot``'s used. The asking slot then gets a reserve of
    ``RESERVE_CALLS * want``, at most half of the rest; every slot's
    allowance is its used plus an even share of what remains after that,
    the remainder going to the slots from ``slot`` on (so the asking slot is
    not dry again at once). Reserve and shares add up to exactly
    ``max(0, max_jobs - total used - granted)``.
    """
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot must be in [0, {SLOTS})")
    if want < 0 or max_jobs < 0:
        raise ValueError("want and max_jobs must be >= 0")
    counted = {index: max(0, used.get(index, 0)) for index in range(SLOTS)}
    free = max(0, max_jobs - sum(counted.values()))
    granted = min(want, free)
    counted[slot] += granted
    rest = free - granted
    reserve = min(rest // 2, RESERVE_CALLS * want)
    share, extra = divmod(rest - reserve, SLOTS)
    slots = {}
    for index in range(SLOTS):
        bonus = 1 if (index - slot) % SLOTS < extra else 0
        slots[index] = (counted[index], counted[index] + share + bonus + (reserve if index == slot else 0))
    return Deal(granted, slots)
