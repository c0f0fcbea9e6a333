"""tzdata updates: recorded fingerprints and the recompute of stored cursors,
on SQLite and PostgreSQL, with a modified Europe/London zone file standing for
the new release (as tests/unit/schedule/test_zones.py builds it)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import execution_id, new_job_id, to_us
from tickwheel_server.schedule import Engine, ZoneRegistry
from tickwheel_server.schedule.zones import default_registry
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.jobs import JobStore
from tests.support.jobrows import job_row
from tickwheel_server.store.tables import executions, job_cursors, jobs
from tickwheel_server.store.tenants import Tenant, TenantStore
from tickwheel_server.store.tzdata import ShiftedRun, TzdataStore, _last_created

from tests.support.plans import captured, describe, plan, rows_read

UTC = timezone.utc
NOW = datetime(2030, 3, 25, 12, tzinfo=UTC)
ZONES = ("Europe/London", "Asia/Tokyo", "America/New_York")


@pytest.fixture
def new_release(tmp_path: Path) -> Engine:
    """Release "2099z": London's DST starts on the fourth Sunday of March
    (24 March 2030) instead of the last; the other zones are unchanged."""
    root = tmp_path / "tz"
    for key in ZONES:
        target = root / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(default_registry().tzif_bytes(key))
    london = root / "Europe" / "London"
    data = london.read_bytes()
    assert data.endswith(b"\nGMT0BST,M3.5.0/1,M10.5.0\n")
    london.write_bytes(data.replace(b"\nGMT0BST,M3.5.0/1,M10.5.0\n", b"\nGMT0BST,M3.4.0/1,M10.5.0\n"))
    (root / "+VERSION").write_text("2099z\n")
    return Engine(zones=ZoneRegistry(root))


def daily_at_nine(zone: str) -> job_pb2.Job:
    job = job_pb2.Job(
        name="report",
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 9 * * *", time_zone=zone)),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
    )
    job.jitter.exact = True
    return job


class World:
    def __init__(self, engine: sa.Engine, clock) -> None:
        self.engine = engine
        self.tenants = TenantStore(engine, clock)
        self.jobs = JobStore(engine, clock, partition_count=16)
        self.tzdata = TzdataStore(engine, clock)
        self.clock = clock

    async def create(self, zone: str, next_run_at: datetime, version: str = "old") -> str:
        job = daily_at_nine(zone)
        ident = new_job_id(self.clock.now())
        await self.jobs.create(
            NewJob(
                id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone=zone,
                next_run_at=next_run_at, next_due_at=next_run_at, tzdata_version=version, payload_size=0,
            ),
            f"req-{ident}",
        )
        return ident

    def row(self, job_id: str):
        with self.engine.connect() as conn:
            return job_row(conn, job_id)


@pytest.fixture
async def w(migrated_engine, clock) -> World:
    world = World(migrated_engine, clock)
    await world.tenants.create(Tenant(name="acme"))
    # The old release is the pinned one, recorded by an earlier server.
    assert await world.tzdata.record("old", default_registry().fingerprints(ZONES))
    return world


async def test_record_is_insert_if_absent(w: World):
    assert await w.tzdata.record("old", {"Europe/London": "x"}) is False
    assert (await w.tzdata.fingerprints("old"))["Europe/London"] == default_registry().get("Europe/London").fingerprint()
    assert await w.tzdata.fingerprints("never") is None


async def test_only_jobs_in_changed_zones_move(w: World, new_release: Engine):
    london_old = datetime(2030, 3, 26, 9, tzinfo=UTC)  # 09:00 GMT under the old rules
    london = await w.create("Europe/London", london_old)
    tokyo = await w.create("Asia/Tokyo", datetime(2030, 3, 26, 0, tzinfo=UTC))
    # A London job whose 26 March occurrence was already created (look-ahead):
    # its cursor may not move back before it.
    claimed = await w.create("Europe/London", datetime(2030, 3, 27, 9, tzinfo=UTC))
    with w.engine.begin() as conn:
        created = datetime(2030, 3, 26, 9, tzinfo=UTC)
        conn.execute(
            executions.insert().values(
                id=execution_id(claimed, created), job_id=claimed, tenant="acme", partition=0, origin="scheduled",
                nominal_at=to_us(created), due_at=to_us(created), ready_at=to_us(created), attempt=1, delivery=0,
                status="scheduled", missed_count=0, reap_count=0, payload=b"", error="", dead_reason="",
                created_at=to_us(NOW),
            )
        )
    before = {ident: w.row(ident) for ident in (london, tokyo, claimed)}

    # Dry run: the same report, nothing written.
    examined, shifted = await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=True)
    expected = [
        ShiftedRun(london, "acme", london_old, datetime(2030, 3, 26, 8, tzinfo=UTC), "old"),
        ShiftedRun(claimed, "acme", datetime(2030, 3, 27, 9, tzinfo=UTC), datetime(2030, 3, 27, 8, tzinfo=UTC), "old"),
    ]
    assert examined == 2
    assert sorted(shifted, key=lambda r: r.job_id) == sorted(expected, key=lambda r: r.job_id)
    assert {ident: w.row(ident) for ident in before} == before

    examined, shifted = await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False, batch=1)
    assert examined == 2
    assert sorted(shifted, key=lambda r: r.job_id) == sorted(expected, key=lambda r: r.job_id)
    row = w.row(london)
    assert (row.next_run_at, row.next_due_at, row.tzdata_version) == (
        to_us(datetime(2030, 3, 26, 8, tzinfo=UTC)), to_us(datetime(2030, 3, 26, 8, tzinfo=UTC)), "2099z",
    )
    assert w.row(claimed).next_run_at == to_us(datetime(2030, 3, 27, 8, tzinfo=UTC))
    assert w.row(tokyo) == before[tokyo]  # unchanged zone: not even read

    # Nothing is left to shift.
    assert await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False) == (0, [])


async def test_the_pairs_in_use_are_found_across_pages_of_the_active_jobs(w: World, new_release: Engine):
    """The walk for the (zone, release) pairs reads a page at a time: the
    one London job behind pages of Tokyo jobs is still found and shifted."""
    for _ in range(3):
        await w.create("Asia/Tokyo", datetime(2030, 3, 26, 0, tzinfo=UTC))
    london = await w.create("Europe/London", datetime(2030, 3, 26, 9, tzinfo=UTC))
    for page in (1, 2, 4):
        examined, shifted = await w.tzdata.recompute(
            new_release, "2099z", None, NOW, dry_run=True, plan_page=page
        )
        assert (examined, [run.job_id for run in shifted]) == (1, [london]), page


async def test_unknown_old_release_treats_every_zone_as_changed(w: World, new_release: Engine):
    tokyo = await w.create("Asia/Tokyo", datetime(2030, 3, 26, 0, tzinfo=UTC), version="1999a")
    examined, shifted = await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False)
    assert (examined, shifted) == (1, [])
    assert w.row(tokyo).tzdata_version == "2099z"  # cursor kept, release tag updated


async def test_a_job_the_claim_completed_is_passed_over_and_leaves_the_active_zone_index(
    w: World, new_release: Engine
):
    """The claim completes a job in its cursor alone (migration 0032), so
    its row may still say ``active`` in ``jobs_active_zone``: the recompute
    reads that row, finds its cursor completed, leaves the cursor as it is
    and brings the row's state up to it, so later recomputes pass it no more."""
    done = await w.create("Europe/London", datetime(2030, 3, 26, 9, tzinfo=UTC))
    live = await w.create("Europe/London", datetime(2030, 3, 27, 9, tzinfo=UTC))
    with w.engine.begin() as conn:  # what the claim of a last run leaves
        conn.execute(job_cursors.update().where(job_cursors.c.job_id == done).values(
            state="completed", next_run_at=None, next_due_at=None, run_count=1))  # fmt: skip
    examined, shifted = await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=True)
    assert examined == 2 and [r.job_id for r in shifted] == [live]
    with w.engine.connect() as conn:
        assert conn.execute(sa.select(jobs.c.state).where(jobs.c.id == done)).scalar() == "active", "a dry run"
    examined, shifted = await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False)
    assert examined == 2 and [r.job_id for r in shifted] == [live]
    row = w.row(done)
    assert (row.state, row.next_run_at, row.run_count) == ("completed", None, 1)
    with w.engine.connect() as conn:
        assert conn.execute(sa.select(jobs.c.state).where(jobs.c.id == done)).scalar() == "completed"


