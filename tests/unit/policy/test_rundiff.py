"""The run diff of a job change (policy/rundiff.py): pairing rules at fixed instants, windows and bounds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.policy.rundiff import (
    DEFAULT_WINDOW, check_window, diff_runs, runs_before_window, runs_in_window, window_runs,
)
from tickwheel_server.schedule import Fire, GapPolicy, Schedule

UTC = timezone.utc
NOW = datetime(2027, 1, 10, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def fire(text: str, *, due_s: int = 0, offset_h: float = 0) -> Fire:
    at = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return Fire(at, at + timedelta(seconds=due_s), int(offset_h * 3600))


def diff(old, new, **kw):
    return diff_runs(old, new, from_at=NOW, to_at=NOW + DAY, **kw)


def nominals(fires) -> list[str]:
    return [f.nominal_at.strftime("%m-%dT%H:%M") for f in fires]


@pytest.mark.parametrize(
    "old, new, unchanged, moved, added, removed",
    [
        # nothing changed
        ([fire("2027-01-11T09:00")], [fire("2027-01-11T09:00")], 1, [], [], []),
        # jitter change: same nominal, other due: moved
        ([fire("2027-01-11T09:00", due_s=5)], [fire("2027-01-11T09:00", due_s=40)], 0,
         [("01-11T09:00", "01-11T09:00")], [], []),
        # zone change New York -> London: same wall 09:00, five hours apart: moved
        ([fire("2027-01-11T14:00", offset_h=-5)], [fire("2027-01-11T09:00", offset_h=0)], 0,
         [("01-11T14:00", "01-11T09:00")], [], []),
        # expression change 09:00 -> 10:00 in one zone: removed and added
        ([fire("2027-01-11T09:00")], [fire("2027-01-11T10:00")], 0, [], ["01-11T10:00"], ["01-11T09:00"]),
        # daily -> weekdays: the shared instants unchanged, the rest removed
        ([fire("2027-01-15T09:00"), fire("2027-01-16T09:00"), fire("2027-01-17T09:00")],
         [fire("2027-01-15T09:00")], 1, [], [], ["01-16T09:00", "01-17T09:00"]),
        # repeated hour run twice (offsets +1 then +0 read the same wall 02:30): pair in order
        ([fire("2027-01-11T01:30", offset_h=1), fire("2027-01-11T02:30", offset_h=0)],
         [fire("2027-01-11T00:30", offset_h=2), fire("2027-01-11T01:30", offset_h=1)], 1,
         [("01-11T02:30", "01-11T00:30")], [], []),
        # one side empty
        ([], [fire("2027-01-11T09:00")], 0, [], ["01-11T09:00"], []),
        ([fire("2027-01-11T09:00")], [], 0, [], [], ["01-11T09:00"]),
    ],
)
def test_pairing(old, new, unchanged, moved, added, removed) -> None:
    result = diff(old, new)
    assert result.unchanged_count == unchanged
    assert [(a.nominal_at.strftime("%m-%dT%H:%M"), b.nominal_at.strftime("%m-%dT%H:%M")) for a, b in result.moved] == moved
    assert nominals(result.added) == added and result.added_count == len(added)
    assert nominals(result.removed) == removed and result.removed_count == len(removed)


def test_a_one_off_moved_to_another_day_is_moved_only_between_one_offs() -> None:
    old, new = [fire("2027-01-11T09:00")], [fire("2027-01-12T10:00")]
    assert diff(old, new, one_offs=True).moved_count == 1
    plain = diff(old, new)
    assert (plain.moved_count, plain.added_count, plain.removed_count) == (0, 1, 1)


def test_lists_are_bounded_and_counts_are_whole() -> None:
    new = [Fire(NOW + timedelta(minutes=i), NOW + timedelta(minutes=i), 0) for i in range(1000)]
    result = diff([], new, limit=7)
    assert result.added_count == 1000 and len(result.added) == 7
    assert result.added[0].nominal_at == NOW


def test_moved_are_ordered_by_the_old_instant() -> None:
    # the 14:00 run is paired by rule 1 (same nominal, other due), the 09:00 one by rule 2 (same wall)
    old = [fire("2027-01-11T09:00", offset_h=-5), fire("2027-01-11T14:00", due_s=1)]
    new = [fire("2027-01-11T14:00", due_s=2), fire("2027-01-11T04:00", offset_h=0)]
    result = diff(old, new)
    assert [a.nominal_at.hour for a, _ in result.moved] == [9, 14]


def test_zone_change_over_a_window_shifts_the_edges_not_every_run() -> None:
    """0 9 * * * New York -> London over 30 days: every run the two share a
    wall time with is moved; only the edge days are added or removed."""
    old = Schedule.cron("0 9 * * *", "America/New_York", exact=True)
    new = Schedule.cron("0 9 * * *", "Europe/London", exact=True)
    end = NOW + DEFAULT_WINDOW
    old_runs, old_end = runs_in_window(old, NOW, end)
    new_runs, new_end = runs_in_window(new, NOW, end)
    o, n, cut = window_runs(old_runs, old_end, new_runs, new_end)
    result = diff_runs(o, n, from_at=NOW, to_at=cut)
    # 12:00 UTC now: London's 09:00 of Jan 10 has passed, New York's (14:00 UTC) has not;
    # at the far edge New York's Feb 9 09:00 (14:00 UTC) is past the end, London's (09:00 UTC) is not.
    assert result.moved_count == 29
    assert nominals(result.removed) == ["01-10T14:00"]
    assert nominals(result.added) == ["02-09T09:00"]
    assert result.unchanged_count == 0


def test_window_bounds_are_half_open() -> None:
    hourly = Schedule.cron("0 * * * *", "UTC", exact=True)
    runs, end = runs_in_window(hourly, NOW, NOW + timedelta(hours=3))
    assert nominals(runs) == ["01-10T12:00", "01-10T13:00", "01-10T14:00"] and end == NOW + timedelta(hours=3)


def test_a_window_with_too_many_runs_is_cut() -> None:
    every_minute = Schedule.cron("* * * * *", "UTC", exact=True)
    runs, end = runs_in_window(every_minute, NOW, NOW + DAY, cap=100)
    assert len(runs) == 100 and end == NOW + timedelta(minutes=100)
    hourly, hourly_end = runs_in_window(Schedule.cron("0 * * * *", "UTC", exact=True), NOW, NOW + DAY)
    o, n, cut = window_runs(runs, end, hourly, hourly_end)
    assert cut == end and nominals(n) == ["01-10T12:00", "01-10T13:00"]


def test_max_runs_counts_the_runs_before_the_window() -> None:
    limited = Schedule.cron("0 * * * *", "UTC", exact=True, max_runs=5)
    runs, _ = runs_in_window(limited, NOW, NOW + DAY, runs_so_far=runs_before_window(1, 4))
    assert len(runs) == 2
    assert runs_before_window(3, 1) == 0


def test_jitter_gives_the_real_due_instants() -> None:
    a = Schedule.cron("0 9 * * *", "UTC", job_id="job-a")
    runs, _ = runs_in_window(a, NOW, NOW + 2 * DAY)
    assert all(timedelta(0) <= f.due_at - f.nominal_at < timedelta(seconds=60) for f in runs)
    exact, _ = runs_in_window(Schedule.cron("0 9 * * *", "UTC", job_id="job-a", exact=True), NOW, NOW + 2 * DAY)
    result = diff_runs(runs, exact, from_at=NOW, to_at=NOW + 2 * DAY)
    jittered = sum(1 for f in runs if f.due_at != f.nominal_at)
    assert result.moved_count == jittered and result.unchanged_count == len(runs) - jittered


def test_a_dst_policy_change_moves_the_gap_run() -> None:
    """30 2 * * * in New York on the spring-forward day: shift fires at 03:00
    (the first instant after the gap), skip does not fire that day."""
    start = datetime(2027, 3, 13, 12, tzinfo=UTC)
    shift = Schedule.cron("30 2 * * *", "America/New_York", exact=True, gap=GapPolicy.SHIFT)
    skip = Schedule.cron("30 2 * * *", "America/New_York", exact=True, gap=GapPolicy.SKIP)
    o, _ = runs_in_window(shift, start, start + 2 * DAY)
    n, _ = runs_in_window(skip, start, start + 2 * DAY)
    result = diff_runs(o, n, from_at=start, to_at=start + 2 * DAY)
    assert result.removed_count == 1 and result.removed[0].nominal_at == datetime(2027, 3, 14, 7, tzinfo=UTC)
    assert result.unchanged_count == 1


@pytest.mark.parametrize(
    "window, ok",
    [(None, True), (timedelta(minutes=1), True), (timedelta(days=366), True), (timedelta(seconds=59), False),
     (timedelta(days=366, seconds=1), False), (timedelta(days=-1), False), (timedelta(days=10**6), False)],
)
def test_window_bounds(window, ok) -> None:
    if ok:
        assert check_window(window) == (window or DEFAULT_WINDOW)
    else:
        with pytest.raises(ValueError):
            check_window(window)
