"""The DST rule: which wall times skipped or repeated by a transition fire.

docs/architecture.md, Semantics: "DST, cronie's rule", per job:

- *Gaps* (clocks jump forward from offset ``a`` to ``b`` at instant ``t``: wall
  times ``[t + a, t + b)`` do not exist). ``shift``: the job's wall times in
  the gap collapse into one fire at ``t``, the first instant after the gap.
  ``skip``: they do not fire. ``auto`` is ``shift`` for fixed-time jobs and
  ``skip`` for wild ones. A gap longer than 3 hours (a zone changing date
  line, as Samoa did in 2011) is never caught up, whatever the policy.
- *Repeats* (clocks go back from ``a`` to ``b < a`` at ``t``: wall times
  ``[t + b, t + a)`` occur twice). ``once``: only the first occurrence fires.
  ``both``: each occurrence fires (real elapsed time). ``auto`` is ``once``
  for fixed-time jobs and ``both`` for wild ones; a repeat longer than 3 hours
  is treated like cronie treats any clock change over 3 hours, as a reset
  after which every job runs by wall time again, so ``auto`` is ``both``
  there for every job.

The functions here decide those cases and phrase the notes that
``--explain`` and PreviewSchedule show; the engine applies them.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from enum import Enum

LARGE_JUMP_SECONDS = 3 * 3600
"""Transitions moving clocks by more than this are never treated as DST."""


class GapPolicy(str, Enum):
    """What a job does with wall times skipped by a jump forward."""

    AUTO = "auto"
    SHIFT = "shift"
    SKIP = "skip"


class RepeatPolicy(str, Enum):
    """What a job does with wall times that occur twice after a jump back."""

    AUTO = "auto"
    ONCE = "once"
    BOTH = "both"


def gap_shifts(policy: GapPolicy, wild: bool, gap_seconds: int) -> bool:
    """True when skipped wall times fire once at the end of a gap of this size."""
    if gap_seconds > LARGE_JUMP_SECONDS:
        return False
    return policy is GapPolicy.SHIFT or (policy is GapPolicy.AUTO and not wild)


def repeat_once(policy: RepeatPolicy, wild: bool, repeat_seconds: int) -> bool:
    """True when only the first occurrence of a repeated wall time fires."""
    if policy is RepeatPolicy.ONCE:
        return True
    return policy is RepeatPolicy.AUTO and not wild and repeat_seconds <= LARGE_JUMP_SECONDS


_EPOCH = datetime(1970, 1, 1)


def _wall(local_seconds: int, with_date: bool) -> str:
    wall = _EPOCH + timedelta(seconds=local_seconds)
    text = wall.strftime("%H:%M") if wall.second == 0 else wall.strftime("%H:%M:%S")
    return f"{wall:%Y-%m-%d} {text}" if with_date else text


def describe_jump(transition: int, before: int, after: int) -> str:
    """``"02:00→03:00"``: the wall clock just before and after ``transition``.

    Dates are included when they differ (a midnight fall-back, a skipped day).
    """
    start, end = transition + before, transition + after
    with_date = start // 86400 != end // 86400
    return f"{_wall(start, with_date)}→{_wall(end, with_date)}"


def list_walls(walls: list[int], total: int) -> str:
    """``"02:00, 02:30"``, or the first three and how many more."""
    text = ", ".join(_wall(w, False) for w in walls[:3])
    return text if total <= 3 else f"{text} and {total - 3} more"


def shift_note(walls: list[int], total: int, transition: int, before: int, after: int) -> str:
    """Note for one fire standing for the job's wall times skipped by a gap."""
    verb = "skipped" if total == 1 else "all skipped"
    return (
        f"{list_walls(walls, total)} {verb} by the {describe_jump(transition, before, after)} jump: "
        f"shifted to {_wall(transition + after, False)}"
    )


def skip_note(walls: list[int], total: int, transition: int, before: int, after: int) -> str:
    """Note on the first fire after a gap whose wall times were not caught up."""
    return f"{list_walls(walls, total)} skipped by the {describe_jump(transition, before, after)} jump: not caught up"


def repeat_note(wall: int, transition: int, before: int, after: int, which: str) -> str:
    """Note for a fire at a wall time that occurs twice.

    ``which`` is ``"once"`` (first occurrence, the second will not fire),
    ``"first"`` or ``"second"`` (both fire).
    """
    jump = describe_jump(transition, before, after)
    head = f"{_wall(wall, False)} occurs twice (clocks go back {jump})"
    if which == "once":
        return f"{head}: fires at the first only"
    return f"{head}: {which} of two fires"


def offset_text(offset_seconds: int) -> str:
    """``"+01:00"``, ``"-03:30"``, ``"+05:45"`` (seconds added when not whole minutes)."""
    text = datetime(2000, 1, 1, tzinfo=timezone(timedelta(seconds=offset_seconds))).isoformat()
    return text[19:]