async def test_named_zones_are_recomputed_whatever_the_release(w: World, new_release: Engine):
    # Recorded as "2099z" already, but computed wrongly (under the old rules).
    london = await w.create("Europe/London", datetime(2030, 3, 26, 9, tzinfo=UTC), version="2099z")
    tokyo = await w.create("Asia/Tokyo", datetime(2030, 3, 26, 0, tzinfo=UTC), version="2099z")
    assert await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False) == (0, [])
    examined, shifted = await w.tzdata.recompute(
        new_release, "2099z", {"Europe/London", "Asia/Tokyo"}, NOW, dry_run=False
    )
    assert examined == 2
    assert [(r.job_id, r.new_next_run_at) for r in shifted] == [(london, datetime(2030, 3, 26, 8, tzinfo=UTC))]
    assert w.row(tokyo).next_run_at == to_us(datetime(2030, 3, 26, 0, tzinfo=UTC))


async def test_a_definition_that_does_not_parse_is_left_as_it_is(w: World, new_release: Engine):
    # One damaged row in the batch: the others are still recomputed.
    damaged = await w.create("Europe/London", datetime(2030, 3, 26, 9, tzinfo=UTC))
    london = await w.create("Europe/London", datetime(2030, 3, 26, 9, tzinfo=UTC))
    with w.engine.begin() as conn:
        conn.execute(jobs.update().where(jobs.c.id == damaged).values(spec=b"\x0a\xff\x01garbage"))
    before = w.row(damaged)
    examined, shifted = await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False)
    assert examined == 2
    assert [(r.job_id, r.new_next_run_at) for r in shifted] == [(london, datetime(2030, 3, 26, 8, tzinfo=UTC))]
    assert w.row(damaged) == before


