"""The engine's API: one-offs, windows, max runs, jitter, validation, the cache."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.schedule import (
    Engine,
    Fire,
    GapPolicy,
    RepeatPolicy,
    Schedule,
    ScheduleError,
    ScheduleKind,
    first_fire,
    iter_fires,
    jitter_delay,
    next_fire,
    parse_local_time,
    preview,
    validate,
)

UTC = timezone.utc
NOW = datetime(2027, 1, 1, tzinfo=UTC)


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


# One-offs.


def test_once_at_an_instant():
    schedule = Schedule.once(at(2027, 5, 1, 12))
    fire = next_fire(schedule, NOW)
    assert fire == Fire(at(2027, 5, 1, 12), at(2027, 5, 1, 12), 0, "")
    assert next_fire(schedule, at(2027, 5, 1, 12)) is None  # strictly after
    assert list(iter_fires(schedule, NOW)) == [fire]
    assert first_fire(schedule, at(2028, 1, 1)) == fire  # a past one-off still has its instant


def test_once_gets_no_jitter_unless_asked():
    assert next_fire(Schedule.once(at(2027, 5, 1), job_id="job_1"), NOW).due_at == at(2027, 5, 1)
    asked = next_fire(Schedule.once(at(2027, 5, 1), job_id="job_1", jitter_window=timedelta(minutes=5)), NOW)
    assert asked.due_at - asked.nominal_at == jitter_delay("job_1", timedelta(minutes=5))


def test_local_wall_time_plain():
    fire = next_fire(Schedule.local(datetime(2027, 7, 1, 9, 0), "Europe/London"), NOW)
    assert fire.nominal_at == at(2027, 7, 1, 8)
    assert fire.local_text == "2027-07-01T09:00:00+01:00"


def test_local_wall_time_in_a_gap():
    wall = parse_local_time("2027-03-14T02:30")
    shifted = next_fire(Schedule.local(wall, "America/New_York"), NOW)
    assert shifted.nominal_at == at(2027, 3, 14, 7)  # 03:00 EDT, first instant after the gap
    assert shifted.note == "02:30 skipped by the 02:00→03:00 jump: shifted to 03:00"
    assert next_fire(Schedule.local(wall, "America/New_York", gap=GapPolicy.SKIP), NOW) is None
    with pytest.raises(ScheduleError) as caught:
        validate(Schedule.local(wall, "America/New_York", gap=GapPolicy.SKIP), NOW)
    assert caught.value.field == "schedule.local.local_time"


def test_local_wall_time_in_a_repeat():
    wall = parse_local_time("2027-11-07T01:30:00")
    once = list(iter_fires(Schedule.local(wall, "America/New_York"), NOW))
    assert [f.nominal_at for f in once] == [at(2027, 11, 7, 5, 30)]
    both = list(iter_fires(Schedule.local(wall, "America/New_York", repeat=RepeatPolicy.BOTH), NOW))
    assert [f.nominal_at for f in both] == [at(2027, 11, 7, 5, 30), at(2027, 11, 7, 6, 30)]
    assert [f.local_text for f in both] == ["2027-11-07T01:30:00-04:00", "2027-11-07T01:30:00-05:00"]


@pytest.mark.parametrize(
    ("wall", "zone"),
    [
        ("9999-12-31T23:59:59", "America/New_York"),  # its instant is in year 10000: past a datetime
        ("0001-01-01T00:00:00", "Asia/Tokyo"),  # its instant is before year 1
        ("9999-01-01T00:00:00", "UTC"),
        ("1969-12-31T23:59:59", "UTC"),
    ],
)
def test_a_local_time_outside_the_instants_a_job_names_is_refused_on_its_field(wall, zone):
    with pytest.raises(ScheduleError) as caught:
        validate(Schedule.local(parse_local_time(wall), zone), NOW)
    assert caught.value.field == "schedule.local.local_time"
    assert "between 1970-01-01T00:00:00 and 9999-01-01T00:00:00" in str(caught.value)


@pytest.mark.parametrize(
    ("wall", "zone"), [("9999-12-31T23:59:59", "America/New_York"), ("0001-01-01T00:00:00", "Asia/Tokyo")]
)
def test_an_unchecked_local_time_past_what_a_datetime_holds_never_fires(wall, zone):
    """What a preview of a job sent unchecked computes: no fire, not an OverflowError."""
    schedule = Schedule.local(parse_local_time(wall), zone)
    assert next_fire(schedule, NOW) is None
    assert list(iter_fires(schedule, NOW)) == []


def test_local_times_at_the_range_ends_are_taken():
    last = validate(Schedule.local(parse_local_time("9998-12-31T23:59:59"), "America/New_York"), NOW)
    assert last.nominal_at == datetime(9999, 1, 1, 4, 59, 59, tzinfo=timezone.utc)
    first = validate(Schedule.local(parse_local_time("1970-01-01T00:00:00"), "Asia/Tokyo"), NOW)
    assert first.nominal_at == datetime(1969, 12, 31, 15, tzinfo=timezone.utc)


def test_local_time_parsing():
    assert parse_local_time("2027-03-28T02:30:00") == datetime(2027, 3, 28, 2, 30)
    for bad in ("2027-03-28 02:30", "2027-03-28T02:30:00Z", "2027-03-28T02:30:00+01:00", "2027-02-30T00:00", "noon"):
        with pytest.raises(ScheduleError) as caught:
            parse_local_time(bad)
        assert caught.value.field == "schedule.local.local_time"


# Windows and max runs.


def test_start_at_is_inclusive_and_end_at_exclusive():
    schedule = Schedule.cron("0 * * * *", start_at=at(2027, 1, 1, 5), end_at=at(2027, 1, 1, 8), exact=True)
    assert [f.nominal_at for f in iter_fires(schedule, NOW)] == [at(2027, 1, 1, h) for h in (5, 6, 7)]
    fractional = Schedule.cron("0 * * * *", start_at=at(2027, 1, 1, 5, 0, 0, 1), exact=True)
    assert next_fire(fractional, NOW).nominal_at == at(2027, 1, 1, 6)


def test_max_runs_counts_runs_so_far():
    schedule = Schedule.cron("0 0 * * *", max_runs=3, exact=True)
    assert len(list(iter_fires(schedule, NOW))) == 3
    assert len(list(iter_fires(schedule, NOW, runs_so_far=2))) == 1
    assert next_fire(schedule, NOW, runs_so_far=3) is None


def test_preview_stops_where_the_schedule_ends():
    schedule = Schedule.cron("0 0 * * *", end_at=at(2027, 1, 3, 12), exact=True)
    assert [f.nominal_at for f in preview(schedule, NOW, 10)] == [at(2027, 1, 2), at(2027, 1, 3)]


# Jitter.


def test_jitter_is_stable_within_a_minute_and_spreads():
    schedule = Schedule.cron("0 0 * * *", job_id="job_01HZX")
    first, second = preview(schedule, NOW, 2)
    delay = first.due_at - first.nominal_at
    assert timedelta(0) <= delay < timedelta(seconds=60)
    assert second.due_at - second.nominal_at == delay
    delays = {jitter_delay(f"job_{i}", timedelta(seconds=60)) for i in range(2000)}
    assert len(delays) > 1500  # a million midnight jobs do not land on one second
    assert all(timedelta(0) <= d < timedelta(seconds=60) for d in delays)
    assert jitter_delay("job_01HZX", timedelta(seconds=60)) == timedelta(milliseconds=43_041)  # pinned: no hash() randomness


def test_exact_and_window():
    assert next_fire(Schedule.cron("0 0 * * *", job_id="j", exact=True), NOW).due_at == at(2027, 1, 2)
    wide = next_fire(Schedule.cron("0 0 * * *", job_id="j", jitter_window=timedelta(minutes=30)), NOW)
    assert wide.due_at - wide.nominal_at == jitter_delay("j", timedelta(minutes=30)) < timedelta(minutes=30)
    zero = next_fire(Schedule.cron("0 0 * * *", job_id="j", jitter_window=timedelta(0)), NOW)
    assert zero.due_at == zero.nominal_at
    unsaved = next_fire(Schedule.cron("0 0 * * *"), NOW)
    assert unsaved.due_at == unsaved.nominal_at


# Validation.


@pytest.mark.parametrize(
    ("schedule", "field", "reason"),
    [
        (Schedule.cron("0 0 30 2 *"), "schedule.cron.expression", "never fires: day 30 of the month never occurs in Feb"),
        (Schedule.cron("61 * * * *"), "schedule.cron.expression", "minute field: 61 is out of range 0-59"),
        (Schedule.cron("0 0 * * *", "Nowhere/Land"), "schedule.cron.time_zone", "unknown time zone 'Nowhere/Land'"),
        (Schedule.cron("H 0 * * *"), "schedule.cron.expression",
         "H needs a job id to pick its value (save the job first, or pass one)"),
        (Schedule.cron("0 0 * * *", jitter_window=timedelta(hours=2)), "jitter.window",
         "the jitter window must be between 0 and 1 hour"),
        (Schedule.cron("0 0 * * *", jitter_window=timedelta(seconds=-1)), "jitter.window",
         "the jitter window must be between 0 and 1 hour"),
        (Schedule.cron("0 0 * * *", start_at=at(2027, 2, 1), end_at=at(2027, 1, 1)), "end_at",
         "end_at must be after start_at"),
        (Schedule.cron("0 0 * * *", start_at=datetime(2027, 2, 1)), "start_at", "start_at must be an aware UTC timestamp"),
        (Schedule.cron("0 0 * * *", max_runs=-1), "max_runs", "max_runs must be 0 (unlimited) or more"),
        (Schedule.cron("0 0 1 1 *", start_at=at(2027, 1, 2), end_at=at(2027, 12, 31)), "schedule",
         "never fires inside the job's start_at/end_at window"),
        (Schedule.cron("0 0 * * *", end_at=at(2026, 6, 1)), "schedule", "never fires inside the job's start_at/end_at window"),
        (Schedule.once(at(2027, 5, 1), end_at=at(2027, 4, 1)), "schedule",
         "never fires inside the job's start_at/end_at window"),
        (Schedule.once(datetime(2027, 5, 1)), "schedule.once_at", "a one-off instant must be an aware UTC timestamp"),
        (Schedule.local(datetime(2027, 5, 1), "Nowhere/Land"), "schedule.local.time_zone", "unknown time zone 'Nowhere/Land'"),
        (Schedule.local(datetime(2027, 5, 1), ""), "schedule.local.time_zone", "a local time needs a time zone"),
    ],
)
def test_validation_errors(schedule, field, reason):
    with pytest.raises(ScheduleError) as caught:
        validate(schedule, NOW)
    assert (caught.value.field, caught.value.reason) == (field, reason)
    assert str(caught.value) == f"{field}: {reason}"


def test_validate_returns_the_first_fire():
    assert validate(Schedule.cron("0 9 * * 1-5", "Europe/London", exact=True), NOW).nominal_at == at(2027, 1, 1, 9)
    past = Schedule.once(at(2026, 12, 31))
    assert validate(past, NOW).nominal_at == at(2026, 12, 31)  # misfire rules decide what a past one-off does


def test_naive_after_is_refused():
    with pytest.raises(ValueError):
        next_fire(Schedule.cron("0 0 * * *"), datetime(2027, 1, 1))
    with pytest.raises(ValueError):
        next_fire(Schedule.once(at(2027, 5, 1)), datetime(2027, 1, 1))


def test_after_in_any_zone():
    from zoneinfo import ZoneInfo

    local_after = datetime(2027, 1, 1, 10, tzinfo=ZoneInfo("Asia/Tokyo"))  # 01:00Z
    assert next_fire(Schedule.cron("30 * * * *", exact=True), local_after).nominal_at == at(2027, 1, 1, 1, 30)


# The cache holds compiled schedules, never answers.


def test_compiled_schedules_are_cached_by_expression_zone_and_h_seed():
    engine = Engine(cache_size=10)
    a = engine.compile(Schedule.cron("0 9 * * *", "Europe/London", job_id="job_a"))
    b = engine.compile(Schedule.cron("0 9 * * *", "Europe/London", job_id="job_b"))
    assert a is b  # no H: the job id does not matter
    assert engine.compile(Schedule.cron("0 9 * * *", "Europe/Paris")) is not a
    ha = engine.compile(Schedule.cron("H 9 * * *", "Europe/London", job_id="job_a"))
    hb = engine.compile(Schedule.cron("H 9 * * *", "Europe/London", job_id="job_b"))
    assert ha is not hb and ha is engine.compile(Schedule.cron("H 9 * * *", "Europe/London", job_id="job_a"))
    for i in range(30):  # bounded
        engine.compile(Schedule.cron(f"{i} 9 * * *", "UTC"))
    assert engine.cache_len() <= 20
    engine.clear_cache()
    assert engine.cache_len() == 0


def test_answers_follow_after():
    engine = Engine()
    schedule = Schedule.cron("*/5 * * * *", exact=True)
    seen = [engine.next_fire(schedule, NOW + timedelta(minutes=m)).nominal_at for m in range(0, 20, 5)]
    assert seen == [NOW + timedelta(minutes=m) for m in (5, 10, 15, 20)]


def test_schedule_defaults():
    schedule = Schedule.cron("0 0 * * *")
    assert (schedule.kind, schedule.zone, schedule.gap, schedule.repeat, schedule.max_runs) == (
        ScheduleKind.CRON, "UTC", GapPolicy.AUTO, RepeatPolicy.AUTO, 0
    )
    assert Schedule.cron("0 0 * * *", "").zone == "UTC"
