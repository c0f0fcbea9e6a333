"""How a change of a job's definition changes its runs over a window: pure rules, table-tested.

UpdateJob with ``validate_only`` answers this diff (the contract is the
``RunDiff`` message in ``proto/tickwheel/v1/scheduler.proto``; see
``docs/architecture.md``, "Job changes"). :func:`runs_in_window` lists a
definition's fires in the window with the schedule engine (so due instants
carry the job's real jitter), bounded by :data:`MAX_RUNS`;
:func:`window_runs` cuts both sides to one window; :func:`diff_runs` pairs
them. No clock is read: the window is passed in.

Pairing, in this order (a run is a :class:`~tickwheel_server.schedule.Fire`):

1. **Same occurrence.** An old and a new run with the same nominal instant
   (the same execution id) are unchanged when their due instants are equal,
   otherwise moved (a jitter change).
2. **Same slot.** Among the runs left, an old and a new run whose nominal
   instants read the same wall-clock date and time, each at its own UTC
   offset (a zone or DST-policy change), are moved; a wall time held by
   several runs on one side (a repeated hour run twice) pairs in order.
3. **A one-off changed into a one-off**: its one run left on each side is moved.

Every run left is removed (old) or added (new).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..schedule import Fire, Schedule, iter_fires

MAX_RUNS = 50_000
"""Runs of one definition a diff enumerates: past it the window is cut."""
MAX_LISTED = 100
"""Entries of each list (added, removed, moved) a diff answers; the counts cover them all."""
DEFAULT_WINDOW = timedelta(days=30)
MIN_WINDOW = timedelta(minutes=1)
MAX_WINDOW = timedelta(days=366)

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class RunDiff:
    """The diff of two definitions' runs over ``[from_at, to_at)``.

    ``added``, ``removed`` and ``moved`` hold at most ``limit`` entries,
    earliest first (moved by the old run's nominal instant); the counts
    cover every run. ``moved`` holds (old run, new run) pairs."""

    from_at: datetime
    to_at: datetime
    window_truncated: bool
    added: tuple[Fire, ...]
    added_count: int
    removed: tuple[Fire, ...]
    removed_count: int
    moved: tuple[tuple[Fire, Fire], ...]
    moved_count: int
    unchanged_count: int


def runs_in_window(
    schedule: Schedule, start: datetime, end: datetime, *, runs_so_far: int = 0, cap: int = MAX_RUNS
) -> tuple[list[Fire], datetime]:
    """The fires of ``schedule`` whose nominal instant is in ``[start, end)``,
    in order, and the end of the window they cover: ``end``, or, when there
    are more than ``cap``, the nominal instant of the first fire past the
    ``cap``-th (the list then holds exactly ``cap``). ``runs_so_far`` counts
    against ``max_runs`` as in :func:`~tickwheel_server.schedule.iter_fires`.
    Raises ScheduleError when ``schedule`` is invalid."""
    fires: list[Fire] = []
    for fire in iter_fires(schedule, start - _TICK, runs_so_far):
        if fire.nominal_at >= end:
            break
        if len(fires) == cap:
            return fires, fire.nominal_at
        fires.append(fire)
    return fires, end


def window_runs(
    old: Sequence[Fire], old_end: datetime, new: Sequence[Fire], new_end: datetime
) -> tuple[list[Fire], list[Fire], datetime]:
    """Both sides cut to the earlier of their ends (:func:`runs_in_window`'s
    second value): (old runs, new runs, the window's end)."""
    end = min(old_end, new_end)
    return [f for f in old if f.nominal_at < end], [f for f in new if f.nominal_at < end], end


def _wall(fire: Fire) -> datetime:
    """The nominal instant on its zone's wall clock, as a naive date-time."""
    return fire.nominal_at.replace(tzinfo=None) + timedelta(seconds=fire.utc_offset)


def diff_runs(
    old: Iterable[Fire],
    new: Iterable[Fire],
    *,
    from_at: datetime,
    to_at: datetime,
    window_truncated: bool = False,
    one_offs: bool = False,
    limit: int = MAX_LISTED,
) -> RunDiff:
    """Pair ``old`` and ``new`` runs (each in nominal order, one window) by
    the module's rules; ``one_offs`` when both definitions are one-offs
    (rule 3). Returns the :class:`RunDiff`, its lists cut to ``limit``."""
    new_by_nominal = {fire.nominal_at: fire for fire in new}
    unchanged = 0
    moved: list[tuple[Fire, Fire]] = []
    old_left: list[Fire] = []
    for fire in old:
        twin = new_by_nominal.pop(fire.nominal_at, None)
        if twin is None:
            old_left.append(fire)
        elif twin.due_at == fire.due_at:
            unchanged += 1
        else:
            moved.append((fire, twin))
    new_left = sorted(new_by_nominal.values(), key=lambda f: f.nominal_at)
    by_wall: dict[datetime, deque[Fire]] = defaultdict(deque)
    for fire in new_left:
        by_wall[_wall(fire)].append(fire)
    paired: set[datetime] = set()
    removed: list[Fire] = []
    for fire in old_left:
        slot = by_wall.get(_wall(fire))
        if slot:
            twin = slot.popleft()
            paired.add(twin.nominal_at)
            moved.append((fire, twin))
        else:
            removed.append(fire)
    added = [fire for fire in new_left if fire.nominal_at not in paired]
    if one_offs and len(removed) == 1 and len(added) == 1:
        moved.append((removed.pop(), added.pop()))
    moved.sort(key=lambda pair: pair[0].nominal_at)
    return RunDiff(
        from_at=from_at, to_at=to_at, window_truncated=window_truncated,
        added=tuple(added[:limit]), added_count=len(added),
        removed=tuple(removed[:limit]), removed_count=len(removed),
        moved=tuple(moved[:limit]), moved_count=len(moved),
        unchanged_count=unchanged,
    )  # fmt: skip


def check_window(window: timedelta | None) -> timedelta:
    """The diff window asked for (``None``: :data:`DEFAULT_WINDOW`); ValueError
    outside [:data:`MIN_WINDOW`, :data:`MAX_WINDOW`]."""
    if window is None:
        return DEFAULT_WINDOW
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        raise ValueError("must be between 1 minute and 366 days")
    return window


def runs_before_window(fires_before_cursor: int, run_count: int) -> int:
    """The runs a job made before the window, for ``max_runs``: its
    ``run_count`` less the occurrences created ahead of its cursor that lie
    in the window (``fires_before_cursor``), never below 0."""
    return max(0, run_count - fires_before_cursor)