async def test_a_previous_jobs_shifted_cursor_keeps_its_nominal_beside_its_scan_key(w: World, new_release: Engine):
    from tickwheel.v1 import calendar_pb2

    from tickwheel_server.api.calendars import definition_of, normalise_calendar
    from tickwheel_server.store.calendars import CalendarStore

    await CalendarStore(w.engine, w.clock).create("acme", "days", definition_of(normalise_calendar(
        calendar_pb2.Calendar(name="days", time_zone="Europe/London", holidays=["2030-03-27"])
    )), "cal-1")  # fmt: skip
    job = daily_at_nine("Europe/London")
    job.schedule.cron.expression = "0 9 * * WED"
    job.calendar.CopyFrom(job_pb2.JobCalendar(name="days", rule=job_pb2.CALENDAR_RULE_PREVIOUS))
    wednesday = datetime(2030, 3, 27, 9, tzinfo=UTC)  # 09:00 GMT under the old rules: a holiday
    ident = new_job_id(w.clock.now())
    await w.jobs.create(NewJob(
        id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone="Europe/London",
        next_run_at=wednesday, next_due_at=wednesday, tzdata_version="old", payload_size=0,
    ), "req-prev")  # fmt: skip
    assert (w.row(ident).next_run_at, w.row(ident).next_nominal_at) == (
        to_us(datetime(2030, 3, 26, 9, tzinfo=UTC)), to_us(wednesday)
    )
    await w.tzdata.recompute(new_release, "2099z", None, NOW, dry_run=False)
    row = w.row(ident)
    shifted = datetime(2030, 3, 27, 8, tzinfo=UTC)  # 09:00 BST under the new rules
    assert row.next_nominal_at == to_us(shifted), "the nominal cursor moved, kept beside the scan key"
    assert to_us(datetime(2030, 3, 26, tzinfo=UTC)) < row.next_run_at < to_us(datetime(2030, 3, 27, tzinfo=UTC))


