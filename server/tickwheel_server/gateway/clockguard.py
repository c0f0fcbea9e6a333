"""The clock guard's rules: may this server hand out by its wall clock now?

Never early (docs/architecture.md): nothing is handed out before its due
instant by the clock of the server handing it out, and a server whose clock
is not known to agree with the database's within the tolerance (250 ms)
hands nothing out. These pure functions decide; the gateway reads the clocks
and acts.

A *check* reads the database's clock once, between two readings of this
server's clocks (:func:`judge`). What it establishes holds only while this
server's wall clock keeps moving with its monotonic clock: a wall clock that
is stepped (by hand, by NTP after a suspend) makes the check worthless. So
every later decision (:func:`refusal`) measures how far the wall clock moved
against the monotonic clock since the check (the *drift*) and refuses:

- before a first conclusive check (fail closed: a server whose first reads
  fail or are too slow to decide hands nothing out);
- when the last conclusive check is older than ``max_age`` (reads that keep
  failing, or keep being too slow to decide, do not keep an old verdict alive
  for ever);
- when the check found the clocks too far apart, or the drift since would
  put them too far apart now;
- when the wall clock stepped (drift beyond ``step``, far above what NTP's
  slewing moves it in ``max_age``) since the check: hand-out waits for a new
  check, which the gateway makes at once.

A refusal is a reason (a short string for logs), None means "hand out".

A refusal for want of a conclusive check (:data:`UNDECIDED`) is not a skew:
reads that fail or are too slow say nothing about the clocks, and a busy
server's first read often is. It is worth an alert only once the checks
stayed inconclusive for a grace (:func:`alarming`); a skew found, or a step,
is worth one at once. Hand-out stops all the same, from the first instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

NOT_CHECKED = "the clocks were not compared yet"
STALE = "no conclusive clock comparison for too long"
SKEWED = "this server's clock differs from the database's by more than the tolerance"
STEPPED = "this server's wall clock was stepped since the clocks were compared"
UNDECIDED = (NOT_CHECKED, STALE)
"""The refusals for want of a conclusive check (no skew found)."""


@dataclass(frozen=True)
class ClockCheck:
    """One conclusive comparison of this server's clock with the database's."""

    wall: datetime
    """This server's wall clock at the midpoint of the read."""
    monotonic: float
    """This server's monotonic clock at the same midpoint."""
    skew: float
    """Seconds this server's clock was ahead of the database's (negative: behind)."""
    uncertainty: float
    """Half the read's round trip: the benefit of the doubt the comparison gives."""

    def within(self, tolerance: float, drift: float = 0.0) -> bool:
        """True if the clocks agree within ``tolerance``, after ``drift``
        seconds that the wall clock moved against the monotonic clock since."""
        return abs(self.skew + drift) - self.uncertainty <= tolerance


def judge(
    before_wall: datetime, before_mono: float, after_wall: datetime, after_mono: float, db_now: datetime,
    *, tolerance: float,
) -> ClockCheck | None:
    """The check made of one read of the database's clock (``db_now``)
    between two readings of this server's clocks, or None if the read
    decides nothing: it took longer than twice the tolerance (a busy server
    or store, not a clock), or the wall clock was stepped during it."""
    round_trip = after_mono - before_mono
    if round_trip < 0 or round_trip / 2 > tolerance:
        return None
    wall_moved = (after_wall - before_wall).total_seconds()
    if abs(wall_moved - round_trip) > tolerance:
        return None  # stepped while reading: the midpoint means nothing
    half = round_trip / 2
    middle = before_wall + (after_wall - before_wall) / 2
    return ClockCheck(middle, before_mono + half, (middle - db_now).total_seconds(), half)


def best(checks: list[ClockCheck | None]) -> ClockCheck | None:
    """The conclusive check with the smallest round trip (the least
    uncertainty, as NTP's clock filter keeps the least-delayed sample), or
    None if none is conclusive. The earliest wins a tie."""
    conclusive = [check for check in checks if check is not None]
    return min(conclusive, key=lambda check: check.uncertainty, default=None)


def drift(check: ClockCheck, wall: datetime, monotonic: float) -> float:
    """Seconds the wall clock moved beyond the monotonic clock since ``check``
    (positive: stepped forward)."""
    return (wall - check.wall).total_seconds() - (monotonic - check.monotonic)


def refusal(
    check: ClockCheck | None, wall: datetime, monotonic: float, *, tolerance: float, max_age: float, step: float
) -> str | None:
    """Why this server may not hand out now by its wall clock (``wall`` and
    ``monotonic`` read together), given its last conclusive ``check``; None
    if it may."""
    if check is None:
        return NOT_CHECKED
    if monotonic - check.monotonic > max_age:
        return STALE
    moved = drift(check, wall, monotonic)
    if abs(moved) > step:
        return STEPPED
    if not check.within(tolerance, moved):
        return SKEWED
    return None


def alarming(refused: str | None, undecided_for: float | None, *, grace: float) -> bool:
    """Whether a refusal is worth an alert and an error now: one for want of
    a conclusive check (:data:`UNDECIDED`) only once the checks stayed
    inconclusive for ``grace`` seconds (``undecided_for``: since the first
    inconclusive one began; None: none was made since the last conclusive
    one); any other at once. No refusal is never alarming."""
    if refused is None:
        return False
    if refused not in UNDECIDED:
        return True
    return undecided_for is not None and undecided_for >= grace
