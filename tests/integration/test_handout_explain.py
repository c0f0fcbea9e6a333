"""The fair hand-out's statements on PostgreSQL, shown with EXPLAIN (issue 6:
"the candidate query must not be dominated by one tenant's backlog").

The statements explained are those ``HandoutStore.hand_out_ready`` really sends,
captured with a ``before_cursor_execute`` listener during a real claim, and
explained with their own parameters. The data: tenant ``flood`` has 20 000
executions ready and 20 000 more due within the minute (claimed ahead by the
dispatcher), tenant ``quiet`` 50 ready; both jobs ``skip`` overlapping
occurrences, so the overlap check runs too. ANALYZE'd.

What the planner does, for the record (PostgreSQL 15): the probe for
tenants with ready work is one Index Scan on ``executions_tenant_ready``
under a Limit per tenant (the tenant's first entry); the pick of candidates
is a Nested Loop over the per-tenant shares (Function Scan on ``unnest``),
each an Index Scan on ``executions_tenant_ready`` under LockRows and a
Limit, so the flood's scan stops at its share (the picked rows are then
taken by primary key); the loose scan (long tenant lists) descends the same
index once per tenant; the overlap check reads the candidates' jobs' running
executions (``executions_busy``) and, per job, its executions not started
up to its newest candidate, under a LIMIT (``executions_not_started_job``).
An arm's candidates are, per tenant, an Incremental Sort over an Index Scan
on ``executions_tenant_ready`` under a Limit (its share and one row more).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import Capability, ResultIn
from tickwheel_server.store.lateness import LatenessStore
from tickwheel_server.store.queue import ExecutionQueue
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import executions, tenants

pytestmark = pytest.mark.postgres

T = datetime(2027, 1, 4, tzinfo=timezone.utc)
FLOOD = 20_000
QUIET = 50
INDEX_SCANS = ("Index Scan", "Bitmap Index Scan", "Index Only Scan")


def _populate(engine: sa.Engine) -> None:
    now_us = to_us(T)
    spec = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo"))).SerializeToString()
    with engine.begin() as conn:
        for name in ("flood", "quiet"):
            conn.execute(tenants.insert().values(
                name=name, weight=1, max_concurrency=0, max_jobs=1_000_000, max_payload_bytes=65536,
                requests_per_second=100, state="active", pause_reason="", created_at=now_us,
                updated_at=now_us, version=1,
            ))
        rows, job_rows = [], []
        rng = random.Random(6)
        for tenant, count, ahead in (("flood", FLOOD, FLOOD), ("quiet", QUIET, 0)):
            for index in range(count + ahead):
                job_id = f"job_{tenant}_{index % 500}"
                ready = now_us - rng.randrange(60_000_000) if index < count else now_us + rng.randrange(1, 60_000_000)
                rows.append(dict(
                    id=f"{job_id}:{index}", job_id=job_id, tenant=tenant, partition=index % 256, origin="scheduled",
                    nominal_at=ready, due_at=ready, ready_at=ready, attempt=1, delivery=0, status="scheduled",
                    handler="echo", missed_count=1, reap_count=0, payload=b"", error="", dead_reason="",
                    created_at=now_us,
                ))
            job_rows += [
                dict(id=f"job_{tenant}_{j}", tenant=tenant, partition=j % 256, name="j", state="active", spec=spec,
                     time_zone="UTC", next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x",
                     pause_reason="", paused_at=None, version=1, created_at=now_us, updated_at=now_us)
                for j in range(min(500, count + ahead))
            ]
        insert_jobs(conn, job_rows)
        conn.execute(executions.insert(), rows)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


@contextmanager
def _capturing(engine: sa.Engine) -> Iterator[list[tuple[str, object]]]:
    """The statements ``engine`` sends meanwhile, with their parameters."""
    captured: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if not executemany:
            captured.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        yield captured
    finally:
        event.remove(engine, "before_cursor_execute", capture)


async def _statements(engine: sa.Engine, tenants_served=("flood", "quiet"), **options) -> dict[str, tuple[str, object]]:
    """The statements of one real claim, by what they are; it must serve ``tenants_served``."""
    with _capturing(engine) as captured:
        store = ExecutionQueue(engine, FakeClock(T), **options)
        handed = await store.handout.hand_out_ready("s1", T, Capability(("flood", "quiet"), ("echo",), False), 100)
    assert {h.tenant for h in handed} == set(tenants_served)
    found = {}
    for statement, parameters in captured:
        for kind, marker in (("candidates", "AS q (tenant, n)"), ("ready", "WITH RECURSIVE ready"),
                             ("loose", "WITH RECURSIVE walk"),
                             ("probe", "FROM tenants"), ("overlap", "AS q (job_id, n, upto)"),
                             ("busy", "FOR SHARE OF e"), ("taken", "e.trace_context, e.manual_slot, j.spec")):
            if marker in statement and kind not in found:
                found[kind] = (statement, parameters)
    return found


def _explain(engine: sa.Engine, statement: str, parameters, analyze: bool = False) -> dict:
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


def _describe(plan: dict, depth: int = 0) -> str:
    label = plan["Node Type"] + (f" using {plan['Index Name']}" if "Index Name" in plan else "")
    label += f" on {plan['Relation Name']}" if "Relation Name" in plan else ""
    label += f" (rows {plan['Actual Rows']} x {plan.get('Actual Loops', 1)})" if "Actual Rows" in plan else ""
    return "\n".join(["  " * depth + label] + [_describe(child, depth + 1) for child in plan.get("Plans", [])])


def _index_scans_only(plan: dict, index: str) -> str:
    nodes = _nodes(plan)
    shown = _describe(plan)
    assert any(n["Node Type"] in INDEX_SCANS and n.get("Index Name") == index for n in nodes), shown
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "executions" for n in nodes), shown
    return shown


@pytest.fixture
def engine(postgres_url):
    engine = create_store_engine(postgres_url)
    migrate(engine)
    _populate(engine)
    yield engine
    engine.dispose()


async def test_the_candidates_are_per_tenant_index_scans_that_stop_at_each_share(engine) -> None:
    statements = await _statements(engine)
    statement, parameters = statements["candidates"]
    plan = _explain(engine, statement, parameters, analyze=True)
    shown = _index_scans_only(plan, "executions_tenant_ready")
    assert any(n["Node Type"] == "Limit" for n in _nodes(plan)), shown
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == "executions"]
    read = sum((n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1) for n in scans)
    # 100 slots, 50 each: the flood's 40 000 scheduled rows are not read, only its share.
    assert read <= 4 * 100, f"the candidate scans read {read} rows for a round of 100:\n{shown}"


async def test_finding_tenants_with_ready_work_reads_one_index_entry_per_tenant(engine) -> None:
    statements = await _statements(engine)
    plan = _explain(engine, *statements["probe"], analyze=True)
    shown = _index_scans_only(plan, "executions_tenant_ready")
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == "executions"]
    assert all(n["Actual Rows"] <= 1 for n in scans), shown
    loose = await _statements(engine, ("flood",), loose_scan_above=0)  # the first claim took all of quiet's
    plan = _explain(engine, *loose["loose"], analyze=True)
    shown = _index_scans_only(plan, "executions_tenant_ready")
    read = sum(n["Actual Rows"] * n.get("Actual Loops", 1) for n in _nodes(plan) if n.get("Relation Name") == "executions")
    assert read <= 10, f"the loose scan read {read} rows for two tenants:\n{shown}"


async def test_the_overlap_check_reads_a_bounded_part_of_each_job_s_queue(engine) -> None:
    statements = await _statements(engine)
    plan = _explain(engine, *statements["overlap"], analyze=True)
    shown = _index_scans_only(plan, "executions_not_started_job")
    read = sum(n["Actual Rows"] * n.get("Actual Loops", 1) for n in _nodes(plan) if n.get("Relation Name") == "executions")
    # Each flood job has 80 executions not started; the check reads, per job,
    # those up to its newest candidate, at most its candidates' count and two
    # more (100 candidates in all).
    assert read <= 3 * 100, f"the overlap check read {read} rows:\n{shown}"
    plan = _explain(engine, *statements["busy"], analyze=True)
    shown = _index_scans_only(plan, "executions_busy")
    assert any(n.get("Index Name") == "executions_busy" for n in _nodes(plan)), shown


async def test_a_batch_of_results_is_three_array_statements_on_indexes(engine) -> None:
    """Recording results for a round's hand-outs: the rows are read by primary
    key and the jobs with waiters on an index of waiting rows, each one
    statement with an array parameter; plain successes keep their attempts
    on their rows, so no attempt row goes in. Successes of handler targets
    read nothing of their jobs' definitions."""
    store = ExecutionQueue(engine, FakeClock(T))
    handed = await store.handout.hand_out_ready("s1", T, Capability(("flood", "quiet"), ("echo",), False), 100)
    captured: list[tuple[str, object, bool]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        captured.append((statement, parameters, executemany))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        acks = await store.outcomes.record_results([
            ResultIn(h.id, h.delivery, h.attempt, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w1", ("flood", "quiet")) for h in handed
        ])
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert len(acks) == len(handed) > 50 and all(ack.accepted for ack in acks)  # a few were skipped (overlap)
    assert not [c for c in captured if c[0].startswith("INSERT")], [c[0][:60] for c in captured]
    [(read, read_parameters, _)] = [c for c in captured if "FROM executions AS e WHERE e.id = ANY" in c[0]]
    assert not [c for c in captured if "jobs" in c[0].split(" WHERE ")[0]], [c[0][:80] for c in captured]
    _index_scans_only(_explain(engine, read, read_parameters), "executions_pkey")
    [(waiters, waiter_parameters, _)] = [c for c in captured if "AS w WHERE" in c[0]]
    plan = _explain(engine, waiters, waiter_parameters)
    # Any index that holds only waiting rows (none here, so the planner may
    # pick the key waiters' as readily as the job waiters'): never the table.
    waiting_only = {"executions_job_waits", "executions_key_waits", "executions_waiting"}
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == "executions"]
    assert scans and all(n.get("Index Name") in waiting_only for n in scans), _describe(plan)


async def test_a_batch_of_successes_is_one_update_through_the_primary_key(engine) -> None:
    """A batch of plain successes (the common outcome) is one UPDATE that
    writes each attempt's record on its row, found through the primary key
    (never a scan of the table hashed to probe the arrays): the arrays are
    the ids and the records' fields, not the statuses, attempts, ready
    instants, errors, reasons and end instants other outcomes need."""
    store = ExecutionQueue(engine, FakeClock(T))
    handed = await store.handout.hand_out_ready("s1", T, Capability(("flood", "quiet"), ("echo",), False), 100)
    captured: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.startswith("UPDATE executions"):
            captured.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        acks = await store.outcomes.record_results([
            ResultIn(h.id, h.delivery, h.attempt, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w1", ("flood", "quiet"))
            for h in handed
        ])
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert len(acks) == len(handed) > 50 and all(ack.accepted for ack in acks)
    [(update, parameters)] = captured
    arrays = [name for name, value in parameters.items() if isinstance(value, str) and value.startswith("{")]
    assert arrays == ["ids", "started", "workers", "worker_started", "waited", "outputs"], parameters.keys()
    _index_scans_only(_explain(engine, update, parameters), "executions_pkey")


async def test_the_taken_rows_are_read_back_by_primary_key(engine) -> None:
    """The take returns (id, tenant) only; the rows' other columns and their
    jobs' definitions come from one read by primary key afterwards."""
    statements = await _statements(engine)
    _index_scans_only(_explain(engine, *statements["taken"]), "executions_pkey")


async def test_the_wheel_s_rebuild_and_the_lateness_watch_read_the_scheduled_rows_by_index(engine) -> None:
    """Both read the scheduled rows in ``ready_at`` order with a LIMIT. The
    lateness watch stops at its oldest on ``executions_scheduled_tenant
    (ready_at, tenant, partition)``. The rebuild keeps the partitions gained
    as it scans (there is no index by partition: it would cost an entry at
    every insert of a scheduled row, migration 0022); it reads every
    scheduled row up to its horizon, and PostgreSQL 15 prices that as a
    Bitmap Heap Scan and a Sort whichever index feeds it: on
    ``executions_scheduled_tenant``, or, since migration 0030 made that one
    wider than ``executions_tenant_ready`` by the tenant, on the latter (it
    then also passes the entries beyond the horizon; the planner weighs
    them, and a rebuild is rare: partitions gained). Beside the 40 000
    scheduled rows, the history a store keeps: 200 000 ended ones, and
    40 000 scheduled rows parked beyond the rebuild's horizon (retries
    backing off, runs due later)."""
    parked = to_us(T + timedelta(hours=1))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at) "
            f"SELECT 'parked_' || g, 'job_flood_' || mod(g, 500), 'flood', mod(g, 256), 'scheduled', {parked} + g, "
            f"{parked} + g, {parked} + g, 2, 1, 'scheduled', 'echo', 1, 0, '', '', '', g "
            "FROM generate_series(1, 40000) AS g"
        )
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, finished_at) "
            "SELECT 'old_' || g, 'job_flood_' || mod(g, 500), 'flood', mod(g, 256), 'scheduled', g, g, g, 1, 1, "
            "'succeeded', 'echo', 1, 0, '', '', '', g, g FROM generate_series(1, 200000) AS g"
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE executions")
    captured: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM executions" in statement and "ORDER BY executions.ready_at" in statement:
            captured.append((statement, parameters))

    gained = list(range(0, 256, 3))
    event.listen(engine, "before_cursor_execute", capture)
    try:
        waiting = await DispatchStore(engine, FakeClock(T)).scheduled_in(gained, T + timedelta(minutes=2))
        late = await LatenessStore(engine, FakeClock(T)).oldest_waiting(T)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert waiting and {w.partition for w in waiting} <= set(gained) and late
    assert len(captured) == 3, [c[0][:80] for c in captured]  # the rebuild; the watch's scheduled and waiting rows
    for (statement, parameters), indexes in zip(captured[:2], (
        ("executions_scheduled_tenant", "executions_tenant_ready"), ("executions_scheduled_tenant",),
    )):
        plan = _explain(engine, statement, parameters)
        shown = _describe(plan)
        assert any(n["Node Type"] in INDEX_SCANS and n.get("Index Name") in indexes for n in _nodes(plan)), shown
        assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "executions" for n in _nodes(plan))
        assert any(n["Node Type"] == "Limit" for n in _nodes(plan)), shown