def _executions(conn, job_id: str, rows: list[tuple[int, str, str, int]]) -> None:
    """Executions of ``job_id``: (nominal µs, status, origin, attempt) each."""
    conn.execute(executions.insert(), [dict(
        id=f"{job_id}:{origin}:{nominal}", job_id=job_id, tenant="acme", partition=0, origin=origin,
        nominal_at=nominal, due_at=nominal, ready_at=nominal, attempt=attempt,
        delivery=1 if status in ("running", "armed") else 0, status=status,
        owner="s1" if status in ("running", "armed") else None, worker_id=None, handler="echo", missed_count=0,
        reap_count=0, payload=b"", error="", dead_reason="", created_at=0,
        finished_at=nominal if status in ("succeeded", "dead", "canceled") else None,
    ) for nominal, status, origin, attempt in rows])  # fmt: skip


async def test_the_latest_created_occurrence_is_the_newest_of_every_status_group_but_triggers(w: World) -> None:
    ended = [(n, "succeeded", "scheduled", 1) for n in range(1, 6)]
    cases = {
        # job: its executions, the latest created occurrence (None: none)
        "ended": (ended + [(50, "dead", "scheduled", 3), (100, "succeeded", "trigger", 1)], 50),
        "backfilled": (ended + [(90, "canceled", "backfill", 1)], 90),
        "waiting": (ended + [(60, "waiting", "scheduled", 1), (200, "scheduled", "trigger", 1)], 60),
        "running": (ended + [(70, "running", "scheduled", 1), (300, "running", "trigger", 1)], 70),
        "retrying": (ended + [(75, "scheduled", "scheduled", 2)], 75),
        "armed": (ended + [(80, "armed", "scheduled", 1)], 80),
        "triggers only": ([(10, "succeeded", "trigger", 1), (20, "running", "trigger", 1)], None),
        "nothing": ([], None),
    }
    ids = {}
    for name in cases:
        ids[name] = await w.create("Asia/Tokyo", NOW)
    with w.engine.begin() as conn:
        for name, (rows, _) in cases.items():
            if rows:
                _executions(conn, ids[name], rows)
    with w.engine.connect() as conn:
        latest = _last_created(conn, [*ids.values(), "job_unknown"])
    assert latest == {ids[name]: expected for name, (_, expected) in cases.items() if expected is not None}


@pytest.mark.postgres
async def test_the_latest_created_occurrence_reads_a_few_rows_of_a_job_s_long_history(w: World) -> None:
    """A minutely job's year of history (here 50 000 ended executions, and
    triggers after its last occurrence) among other jobs' (30 000), and a
    job without any: the read descends each group's job index to the newest
    row that is not a trigger, in the custom and the generic plan, rather
    than reading every ended execution of the job."""
    if w.engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plan")
    job_id, quiet = await w.create("Asia/Tokyo", NOW), await w.create("Asia/Tokyo", NOW)
    with w.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, "
            f"finished_at) SELECT '{job_id}:' || k, '{job_id}', 'acme', 0, "
            "CASE WHEN k > 50000 THEN 'trigger' ELSE 'scheduled' END, k, k, k, 1, 1, 'succeeded', 'echo', 0, 0, "
            "'', '', '', 0, k FROM generate_series(1, 50010) AS k"
        )
        # Other jobs' history beside it: 300 jobs of 100 executions each.
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, "
            "finished_at) SELECT 'other_' || j || ':' || k, 'other_' || j, 'acme', 0, 'scheduled', k, k, k, 1, 1, "
            "'succeeded', 'echo', 0, 0, '', '', '', 0, k "
            "FROM generate_series(1, 300) AS j, generate_series(1, 100) AS k"
        )
    with w.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE executions")
    with captured(w.engine) as seen:
        with w.engine.connect() as conn:
            assert _last_created(conn, [job_id, quiet]) == {job_id: 50000}
    for mode in ("force_custom_plan", "force_generic_plan"):
        plans = [plan(w.engine, statement, parameters, mode=mode, analyze=True) for statement, parameters, _ in seen]
        assert sum(rows_read(top, "executions") for top in plans) <= 100, (mode, [describe(top) for top in plans])
