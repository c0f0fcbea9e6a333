"""Zone tables from the pinned tzdata, tzdata versions and updates, synthetic zones."""

from __future__ import annotations

import io
import random
import shutil
import zoneinfo
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import tzdata
from hypothesis import given
from hypothesis import strategies as st

from tickwheel_server.schedule import (
    Engine,
    GapPolicy,
    RepeatPolicy,
    Schedule,
    ScheduleError,
    UnknownZoneError,
    Zone,
    ZoneRegistry,
    pin_tzdata,
    tzdata_version,
    zone_fingerprints,
    zones_changed,
)
from tickwheel_server.schedule.cron import parse_cron
from tickwheel_server.schedule.zones import default_registry
from tickwheel_server.schedule.zones import zoneinfo as pinned_zoneinfo

from .reference import Rule, brute_force, tzif_bytes

UTC = timezone.utc
REGISTRY = default_registry()
KEYS = sorted(REGISTRY.keys())


def offset_by_zoneinfo(zone: zoneinfo.ZoneInfo, instant: int) -> int:
    return int(datetime.fromtimestamp(instant, UTC).astimezone(zone).utcoffset().total_seconds())


def test_every_zone_agrees_with_zoneinfo_around_every_transition():
    """Every offset change 1970-2060 of every zone, one second either side, plus random instants."""
    rnd = random.Random(7)
    start, end = 0, int(datetime(2060, 1, 1, tzinfo=UTC).timestamp())
    for key in KEYS:
        zone, reference = REGISTRY.get(key), zoneinfo.ZoneInfo(key)
        transitions = zone.table(end)[0]
        for t in transitions:
            if start <= t < end:
                assert zone.offset_at(t - 1) == offset_by_zoneinfo(reference, t - 1), (key, t)
                assert zone.offset_at(t) == offset_by_zoneinfo(reference, t), (key, t)
        for _ in range(10):
            t = rnd.randrange(-2_200_000_000, 7_000_000_000)
            assert zone.offset_at(t) == offset_by_zoneinfo(reference, t), (key, t)


@given(key=st.sampled_from(KEYS), instant=st.integers(-2_500_000_000, 8_000_000_000))
def test_offsets_agree_with_zoneinfo(key, instant):
    assert REGISTRY.get(key).offset_at(instant) == offset_by_zoneinfo(zoneinfo.ZoneInfo(key), instant)


def test_walls_resolve_like_zoneinfo():
    london = REGISTRY.get("Europe/London")
    gap_wall = int(datetime(2027, 3, 28, 1, 30, tzinfo=UTC).timestamp())  # 01:30 local, as local seconds
    assert london.instants_of_wall(gap_wall) == []
    assert london.gap_of_wall(gap_wall) == (int(datetime(2027, 3, 28, 1, tzinfo=UTC).timestamp()), 0, 3600)
    repeat_wall = int(datetime(2027, 10, 31, 1, 30, tzinfo=UTC).timestamp())
    assert london.instants_of_wall(repeat_wall) == [repeat_wall - 3600, repeat_wall]
    assert london.gap_of_wall(repeat_wall) is None


def test_tzdata_version_is_the_pinned_release():
    assert tzdata_version() == tzdata.IANA_VERSION == "2026f"
    assert Engine().tzdata_version == "2026f"


def test_pin_tzdata_ignores_the_host_files():
    pin_tzdata()
    assert zoneinfo.TZPATH == ()
    london = zoneinfo.ZoneInfo("Europe/London")
    assert datetime(2027, 7, 1, tzinfo=london).utcoffset() == timedelta(hours=1)
    assert pinned_zoneinfo("Asia/Kathmandu").utcoffset(datetime(2027, 1, 1)) == timedelta(hours=5, minutes=45)


def test_unknown_zones():
    for key in ("Europe/Londn", "../etc/passwd", "", "europe/london", "/Europe/London"):
        with pytest.raises(UnknownZoneError):
            REGISTRY.get(key)
    with pytest.raises(ScheduleError) as caught:
        Engine().next_fire(Schedule.cron("0 0 * * *", "Mars/Olympus_Mons"), datetime(2027, 1, 1, tzinfo=UTC))
    assert caught.value.field == "schedule.cron.time_zone"
    assert caught.value.reason == "unknown time zone 'Mars/Olympus_Mons'"


