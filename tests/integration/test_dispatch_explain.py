"""The dispatcher's claim query on PostgreSQL, shown with EXPLAIN (issue 4:
"every dispatcher query is a range scan with a LIMIT").

The statement explained is the one ``DispatchStore.claim_due`` really sends,
captured with a ``before_cursor_execute`` listener during a real claim, and
explained with its own parameters. The data: 4 000 cron jobs over 256
partitions, 2 % of them due, ANALYZE'd; this server owns every third
partition (its share of a three-server cluster).

What the planner does with that query, for the record (PostgreSQL 15):

- ``job_cursors_due`` (migration 0032; ``jobs_due`` before) is
  ``(partition, next_run_at) WHERE state = 'active'`` on ``job_cursors``, and the
  claim asks for ``partition = ANY(<owned>) AND next_run_at <= :horizon
  ORDER BY partition, next_run_at LIMIT :batch``. That order is the index's
  own: an Index Scan on ``job_cursors_due`` (one descent per owned
  partition, in partition order), each row joined to its job by
  ``jobs``' primary key, gives it with no Sort, so LockRows and Limit stop
  the scan at the batch. That is what the first test checks.
- The index cannot give rows in ``next_run_at`` order across partitions, so
  ``ORDER BY next_run_at`` would put a Sort under the Limit: each batch would
  read every due row of the owned partitions before the LIMIT applied,
  O(due²/batch) per drain under a backlog. The second test holds the claim
  to reading about its batch, not the whole backlog.
- Without any ORDER BY the plan hung on the statistics of ``next_run_at``,
  which every claim makes stale (it moves the cursors it reads). Statistics
  taken while many jobs were due make a Seq Scan that stops after a few
  pages look cheapest; once those jobs are claimed, nothing is due and that
  Seq Scan reads the whole table, every tick (on 1 M jobs: ~250 ms a second
  of PostgreSQL CPU for a server with nothing to do). The third test keeps
  the claim an index scan on exactly such statistics.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from tickwheel.v1 import job_pb2

from tickwheel_server.api.validate import normalise_job
from tickwheel.shared.clock import FakeClock
from tickwheel_server.store.quarantine import JOB_UNREADABLE, Finding, Quarantine
from tickwheel.shared.ids import partition_of, to_us
from tickwheel_server.schedule import Engine as ScheduleEngine, tzdata_version
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.partitions import raise_epochs_in
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import tenants
from tickwheel_server.store.tzdata import TzdataStore

from tests.support.plans import as_prepared, captured

pytestmark = pytest.mark.postgres

T = datetime(2027, 1, 4, tzinfo=timezone.utc)
PARTITIONS = 256
JOBS = 4000
OWNED = {p: 1 for p in range(0, PARTITIONS, 3)}
INDEX_SCANS = ("Index Scan", "Bitmap Index Scan", "Index Only Scan")
TABLES = ("jobs", "job_cursors")
"""A claim that reads either whole is what these tests keep out."""


def _spec(expression: str) -> job_pb2.Job:
    job = job_pb2.Job(name="explain", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")), payload=b"{}")
    job.schedule.cron.expression = expression
    job.schedule.cron.time_zone = "UTC"
    job.jitter.exact = True
    return normalise_job(job, T - timedelta(minutes=1))


def _job_id(rng: random.Random) -> str:
    return "job_01J" + "".join(rng.choice("0123456789ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(23))


def _populate(engine: sa.Engine, due_every: int, count: int = JOBS) -> None:
    """``count`` active cron jobs; one in ``due_every`` due at T (minutely), the
    others daily, due later today. Seeded, so the statistics are the same on
    every run."""
    rng = random.Random(4)
    now_us = to_us(T)
    version = tzdata_version()
    minutely = _spec("* * * * *").SerializeToString()
    daily = {m: _spec(f"{m % 60} {m // 60} * * *").SerializeToString() for m in range(1, 1440, 7)}
    rows = []
    for i in range(count):
        ident = _job_id(rng)
        if i % due_every == 0:
            spec, at = minutely, now_us
        else:
            minute = rng.choice(list(daily))
            spec, at = daily[minute], now_us + minute * 60_000_000
        rows.append(
            dict(
                id=ident, tenant="acme", partition=partition_of(ident, PARTITIONS), name=f"job-{i}", state="active",
                spec=spec, time_zone="UTC", next_run_at=at, next_due_at=at, run_count=0, tzdata_version=version,
                pause_reason="", paused_at=None, version=1, created_at=now_us, updated_at=now_us,
            )
        )
    with engine.begin() as conn:
        conn.execute(
            tenants.insert().values(
                name="acme", weight=1, max_concurrency=0, max_jobs=1_000_000, max_payload_bytes=65536,
                requests_per_second=100, state="active", pause_reason="", created_at=now_us,
                updated_at=now_us, version=1,
            )
        )
        raise_epochs_in(conn, {p: 1 for p in range(PARTITIONS)}, "explain-test", now_us)
        insert_jobs(conn, rows)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


async def _claim_statement(
    engine: sa.Engine, batch: int, at: datetime = T, quarantine: Quarantine | None = None
) -> tuple[str, dict, int]:
    """The SELECT a real ``claim_due`` sends, with its parameters, and how many jobs it claimed."""
    with captured(engine) as sent:  # the SELECT goes in the epochs' round trip (store/pipeline.py)
        store = DispatchStore(engine, FakeClock(autojump=True), quarantine=quarantine)
        result = await store.claim_due(OWNED, at, batch=batch)
    selects = [s for s in sent if "FROM job_cursors" in s.statement and "FOR UPDATE" in s.statement]
    assert selects, "claim_due sent no SELECT … FROM job_cursors … FOR UPDATE"
    return selects[0].statement, dict(selects[0].parameters), result.jobs


def _explain(engine: sa.Engine, statement: str, parameters: dict, analyze: bool = False) -> dict:
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    with engine.connect() as conn:
        try:
            return conn.exec_driver_sql(f"EXPLAIN ({options}) {statement}", parameters).scalar()[0]["Plan"]
        finally:
            conn.rollback()  # EXPLAIN ANALYZE ran the SELECT … FOR UPDATE: release its locks


def _nodes(plan: dict) -> list[dict]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def _outer_nodes(plan: dict) -> list[dict]:
    """The plan's nodes above any per-partition subquery (a LATERAL scan's)."""
    if plan["Node Type"] == "Subquery Scan":
        return []
    return [plan] + [n for child in plan.get("Plans", []) for n in _outer_nodes(child)]


def _describe(plan: dict, depth: int = 0) -> str:
    label = plan["Node Type"] + (f" using {plan['Index Name']}" if "Index Name" in plan else "")
    label += f" on {plan['Relation Name']}" if "Relation Name" in plan else ""
    label += f" (rows {plan['Actual Rows']})" if "Actual Rows" in plan else ""
    return "\n".join(["  " * depth + label] + [_describe(child, depth + 1) for child in plan.get("Plans", [])])


@pytest.fixture
def engine(postgres_url):
    engine = create_store_engine(postgres_url)
    migrate(engine)
    yield engine
    engine.dispose()


async def test_the_claim_query_is_a_range_scan_on_jobs_due_with_a_limit(engine) -> None:
    # More jobs than the others: the cursors are a narrow table (migration
    # 0032), and on a few dozen pages a Seq Scan and a Sort are cheaper than
    # 86 index descents, and the planner is right.
    _populate(engine, due_every=50, count=20_000)
    statement, parameters, claimed = await _claim_statement(engine, batch=1000)
    assert claimed > 0, "the claim found nothing due: the data set is not what this test explains"
    plan = _explain(engine, statement, parameters)
    nodes = _nodes(plan)
    shown = _describe(plan)
    assert any(n["Node Type"] in INDEX_SCANS and n.get("Index Name") == "job_cursors_due" for n in nodes), shown
    assert any(n["Node Type"] == "Limit" for n in nodes), shown
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") in TABLES for n in nodes), shown
    index_conditions = " ".join(n.get("Index Cond", "") for n in nodes if n.get("Index Name") == "job_cursors_due")
    assert "partition" in index_conditions and "next_run_at" in index_conditions, (
        f"jobs_due is scanned as a range over (partition, next_run_at), not filtered: {index_conditions}\n{shown}"
    )


async def test_with_jobs_left_out_a_claim_under_a_backlog_still_reads_about_its_batch(engine) -> None:
    """A full quarantine (1 000 ids left out) must not change the plan: written
    as ``key <> ALL(:excluded)`` the planner priced the filter as dropping
    99 % of rows and read and sorted the whole backlog (1 254 rows, then a
    Sort, for a batch of 50); as ``NOT (:excluded @> ARRAY[key])`` it keeps
    the ordered scan that stops at the LIMIT."""
    _populate(engine, due_every=1)
    batch = 50
    full = Quarantine()
    full.record(Finding(f"job_gone_{n}", "acme", 1, JOB_UNREADABLE, "bad") for n in range(full.max_excluded))
    statement, parameters, claimed = await _claim_statement(engine, batch=batch, quarantine=full)
    excluded = parameters["excluded"]  # one array literal: '{"job_gone_0@1",…}'
    assert claimed == batch and len(excluded.strip("{}").split(",")) == full.max_excluded
    plan = _explain(engine, statement, parameters, analyze=True)
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == "job_cursors"]
    read = sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans)
    assert read <= 20 * batch, f"the scan read {read} rows for a batch of {batch}:\n{_describe(plan)}"
    # No Sort of the owned partitions' rows together. On PostgreSQL each
    # partition is its own LIMITed scan (``claim_reads.due_sql``, lateral):
    # the planner may read a partition of a few rows by bitmap and sort
    # them under that partition's LIMIT, which bounds it by the partition.
    assert not any(n["Node Type"] == "Sort" for n in _outer_nodes(plan)), _describe(plan)


async def test_a_claim_under_a_backlog_reads_about_its_batch_not_the_whole_backlog(engine) -> None:
    _populate(engine, due_every=1)  # everything due: a backlog after an outage
    batch = 50
    statement, parameters, claimed = await _claim_statement(engine, batch=batch)
    assert claimed == batch
    plan = _explain(engine, statement, parameters, analyze=True)
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == "job_cursors"]
    read = sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans)
    # An ordered walk that filters out the other servers' partitions (two
    # thirds of the rows) and the rows this claim just took reads a few times
    # the batch (~5x here); reading the whole backlog is ~JOBS / 3 = 1 333 rows.
    assert read <= 20 * batch, f"the scan read {read} rows for a batch of {batch}:\n{_describe(plan)}"


async def test_nothing_due_on_statistics_from_a_burst_is_still_an_index_scan(engine) -> None:
    """Statistics say half the jobs are due; a claim (the burst) has taken
    this server's since. The next tick's claim must not read the table.
    (More jobs than above: on a table of a few hundred pages a Seq Scan and a
    Sort are cheaper than 86 index descents, and the planner is right.)"""
    count = 50_000
    _populate(engine, due_every=2, count=count)
    _, _, claimed = await _claim_statement(engine, batch=count)
    assert claimed > count // 10, "the burst claimed too little: the data set is not what this test explains"
    # Statistics are still those of the burst (no ANALYZE since): the next tick.
    statement, parameters, claimed = await _claim_statement(engine, batch=1000, at=T + timedelta(milliseconds=500))
    assert claimed == 0, "nothing is due on the next tick: the data set is not what this test explains"
    plan = _explain(engine, statement, parameters, analyze=True)
    nodes = _nodes(plan)
    shown = _describe(plan)
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") in TABLES for n in nodes), shown
    assert any(n["Node Type"] in INDEX_SCANS and n.get("Index Name") == "job_cursors_due" for n in nodes), shown


async def test_the_claim_query_stays_on_jobs_due_in_a_generic_plan(engine) -> None:
    """psycopg prepares a statement on its fifth execution, and after five
    more PostgreSQL may keep one generic plan for it, planned without the
    parameters' values. The partial index jobs_due (``WHERE state =
    'active'``) serves only a query whose predicate names that constant: with
    the state as a parameter (``state = $1``), the generic plan cannot use
    it and reads and sorts the whole table every tick (a Seq Scan and a Sort,
    which its estimates priced below the index scan)."""
    _populate(engine, due_every=50, count=20_000)
    statement, parameters, claimed = await _claim_statement(engine, batch=1000)
    assert claimed > 0, "the claim found nothing due: the data set is not what this test explains"
    prepared, arguments = as_prepared(statement, parameters)
    with engine.connect() as conn:
        try:
            conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
            conn.exec_driver_sql(f"PREPARE claim AS {prepared}")
            plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) EXECUTE claim({arguments})").scalar()
        finally:
            conn.rollback()
    nodes = _nodes(plan[0]["Plan"])
    shown = _describe(plan[0]["Plan"])
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") in TABLES for n in nodes), shown
    assert any(n["Node Type"] in INDEX_SCANS and n.get("Index Name") == "job_cursors_due" for n in nodes), shown


async def test_the_tzdata_recompute_reads_a_zone_s_active_jobs_on_their_partial_index(engine) -> None:
    """The recompute's batch (a zone's active jobs, paged by id) is a range
    scan of ``jobs_active_zone (time_zone, id) WHERE state = 'active'``, in a
    generic plan too (the state is a literal in its text): the index holds
    active jobs only, so a claim that completes a one-off job, or a pause,
    writes no entry into it (migration 0022)."""
    _populate(engine, due_every=50, count=20_000)
    zones = ["UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York", "Australia/Sydney"]
    with engine.begin() as conn:
        for index, zone in enumerate(zones):
            conn.execute(sa.text("UPDATE jobs SET time_zone = :zone WHERE mod(length(name) + partition, 5) = :index"),
                         {"zone": zone, "index": index})
        # A finished half of the jobs, as a store of one-off jobs has: a
        # quarter completed by a job write (both rows), a quarter by the
        # claim (the cursor only: still in jobs_active_zone).
        conn.execute(sa.text(
            "UPDATE job_cursors SET state = 'completed', next_run_at = NULL WHERE mod(partition, 2) = 0"
        ))  # fmt: skip
        conn.execute(sa.text("UPDATE jobs SET state = 'completed' WHERE mod(partition, 4) = 0"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE jobs")
        conn.exec_driver_sql("ANALYZE job_cursors")
    captured: list[tuple[str, dict]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM jobs" in statement and "ORDER BY jobs.id" in statement:
            captured.append((statement, dict(parameters)))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        examined, _ = await TzdataStore(engine, FakeClock(T)).recompute(
            ScheduleEngine(), tzdata_version(), {"Asia/Tokyo"}, T, dry_run=True, batch=100
        )
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert examined > 100 and captured
    statement, parameters = captured[0]
    plan = _explain(engine, statement, parameters)
    shown = _describe(plan)
    assert any(n.get("Index Name") == "jobs_active_zone" for n in _nodes(plan)), shown
    prepared, arguments = as_prepared(statement, parameters)
    with engine.connect() as conn:
        try:
            conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
            conn.exec_driver_sql(f"PREPARE zone_batch AS {prepared}")
            plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) EXECUTE zone_batch({arguments})").scalar()[0]["Plan"]
        finally:
            conn.rollback()
    shown = _describe(plan)
    assert any(n.get("Index Name") == "jobs_active_zone" for n in _nodes(plan)), shown
    assert not any(n["Node Type"] == "Seq Scan" for n in _nodes(plan)), shown