async def test_an_arm_reads_each_tenant_s_share_of_its_window_on_an_index(engine) -> None:
    """The arming pass (store/arming_pick.py): the tenants with work in the
    window are one probe each, and the candidates per-tenant index scans of
    ``executions_tenant_ready`` that stop at each share: the flood's 20 000
    runs ready within the minute are not read for an arm of 100."""
    with _capturing(engine) as captured:
        store = ExecutionQueue(engine, FakeClock(T))
        both = Capability(("flood", "quiet"), ("echo",), False)
        armed = await store.arming.arm("s1", T, T + timedelta(seconds=60), both, 100)
    assert len(armed) == 0  # jobs of a skip policy with no one-off schedule: read, not armed
    probe = next((s, p) for s, p in captured if "FROM tenants" in s and "EXISTS" in s)
    plan = _explain(engine, *probe, analyze=True)
    shown = _index_scans_only(plan, "executions_tenant_ready")
    read = sum(n["Actual Rows"] * n.get("Actual Loops", 1) for n in _nodes(plan) if n.get("Relation Name") == "executions")
    assert read <= 2, f"the probe read {read} rows for two tenants:\n{shown}"
    candidates = next((s, p) for s, p in captured if "FOR UPDATE OF executions" in s)
    plan = _explain(engine, *candidates, analyze=True)
    shown = _index_scans_only(plan, "executions_tenant_ready")
    read = sum((n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)
               for n in _nodes(plan) if n.get("Relation Name") == "executions" and "Index Name" in n
               and n["Index Name"] == "executions_tenant_ready")
    assert read <= 2 * 100, f"the candidate scans read {read} rows for an arm of 100:\n{shown}"