def test_links_and_fingerprints():
    prints = zone_fingerprints()
    assert set(prints) == set(KEYS)
    assert prints["US/Eastern"] == prints["America/New_York"]
    assert prints["Asia/Calcutta"] == prints["Asia/Kolkata"]
    assert prints["Europe/London"] == prints["Europe/Dublin"]  # same offsets since 1970: only abbreviations differ
    assert prints["Europe/London"] != prints["Europe/Lisbon"]  # Lisbon kept CET from 1992 to 1996
    assert zones_changed(prints, dict(prints)) == frozenset()


def test_zones_changed_reports_added_removed_and_different():
    old = {"A/One": "1", "A/Two": "2", "A/Gone": "3"}
    new = {"A/One": "1", "A/Two": "22", "A/New": "4"}
    assert zones_changed(old, new) == {"A/Two", "A/Gone", "A/New"}


@pytest.fixture
def release_with_modified_london(tmp_path: Path) -> Path:
    """A copy of three zones where Europe/London's rule moved: DST starts on the
    fourth Sunday of March instead of the last (a TZif footer change)."""
    for key in ("Europe/London", "America/New_York", "Asia/Kolkata"):
        target = tmp_path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(REGISTRY.tzif_bytes(key))
    london = tmp_path / "Europe" / "London"
    data = london.read_bytes()
    assert data.endswith(b"\nGMT0BST,M3.5.0/1,M10.5.0\n")
    london.write_bytes(data.replace(b"\nGMT0BST,M3.5.0/1,M10.5.0\n", b"\nGMT0BST,M3.4.0/1,M10.5.0\n"))
    (tmp_path / "+VERSION").write_text("2099z\n")
    return tmp_path


def test_a_modified_zone_file_changes_only_that_zone(release_with_modified_london: Path):
    modified = ZoneRegistry(release_with_modified_london)
    assert modified.version == "2099z"
    assert modified.keys() == {"Europe/London", "America/New_York", "Asia/Kolkata"}
    old = {key: REGISTRY.get(key).fingerprint() for key in modified.keys()}
    assert zones_changed(old, modified.fingerprints()) == {"Europe/London"}
    # The standard library reads the modified file the same way the engine does.
    with (release_with_modified_london / "Europe" / "London").open("rb") as f:
        reference = zoneinfo.ZoneInfo.from_file(f)
    zone = modified.get("Europe/London")
    for day in range(18, 32):
        t = int(datetime(2030, 3, day, 12, tzinfo=UTC).timestamp())
        assert zone.offset_at(t) == offset_by_zoneinfo(reference, t)
    # 24-31 March 2030: BST under the modified rule only.
    assert zone.offset_at(int(datetime(2030, 3, 26, tzinfo=UTC).timestamp())) == 3600
    assert REGISTRY.get("Europe/London").offset_at(int(datetime(2030, 3, 26, tzinfo=UTC).timestamp())) == 0
    # Recomputing with the new release moves the London job's next run, not the New York one.
    after = datetime(2030, 3, 25, 12, tzinfo=UTC)
    before_update, after_update = Engine(), Engine(modified)
    london_job = Schedule.cron("0 9 * * *", "Europe/London", exact=True)
    ny_job = Schedule.cron("0 9 * * *", "America/New_York", exact=True)
    assert before_update.next_fire(london_job, after).nominal_at == datetime(2030, 3, 26, 9, tzinfo=UTC)
    assert after_update.next_fire(london_job, after).nominal_at == datetime(2030, 3, 26, 8, tzinfo=UTC)
    assert before_update.next_fire(ny_job, after) == after_update.next_fire(ny_job, after)


def test_abbreviation_only_changes_do_not_flag_a_zone(tmp_path: Path):
    data = REGISTRY.tzif_bytes("Europe/London")
    (tmp_path / "Europe").mkdir()
    (tmp_path / "Europe" / "London").write_bytes(data.replace(b"BST", b"XST"))
    changed = ZoneRegistry(tmp_path).get("Europe/London")
    assert changed.fingerprint() == REGISTRY.get("Europe/London").fingerprint()


# A synthetic zone with transitions bigger than 3 hours.
T_GAP = int(datetime(2030, 1, 10, tzinfo=UTC).timestamp())  # 00:00 -> 05:00 local (+0 -> +5)
T_REPEAT = int(datetime(2030, 2, 10, tzinfo=UTC).timestamp())  # 05:00 -> 00:00 local (+5 -> +0)


