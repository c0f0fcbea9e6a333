"""The occurrences a transaction's skip ranges count, tallied per attempt
and reported once the transaction committed.

Every writer of a skip range (claim, hand-out, pause and resume) calls
:func:`counted` with the occurrences it adds; :meth:`.base.SqlStore._tx`
opens a fresh tally for each attempt and passes the committed attempt's to
its store's ``on_skipped`` hook (``tickwheel_skipped_occurrences_total``).
An attempt rolled back (a 40001 retry, a fence's refusal, an error) reports
nothing; a writer called outside a store's transaction counts nowhere.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

_tally: ContextVar[Counter[str] | None] = ContextVar("tickwheel_skip_tally", default=None)


def counted(reason: str, occurrences: int) -> None:
    """``occurrences`` of ``reason`` recorded as skipped by the running attempt."""
    tally = _tally.get()
    if tally is not None and occurrences > 0:
        tally[reason] += occurrences


def tallied(fn: Callable[..., T], tally: Counter[str]) -> Callable[..., T]:
    """``fn`` that starts ``tally`` over and counts into it on each call (one
    call per attempt, in the attempt's thread): after the transaction
    returns, ``tally`` holds what the committed attempt counted. It keeps
    ``fn``'s names (``functools.wraps``): logs and traces name a transaction
    by its function."""

    @functools.wraps(fn)
    def attempt(*args, **kwargs) -> T:
        tally.clear()
        token = _tally.set(tally)
        try:
            return fn(*args, **kwargs)
        finally:
            _tally.reset(token)

    return attempt