@pytest.fixture
def big_jumps(tmp_path: Path) -> tuple[Engine, zoneinfo.ZoneInfo]:
    data = tzif_bytes([(T_GAP, 1), (T_REPEAT, 0)], [(0, False, "AAA"), (5 * 3600, False, "BBB")], "AAA0")
    (tmp_path / "Test").mkdir()
    (tmp_path / "Test" / "Jumps").write_bytes(data)
    return Engine(ZoneRegistry(tmp_path)), zoneinfo.ZoneInfo.from_file(io.BytesIO(data), key="Test/Jumps")


def _fires(engine: Engine, expression: str, after: datetime, count: int, **fields) -> list[datetime]:
    out = []
    for fire in engine.iter_fires(Schedule.cron(expression, "Test/Jumps", exact=True, **fields), after):
        out.append(fire.nominal_at)
        if len(out) == count:
            return out
    return out


def _rule(expression: str, gap: str = "auto", repeat: str = "auto") -> Rule:
    f = parse_cron(expression).resolve()
    return Rule(f.minutes, f.hours, f.days, f.months, f.weekdays, f.dom_star, f.dow_star, f.wild, gap, repeat)


def test_a_gap_over_three_hours_is_never_caught_up(big_jumps):
    engine, reference = big_jumps
    after = datetime(2030, 1, 9, 12, tzinfo=UTC)
    expected = [datetime(2030, 1, 10, 21, 30, tzinfo=UTC)]  # 11 Jan 02:30 at +5; 10 Jan 02:30 never
    for gap in (GapPolicy.AUTO, GapPolicy.SHIFT):
        assert _fires(engine, "30 2 * * *", after, 1, gap=gap) == expected
    until = datetime(2030, 1, 12, tzinfo=UTC)
    assert brute_force(_rule("30 2 * * *", gap="shift"), reference, after, until)[:1] == expected


def test_a_repeat_over_three_hours_fires_again_for_every_job(big_jumps):
    engine, reference = big_jumps
    after = datetime(2030, 2, 9, 12, tzinfo=UTC)
    first, second = datetime(2030, 2, 9, 21, 30, tzinfo=UTC), datetime(2030, 2, 10, 2, 30, tzinfo=UTC)
    assert _fires(engine, "30 2 * * *", after, 2) == [first, second]  # auto: like cronie after a clock reset
    assert _fires(engine, "30 2 * * *", after, 2, repeat=RepeatPolicy.ONCE)[0] == first
    assert _fires(engine, "30 2 * * *", after, 2, repeat=RepeatPolicy.ONCE)[1] == second + timedelta(days=1)
    until = datetime(2030, 2, 11, tzinfo=UTC)
    assert brute_force(_rule("30 2 * * *"), reference, after, until)[:2] == [first, second]


def test_zone_from_bytes_rejects_garbage():
    with pytest.raises(ValueError):
        Zone.from_bytes("Bad/Zone", b"not a zone file")
    with pytest.raises(ValueError):
        Zone.from_bytes("Bad/Zone", REGISTRY.tzif_bytes("Europe/London")[:100])


def test_far_future_and_far_past():
    engine = Engine()
    london = Schedule.cron("30 1 * * *", "Europe/London", exact=True)
    # 2399-10-31 is the last Sunday of October: 01:30 repeats; only the first (+01:00) fires.
    fires = []
    for fire in engine.iter_fires(london, datetime(2399, 10, 30, 12, tzinfo=UTC)):
        fires.append(fire.nominal_at)
        if len(fires) == 2:
            break
    assert fires == [datetime(2399, 10, 31, 0, 30, tzinfo=UTC), datetime(2399, 11, 1, 1, 30, tzinfo=UTC)]
    # Before 1847 London kept local mean time, 1 min 15 s behind GMT.
    old = engine.next_fire(Schedule.cron("0 12 * * *", "Europe/London", exact=True), datetime(1840, 6, 1, tzinfo=UTC))
    assert old.nominal_at == datetime(1840, 6, 1, 12, 1, 15, tzinfo=UTC)
    assert engine.next_fire(Schedule.cron("0 0 * * *", "UTC"), datetime(9999, 12, 31, 1, tzinfo=UTC)) is None


def test_registry_copies_are_independent(tmp_path: Path):
    shutil.copytree(Path(tzdata.__file__).parent / "zoneinfo" / "Asia", tmp_path / "Asia")
    copy = ZoneRegistry(tmp_path)
    assert "Asia/Kolkata" in copy.keys() and "Europe/London" not in copy.keys()
    assert copy.version == "unknown"
