"""Statements on partially indexed tables hold their plan by their text: the
value a partial index's predicate names (an execution's status, a job's
state, an alert's webhook step, a calendar's non-empty name) is a literal
in the statement, never a bound parameter.

psycopg prepares a statement it sends often, and PostgreSQL may then keep
one generic plan for it, planned without the parameters' values. A generic
plan cannot prove ``status = $1`` implies ``status = 'running'``, so it
cannot use ``executions_owner`` (since migration 0040 ``executions_running``): with the status bound, the reaper's
``running_owners`` was a Seq Scan of ``executions``, ended history
included, kept off it only by the planner's pricing of its custom plans.
Here every statement the requeue, dead-letter, cancel, retention and
webhook paths send on those tables is captured while they run over 20 000
ended executions and explained as a generic plan: none reads the table
whole. So are those on the partial indexes added since (``executions_armed``
and ``_armed_job``, migration 0027; ``executions_scheduled_tenant``,
migration 0030): the arm, its start and its disarms, the reaper's view of
armed rows, the tenant walk's ready side, the lateness watch and the timer
wheel's rebuild; and the safety net (``wake_stalled``) with a key and a job
that have sleeping waiters, so it sends its wake-ups too.

And every statement over arrays (``unnest``, ``= ANY``): each driver-SQL
statement the store defines, and those built with ``one_of`` and
``pairs_in`` as the paths send them, planned with arrays of 1 200
elements, generic and custom: none rescans an array or a table in a
nested loop, or (generic) reads executions, jobs or job_cursors whole or
searches a batch's array for each row of another index."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.arming import ArmStore, disarm_jobs
from tickwheel_server.store.calendaruse import jobs_naming
from tickwheel_server.store.claim_reads import DUE_SQL
from tickwheel_server.store.deadletters import DeadLetterStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.executions import Capability, Lost
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.jobpages import PAGE_SCAN
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.lateness import LatenessStore
from tickwheel_server.store.requeue import RequeueStore
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import concurrency_keys, executions
from tickwheel_server.store.tenant_walk import TenantWalk
from tickwheel_server.store.tenants import Tenant, TenantStore
from tickwheel.shared.ids import from_us, to_us

from tests.support.plans import INDEX_SCANS, Sent, as_prepared, captured, describe, nodes, plan, rows_read, seq_scans

pytestmark = pytest.mark.postgres

HISTORY = 20_000
PARTIAL = ("executions", "alerts")


@pytest.fixture
async def engine(migrated_engine, clock) -> sa.Engine:
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    with migrated_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, "
            "pause_reason, version, created_at, updated_at, calendar) "
            "SELECT 'job_' || lpad(g::text, 5, '0'), 'acme', 0, 'j', 'active', '', 'UTC', 'x', '', 1, 0, 0, "
            "CASE WHEN g <= 5 THEN 'holidays' ELSE '' END FROM generate_series(1, 2000) AS g"
        )
        conn.exec_driver_sql(
            "INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count) "
            "SELECT 'job_' || lpad(g::text, 5, '0'), 'acme', 0, 'active', 1, 0 FROM generate_series(1, 2000) AS g"
        )
        # The history: ended executions of every job, a tenth of them dead.
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, handler, missed_count, reap_count, payload, error, dead_reason, created_at, "
            "finished_at) "
            "SELECT 'job_' || lpad(j::text, 5, '0') || ':' || k, 'job_' || lpad(j::text, 5, '0'), 'acme', 0, "
            "'scheduled', k, k, k, 1, 1, CASE WHEN k = 10 THEN 'dead' ELSE 'succeeded' END, 'echo', 0, 0, '', '', "
            f"'', 0, k FROM generate_series(1, {HISTORY // 10}) AS j, generate_series(1, 10) AS k"
        )
        # What is open now: running under three sessions, one asked to stop, one not started.
        for n, (owner, status) in enumerate((("s1", "running"), ("s1", "running"), ("s2", "running"),
                                             ("s3", "running"), (None, "scheduled"))):  # fmt: skip
            conn.execute(executions.insert().values(
                id=f"open_{n}", job_id=f"job_{n + 1:05d}", tenant="acme", partition=0, origin="scheduled",
                nominal_at=100 + n, due_at=100, ready_at=100, attempt=1, delivery=1 if owner else 0, status=status,
                owner=owner, worker_id="w1" if owner else None, handed_out_at=100 if owner else None, handler="echo",
                missed_count=0, reap_count=0, payload=b"", error="", dead_reason="", created_at=0, finished_at=None,
                cancel_requested_at=100 if n == 1 else None))  # fmt: skip
        # Stalled: a key with a free slot and a waiter asleep on it, a job
        # waiter with nothing of its job running; and a row armed by a session that is gone.
        conn.execute(concurrency_keys.insert().values(tenant="acme", name="slot", max_running=1, running=0,
                                                      limit_set_at=0))
        for ident, job_id, status, wait_key, owner in (("stalled_key", "job_01001", "waiting", "slot", None),
                                                       ("stalled_job", "job_01002", "waiting", None, None),
                                                       ("armed_0", "job_01003", "armed", None, "gone")):
            conn.execute(executions.insert().values(
                id=ident, job_id=job_id, tenant="acme", partition=0, origin="scheduled", nominal_at=100,
                due_at=100, ready_at=100, attempt=1, delivery=1 if owner else 0, status=status, owner=owner,
                wait_key=wait_key, waiting_since=100 if status == "waiting" else None, handler="echo",
                missed_count=0, reap_count=0, payload=b"", error="", dead_reason="", created_at=0))  # fmt: skip
        # Alerts: a long history the webhook has sent, and one it owes.
        alert = ("INSERT INTO alerts (id, dedup_key, kind, severity, tenant, job_id, execution_id, server_id, "
                 "summary, details, raised_at, last_seen_at, count, resolved_at, changed_at, seq, notified) ")
        conn.exec_driver_sql(
            alert + "SELECT 'a' || g, 'k' || g, 'dead_letter', 'warning', 'acme', '', '', '', 's', '{}', g, g, 1, g, "
            f"g, g, 'resolved' FROM generate_series(1, {HISTORY}) AS g"
        )
        conn.exec_driver_sql(
            alert + "VALUES ('owed', 'owed', 'dead_letter', 'warning', 'acme', '', '', '', 's', '{}', "
            f"{HISTORY + 1}, {HISTORY + 1}, 1, NULL, {HISTORY + 1}, {HISTORY + 1}, '')"
        )
    with migrated_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
    return migrated_engine


def _on(tables: tuple[str, ...], statement: str) -> bool:
    """A read, update or delete naming one of ``tables`` (an insert has no plan to hold)."""
    head = statement.lstrip().split(None, 1)[0].upper()
    named = re.search(rf"\b({'|'.join(tables)})\b", statement) is not None
    return head in ("SELECT", "UPDATE", "DELETE", "WITH") and named


async def _exercise(engine, clock) -> list[Sent]:
    """Run every path under test once, returning the statements they sent."""
    requeues = RequeueStore(engine, clock)
    alerts = AlertStore(engine, clock)
    with captured(engine) as seen:
        assert sorted(await requeues.running_owners()) == ["s1", "s2", "s3"]
        assert {r.execution_id for r in await requeues.running_under("s1")} == {"open_0", "open_1"}
        assert [c.execution_id for c in await requeues.cancel_requests("s1")] == ["open_1"]
        assert await requeues.restamp("s2", "s2b") == 1
        assert [r.execution_id for r in await requeues.reattach("s2c", "w1", [("open_2", 1)], tenants=("acme",))] \
            == ["open_2"]
        done = await requeues.requeue("s2c", [Lost("open_2", 1, "its worker went silent")], counts=True)
        assert [r.execution_id for r in done.requeued] == ["open_2"]
        # A hello's mark (store/unheld.py) and the reaper's give-back: nothing to mark or give back here.
        assert await requeues.reattach("s9", "w9", [], tenants=("acme",), disown_since_us=0) == []
        assert await requeues.release_unheld("s3") == ([], [], 0)
        await requeues.release([("open_3", 1)])
        assert len((await requeues.reap_owner("s1", "session expired")).requeued) == 1  # open_1 ends canceled
        assert await requeues.wake_stalled() == 2  # the key's waiter and the job's
        arming = ArmStore(engine, clock)
        assert await arming.armed_owners() == ["gone"]
        assert [r.execution_id for r in await arming.disarm_owner("gone")] == ["armed_0"]
        echo = Capability(("acme",), ("echo",), True)
        await arming.arm("s9", clock.now(), clock.now() + timedelta(seconds=5), echo, 10)
        assert (await arming.start("s9", [("open_4", 1, False)], clock.now())).started == []
        assert await arming.disarm("s9", [("open_4", 1)]) == []
        with engine.begin() as conn:
            assert disarm_jobs(conn, ["job_01003", "job_00005"]) == []
            TenantWalk(above=0, ready_steps=2).visit(conn, "g", to_us(clock.now()), since=0)
        await LatenessStore(engine, clock).oldest_waiting(clock.now())
        await DispatchStore(engine, clock).scheduled_in([0], clock.now())
        letters = DeadLetterStore(engine, clock, alerts)
        page = await letters.list("acme")
        assert page.executions and all(e.status == "dead" for e in page.executions)
        assert (await letters.list("acme", job_id="job_00007")).executions
        await letters.replay("acme", "job_00007:10")
        history = HistoryStore(engine, clock)
        assert (await history.list_executions("acme", "job_00001")).executions
        assert await history.last_run("acme", "job_00001") is not None
        await history.cancel_execution("acme", "open_4")
        await RetentionStore(engine, clock).prune_executions(clock.now(), limit=100)
        assert [o.alert.id for o in await alerts.owed()] == ["owed"]
        # The stale marking's batch (nothing older than the owed alert is owed): on alerts_webhook too.
        assert [o.alert.id for o in await alerts.owed(not_before=from_us(HISTORY + 1), stale_batch=10)] == ["owed"]
        with engine.connect() as conn:
            assert jobs_naming(conn, "acme", "holidays") == 5
    return seen


async def test_no_statement_on_a_partially_indexed_table_reads_it_whole_in_a_generic_plan(engine, clock) -> None:
    seen = [sent for sent in await _exercise(engine, clock) if _on(PARTIAL, sent.statement)]
    assert len(seen) >= 15, [sent.statement for sent in seen]
    whole = []
    for statement, parameters, _ in seen:
        top = plan(engine, statement, parameters)
        if seq_scans(top, PARTIAL):
            whole.append((statement, describe(top)))
    assert not whole, "\n\n".join(f"{s}\n{d}" for s, d in whole)


async def test_a_calendar_s_jobs_are_read_on_jobs_calendar_in_a_generic_plan(engine, clock) -> None:
    """``jobs_calendar (tenant, calendar, id) WHERE calendar <> ''``: with
    the calendar's name bound, a generic plan cannot prove it non-empty and
    reads the tenant's every job on ``jobs_tenant``; the statement states
    the predicate with a literal."""
    with captured(engine) as seen:
        with engine.connect() as conn:
            assert jobs_naming(conn, "acme", "holidays") == 5
    [(statement, parameters, _)] = seen
    top = plan(engine, statement, parameters)
    assert any(n["Node Type"] in INDEX_SCANS and n.get("Index Name") == "jobs_calendar" for n in nodes(top)), \
        describe(top)


async def test_a_job_s_running_group_is_read_on_executions_busy_alone_in_a_generic_plan(engine, clock) -> None:
    """``executions_busy (job_id) WHERE status = 'running' OR (status =
    'scheduled' AND attempt > 1)``: with the attempt bound, a generic plan
    proved only the ``running`` branch and read the job's retries through
    ``executions_not_started_job`` beside it (a BitmapOr); with the index's
    predicate word for word, one scan of ``executions_busy``."""
    with captured(engine) as seen:
        assert (await HistoryStore(engine, clock).list_executions("acme", "job_00001")).executions
    [(statement, parameters, _)] = [sent for sent in seen if "status = 'running' OR" in sent.statement]
    top = plan(engine, statement, parameters)
    assert {n["Index Name"] for n in nodes(top) if "Index Name" in n} == {"executions_busy"}, describe(top)


async def test_a_page_of_jobs_reads_each_cursor_by_its_key_in_a_generic_plan(engine, clock) -> None:
    """ListJobs, SearchJobs and GetJob read each job with its cursor
    (``job_cursors``, migration 0032): a page of ``jobs_tenant`` in id order
    with a LIMIT, each row's cursor by its primary key, in a generic plan
    too; neither table read whole, nor a page's rows sorted."""
    store = JobStore(engine, clock, partition_count=1)
    with captured(engine) as seen:
        page = await store.list("acme", after_id="job_00100", limit=50)
        assert [job.id for job in page] == [f"job_{n:05d}" for n in range(101, 151)]
        assert len(await store.search(after_id="job_01000", limit=50, state="active")) == 50
        assert (await store.get("acme", "job_00007")).run_count == 0
    reads = [sent for sent in seen if _on(("job_cursors",), sent.statement)]
    assert len(reads) == 3, [sent.statement for sent in seen]
    for statement, parameters, _ in reads:
        top = plan(engine, statement, parameters)
        assert not seq_scans(top, ("jobs", "job_cursors")), describe(top)
        assert not any(n["Node Type"] == "Sort" for n in nodes(top)), describe(top)
        for mode in ("force_generic_plan", "force_custom_plan"):
            # A page deep in the table reads about a page of cursors, not every
            # cursor before it (a merge join bound on one side only did).
            ran = plan(engine, statement, parameters, mode=mode, analyze=True)
            read = sum(n["Actual Rows"] * n["Actual Loops"] for n in nodes(ran)
                       if n.get("Relation Name") == "job_cursors")
            assert read <= 2 * 50 + 1, describe(ran)


async def test_a_hello_reads_its_worker_s_running_rows_only_and_the_reaper_its_dead_session_s(engine, clock) -> None:
    """A hello's mark (:func:`store.unheld.disown`) reads the running rows
    of its tenants and its worker id, each session's range of
    ``executions_running (owner, tenant, worker_id)`` (migration 0040), the
    sessions walked a probe each, under a LIMIT, whatever other workers of
    its tenant run (2 000 here, 200 workers'), in a generic plan and with
    its values alike; its marking statement reads by primary key, and it and
    the reaper's give-back (``release_unheld``, on the same index, led by
    the session) read no table whole."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO executions (id, job_id, tenant, partition, origin, nominal_at, due_at, ready_at, attempt, "
            "delivery, status, owner, worker_id, handed_out_at, handler, missed_count, reap_count, payload, error, "
            "dead_reason, created_at) "
            "SELECT 'busy_' || g, 'job_' || lpad((g %% 2000 + 1)::text, 5, '0'), 'acme', 0, 'scheduled', 1, 1, 1, 1, "
            "1, 'running', CASE WHEN g <= 3 THEN 's7' ELSE 's8' END, "
            "CASE WHEN g <= 3 THEN 'w7' ELSE 'w8_' || (g %% 200) END, 100, 'echo', 0, 0, '', '', '', 0 FROM generate_series(1, 2003) AS g"
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE executions")
    requeues = RequeueStore(engine, clock)
    with captured(engine) as seen:
        taken = await requeues.reattach("s9", "w7", [("busy_1", 1)], tenants=("acme", "globex"), disown_since_us=0)
        assert [r.execution_id for r in taken] == ["busy_1"]  # listed: re-attached; busy_2 and _3 marked
        assert sorted(r.execution_id for r in (await requeues.release_unheld("s7")).back) == ["busy_2", "busy_3"]
    [(read, read_parameters, _)] = [s for s in seen if s.statement.lstrip().startswith(("SELECT", "WITH"))
                                    and "worker_id =" in s.statement and "LIMIT" in s.statement]
    for mode, analyze in (("force_generic_plan", False), ("force_custom_plan", True)):
        top = plan(engine, read, read_parameters, mode=mode, analyze=analyze)
        scans = [n for n in nodes(top) if n.get("Relation Name") == "executions"]
        assert {n.get("Index Name") for n in scans} == {"executions_running"}, describe(top)
        assert any(n["Node Type"] == "Limit" for n in nodes(top)), describe(top)
        if analyze:
            # w7's one row still running (busy_1, re-attached to s9), none of the
            # other workers' 2 000 visited: each session's range, the worker id
            # in the index's condition (the tenants too where they tell rows
            # apart; here every row is acme's). Per-loop rows are rounded.
            [joined] = [n for n in nodes(top) if n["Node Type"] == "Nested Loop"]
            assert joined["Actual Rows"] == 1, describe(top)
            ranges = [n for n in scans if n["Node Type"] in ("Index Scan", "Bitmap Index Scan")]
            assert len(ranges) == 2, describe(top)  # the sessions', and the one of rows without an owner
            for each in ranges:
                assert re.search(r"\(owner (= |IS NULL).*worker_id =", each["Index Cond"]), each
                assert each.get("Rows Removed by Filter", 0) == 0, each
    sent = [s for s in seen if _on(("executions",), s.statement)]
    [(mark, mark_parameters, _)] = [s for s in sent if s.statement.startswith("UPDATE executions SET unheld_delivery")]
    top = plan(engine, mark, mark_parameters)
    # By id on the primary key alone: no array joined to it, which a generic
    # plan rescanned for every row matched, nor searched as a filter over a
    # range of another index (both quadratic), nor the running rows ANDed in.
    assert {n["Index Name"] for n in nodes(top) if "Index Name" in n} == {"executions_pkey"}, describe(top)
    assert not any(n["Node Type"] == "Function Scan" for n in nodes(top)), describe(top)
    [(pick, pick_parameters, _)] = [s for s in sent if s.statement.startswith("SELECT")
                                    and "unheld_delivery = executions.delivery" in s.statement]
    top = plan(engine, pick, pick_parameters)
    # The dead session's running rows, in no order: not a walk of the primary key in id order.
    assert {n["Index Name"] for n in nodes(top) if "Index Name" in n} == {"executions_running"}, describe(top)
    for statement, parameters, _ in sent:
        top = plan(engine, statement, parameters)
        assert not seq_scans(top, PARTIAL), f"{statement}\n{describe(top)}"


# --------------------------------------------------------------------------- statements over arrays

ARRAY_LENGTH = 1_200
"""Elements each array of a statement is planned with: a batch of results,
a round's hand-outs or a requeue runs to thousands."""
BIG = ("executions", "jobs", "job_cursors")
"""Tables a statement over an array never reads whole."""
_ARRAY_STATEMENT = re.compile(r"unnest\(|= ANY \(CAST\(")


def _array_statements() -> dict[str, str]:
    """Every driver-SQL statement over arrays the store modules define
    (module constants, and those kept in a module's dicts, tuples and
    lists), by where it is defined."""
    import importlib
    import pkgutil

    import tickwheel_server.store as store

    found: dict[str, str] = {}

    def visit(where: str, value) -> None:
        if isinstance(value, str):
            if "%(" in value and _ARRAY_STATEMENT.search(value):
                found.setdefault(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(f"{where}[{key!r}]", item)
        elif isinstance(value, (tuple, list)):
            for n, item in enumerate(value):
                visit(f"{where}[{n}]", item)

    for info in pkgutil.iter_modules(store.__path__):
        module = importlib.import_module(f"{store.__name__}.{info.name}")
        for name, value in vars(module).items():
            if not name.startswith("__"):
                visit(f"{info.name}.{name}", value)
    return {where: statement for statement, where in found.items()}


def _values(engine, statement: str) -> dict:
    """Parameters for ``statement``, each of the type PostgreSQL infers for
    it, every array :data:`ARRAY_LENGTH` long."""
    prepared, _ = as_prepared(statement, {name: None for name in re.findall(r"%\((\w+)\)[sb]", statement)})
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)[sb]", statement)))
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute(f"PREPARE typing AS {prepared}")
        cursor.execute("SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = 'typing'")
        types = cursor.fetchone()[0]
        cursor.execute("DEALLOCATE typing")
        conn.rollback()
    element = {"text": lambda n: f"x{n}", "integer": lambda n: 1, "bigint": lambda n: n, "smallint": lambda n: 1,
               "boolean": lambda n: n % 2 == 0, "bytea": lambda n: b""}  # fmt: skip
    values = {}
    for name, kind in zip(names, types):
        if kind.endswith("[]"):
            make = element[kind[:-2]]
            values[name] = [make(n) for n in range(ARRAY_LENGTH)]
        else:
            values[name] = element[kind](7)
    return values


def quadratic(top: dict, generic: bool = True) -> list[tuple]:
    """Nested loops whose inner side reads an array or a table from its
    start again for each outer row: a Function Scan or Seq Scan in the
    loop's inner subtree (a Materialize over one included; an InitPlan,
    run once, is not); and scans of executions, jobs or job_cursors that
    search an array for each row they read (``= ANY`` as a filter, not as
    the index's condition: a generic plan's array is a parameter, searched
    element by element)."""
    def rescanned(node: dict) -> list[dict]:
        found = [node] if node["Node Type"] in ("Function Scan", "Seq Scan") else []
        for child in node.get("Plans", []):
            if child.get("Parent Relationship") != "InitPlan":
                found += rescanned(child)
        return found

    bad = []
    for node in nodes(top):
        searched = {m.group(1) for m in _SEARCHED.finditer(node.get("Filter", ""))} - set(SEARCHED_LEFT)
        if re.search(r"\(owner (= |IS NULL).*\(worker_id = ", node.get("Index Cond", "")):
            searched -= {"tenant"}  # a worker's own rows of one session: see SEARCHED_LEFT_BY_WORKER
        if searched and node.get("Relation Name") in BIG and generic:
            # each row the scan reads searched for in the array: rows times elements
            bad.append(("filter", [(node["Node Type"], node["Relation Name"], node.get("Index Name"))]))
        if node["Node Type"] != "Nested Loop":
            continue
        for inner in (p for p in node["Plans"] if p.get("Parent Relationship") == "Inner"):
            scans = rescanned(inner)
            if scans:
                bad.append((node.get("Join Type"), [(n["Node Type"], n.get("Relation Name") or n.get("Function Name"))
                                                    for n in scans]))
    return bad


_SEARCHED = re.compile(r"\((\w+) = ANY \(\(?\$\d")
"""A filter searching a parameter's array (a constant one, hashed, is not searched), and its column."""
SEARCHED_LEFT = {
    "handler": "a worker's handlers: as many as its capability names, not a batch",
    "partition": "a server's partitions: at most the partition count",
    "job_id": "by job (the busy probe, the waiters' jobs, a job's disarm): the job-keyed partial indexes are the "
              "path, which a generic plan passes over while the status's set is small; left as it is",
}
"""Columns whose array a generic plan may search for each row read, and why."""
SEARCHED_LEFT_BY_WORKER = (
    "a hello's tenants over its worker's rows in one session (``executions_running (owner, tenant, worker_id)``, "
    "the session and the worker id in the index's condition): at most READ_BOUND rows, read only while the "
    "statistics say a session's range is a few rows (on more, the plan takes the tenants into the condition)"
)
"""The one tenant array a generic plan may search for each row read, and why."""


TENANTS = 1_000
"""Tenants beside ``acme``: a deployment's, so that a plan reading one by
name reads it by key, as it would there."""


def _more_tenants(engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO tenants (name, weight, max_concurrency, max_jobs, max_payload_bytes, requests_per_second, "
            "state, pause_reason, created_at, updated_at, version) "
            f"SELECT 't_' || g, 1, 0, 1000, 65536, 0, 'active', '', 0, 0, 1 FROM generate_series(1, {TENANTS}) AS g"
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE tenants")


def _refused(where: str, statement: str, parameters: dict, engine) -> list[str]:
    """What is wrong with ``statement``'s plans, generic and custom: a
    nested loop rescanning an array or a table (quadratic in the batch),
    and, in the generic plan (planned without the arrays' lengths and kept),
    a read of executions, jobs or job_cursors whole."""
    failed = []
    for mode in ("force_generic_plan", "force_custom_plan"):
        top = plan(engine, statement, parameters, mode=mode)
        generic = mode == "force_generic_plan"
        whole = seq_scans(top, BIG) if generic else []
        if quadratic(top, generic) or whole:
            failed.append(f"{where} ({mode}): {quadratic(top, generic)} {whole}\n{statement}\n{describe(top)}")
    return failed


async def test_no_statement_over_arrays_is_quadratic_or_reads_a_big_table_whole(engine) -> None:
    """Every driver-SQL statement over arrays (``unnest``, ``= ANY``) the
    store defines, planned with arrays of :data:`ARRAY_LENGTH` elements
    over the fixture's 20 000 executions and 2 000 jobs: no nested loop
    rescans an array or a table for each of its rows, none reads
    executions, jobs or job_cursors whole in a generic plan."""
    _more_tenants(engine)
    statements = _array_statements()
    assert len(statements) >= 25, sorted(statements)
    failed = []
    for where, statement in sorted(statements.items()):
        failed += _refused(where, statement, _values(engine, statement), engine)
    assert not failed, "\n\n".join(failed)


def _longer(parameters: dict) -> dict:
    """``parameters`` with each array literal repeated to at least
    :data:`ARRAY_LENGTH` elements (the arrays of one statement by the same
    factor, so pairs stay paired)."""
    arrays = [value for value in parameters.values() if isinstance(value, str) and value.startswith("{")]
    shortest = min((value.count(",") + 1 for value in arrays if value != "{}"), default=1)
    times = -(-ARRAY_LENGTH // shortest)
    return {
        name: "{" + ",".join([value[1:-1]] * times) + "}" if isinstance(value, str) and value.startswith("{")
        and value != "{}" else value
        for name, value in parameters.items()
    }


async def test_no_statement_the_store_builds_over_arrays_is_quadratic(engine, clock) -> None:
    """The statements built with ``one_of`` and ``pairs_in`` (``= ANY``,
    ``unnest`` pairs), captured as the paths send them, planned with their
    arrays :data:`ARRAY_LENGTH` long: as above."""
    from tickwheel_server.store.claim_calendars import CalendarCache
    from tickwheel_server.store.doubt import START, Doubt, undo
    from tickwheel_server.store.engine import capabilities
    from tickwheel_server.store.isolation import lock_keys
    from tickwheel_server.store.tables import attempt_rollups

    _more_tenants(engine)
    with engine.begin() as conn:
        conn.execute(attempt_rollups.insert(), [
            dict(job_id=f"job_{n:05d}", day=1, tenant="acme", runs=1, failures=0, lateness_p50_us=0,
                 lateness_p90_us=0, lateness_p99_us=0, lateness_sketch="", updated_at=0) for n in range(1, 4)
        ])  # fmt: skip
    seen = await _exercise(engine, clock)
    with captured(engine) as more:
        with engine.begin() as conn:
            lock_keys(conn, capabilities(engine), [("acme", "slot"), ("acme", "other")], heads=True)
            undo(conn, [Doubt(START, "s1", [("open_0", 1), ("open_4", 1)], 100)], 0)
            CalendarCache().load(conn, {("acme", "holidays"), ("t_1", "holidays")})
        assert await RetentionStore(engine, clock).prune_rollups(clock.now()) == 3
        jobs = JobStore(engine, clock, partition_count=1)
        assert len(await jobs.delete_many("acme", [("job_01990", 0), ("job_01991", 0), ("nope", 0)])) == 3
        await TenantStore(engine, clock).get("acme")
    statements = {}
    for statement, parameters, _ in seen + more:
        if _ARRAY_STATEMENT.search(statement):
            statements.setdefault(statement, parameters)
    # the pairs: the keys, disarms, a start in doubt, calendars, rollups
    assert sum("AS JSONB) ?" in s for s in statements) >= 5 and len(statements) >= 20, list(statements)
    failed = []
    for statement, parameters in statements.items():
        failed += _refused("captured", statement, _longer(parameters), engine)
    assert not failed, "\n\n".join(failed)


PAGED_JOBS = 100_000
"""Jobs of the large tenant in :func:`test_a_first_page_reads_its_tenant_s_page_whatever_the_statistics`."""


def _paged_store(engine, clock, analysed: bool) -> JobStore:
    """A store over ``engine``'s jobs and cursors, analysed first when ``analysed``."""
    if analysed:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE jobs")
            conn.exec_driver_sql("ANALYZE job_cursors")
    return JobStore(engine, clock, partition_count=1)


@pytest.mark.parametrize("analysed", [False, True], ids=["never-analysed", "analysed"])
async def test_a_first_page_reads_its_tenant_s_page_whatever_the_statistics(migrated_engine, clock, analysed) -> None:
    """ListJobs' and SearchJobs' pages (:func:`.jobpages.read_page`)
    over 100 000 jobs of one tenant, 2 000 of another spread among them
    and one job of a third near the end of the ids: each page, the first
    (no ``after_id``) and a deep one, reads its page of ``jobs_tenant`` in
    index order and each row's cursor by its key (every tenant's page: the
    two primary keys merged), and nothing of another tenant, in a custom
    plan (the page size known) and a generic one; on a table never
    analysed (after a bulk load, before autovacuum's analyse: the planner
    then guesses a few hundred rows for the tenant, and the plain join
    read the whole tenant through a bitmap scan and a sort for the first
    pages) and analysed (the generic plan then prices any tenant at a
    third of the table, and the plain join walked ``jobs_pkey``, reading
    every job before the one-job tenant's)."""
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    tenants = TenantStore(migrated_engine, clock)
    for name in ("big", "mid", "one"):
        await tenants.create(Tenant(name=name))
    with migrated_engine.begin() as conn:
        # big: job_0000001 … job_0100000; mid: job_0000050m, job_0000100m, …; one: job_0099990z.
        for cursor_table in (False, True):
            head = ("INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count) SELECT id, "
                    "tenant, 0, 'active', 1, 0 FROM (" if cursor_table else
                    "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, "
                    "pause_reason, version, created_at, updated_at) SELECT id, tenant, 0, 'j', 'active', '', "
                    "'UTC', 'x', '', 1, 0, 0 FROM (")
            conn.exec_driver_sql(
                head + "SELECT 'job_' || lpad(g::text, 7, '0') AS id, 'big' AS tenant "
                f"FROM generate_series(1, {PAGED_JOBS}) g "
                f"UNION ALL SELECT 'job_' || lpad((g * 50)::text, 7, '0') || 'm', 'mid' "
                f"FROM generate_series(1, {PAGED_JOBS // 50}) g "
                f"UNION ALL SELECT 'job_' || lpad(({PAGED_JOBS} - 10)::text, 7, '0') || 'z', 'one') AS made"
            )
    store, page = _paged_store(migrated_engine, clock, analysed), 100
    deep = f"job_{PAGED_JOBS // 2:07d}"
    with captured(migrated_engine) as seen:
        assert [job.id for job in await store.list("big", limit=page)] == [f"job_{n:07d}" for n in range(1, page + 1)]
        assert [job.id for job in await store.list("big", after_id=deep, limit=page)] == \
            [f"job_{n:07d}" for n in range(PAGED_JOBS // 2 + 1, PAGED_JOBS // 2 + page + 1)]
        assert [job.id for job in await store.list("one", limit=page)] == [f"job_{PAGED_JOBS - 10:07d}z"]
        assert len(await store.list("mid", after_id=deep, limit=page)) == page
        assert len(await store.search(limit=page)) == page
    reads = [sent for sent in seen if _on(("job_cursors",), sent.statement)]
    assert len(reads) == 5, [sent.statement for sent in seen]
    # No statement turns JIT off: the engine's sessions start with it off
    # (priced for a tenth of a large tenant's rows, a page's plan would be
    # compiled: jit_above_cost). SearchJobs without a tenant keeps the merge
    # join of the two keys.
    assert not [sent.statement for sent in seen if "jit" in sent.statement.lower()], [s.statement for s in seen]
    with migrated_engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    expected = (page, page, 1, page, page)  # the rows each page returns
    for (statement, parameters, _), rows in zip(reads, expected):
        for mode in ("force_custom_plan", "force_generic_plan"):
            ran = plan(migrated_engine, statement, parameters, mode=mode, analyze=True)
            shown = (mode, parameters, describe(ran))
            assert not seq_scans(ran, ("jobs", "job_cursors")), shown
            unordered = ("Sort", "Incremental Sort", "Bitmap Heap Scan", "Hash Join")
            assert not any(n["Node Type"] in unordered for n in nodes(ran)), shown
            if any("tenant" in name for name in parameters):
                assert not any(n["Node Type"] == "Merge Join" for n in nodes(ran)), shown
            # Its page and no more: no job of another tenant read and filtered
            # out, no cursor but those of the page's jobs (the one more a
            # LIMIT may read before it stops).
            assert rows_read(ran, "jobs") <= rows + 1, shown
            assert rows_read(ran, "job_cursors") <= rows + 1, shown


FILTERS = (("active", ""), ("paused", ""), ("completed", ""), ("", "n"), ("", "rare"), ("paused", "n"))
"""ListJobs' and SearchJobs' filters (state, name prefix) and both, in
:func:`test_a_filtered_page_reads_its_tenant_s_rows_only_whatever_the_statistics`."""


@pytest.mark.parametrize("analysed", [False, True], ids=["never-analysed", "analysed"])
async def test_a_filtered_page_reads_its_tenant_s_rows_only_whatever_the_statistics(
    migrated_engine, clock, analysed
) -> None:
    """Every filter ListJobs and SearchJobs take (:data:`FILTERS`), on the
    first page of a tenant of 100 000 jobs, of one of 2 000 spread among
    them and of one with a single job: each reads none of another
    tenant's rows, in a custom plan and a generic one, on a table never
    analysed and analysed (the plain join's generic plan walked
    ``jobs_pkey`` filtering the tenant: the one-job tenant's page read
    every job before its own). A page of paused jobs reads the tenant's
    paused jobs only (``jobs_tenant_paused``); any other filter reads at
    most :data:`.jobpages.PAGE_SCAN` of the tenant's jobs, and says where
it stopped when that leaves it short. ``completed`` is the cursor's state only (a
    claim completes a job in its cursor), so ``jobs.state`` stays
    ``active`` for those rows here as it does in a store."""
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    tenants = TenantStore(migrated_engine, clock)
    for name in ("big", "mid", "one"):
        await tenants.create(Tenant(name=name))
    # big: job_0000001 … job_0100000, every 1 000th paused, five near the end
    # completed and three named "rare…"; mid: every 50th id + "m", every
    # 10th of them paused; one: a single paused job near the end.
    made = (
        f"SELECT 'job_' || lpad(g::text, 7, '0') AS id, 'big' AS tenant, "
        f"CASE WHEN mod(g, 1000) = 0 THEN 'paused' WHEN g BETWEEN {PAGED_JOBS - 8} AND {PAGED_JOBS - 4} "
        "THEN 'completed' ELSE 'active' END AS state, "
        f"CASE WHEN g BETWEEN {PAGED_JOBS - 3} AND {PAGED_JOBS - 1} THEN 'rare-' ELSE 'n-' END || g AS name "
        f"FROM generate_series(1, {PAGED_JOBS}) g "
        f"UNION ALL SELECT 'job_' || lpad((g * 50)::text, 7, '0') || 'm', 'mid', "
        "CASE WHEN mod(g, 10) = 0 THEN 'paused' ELSE 'active' END, 'n-m' || g "
        f"FROM generate_series(1, {PAGED_JOBS // 50}) g "
        f"UNION ALL SELECT 'job_' || lpad(({PAGED_JOBS} - 10)::text, 7, '0') || 'z', 'one', 'paused', 'n-one'"
    )
    with migrated_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, pause_reason, "
            "version, created_at, updated_at) SELECT id, tenant, 0, name, CASE WHEN state = 'completed' THEN "
            f"'active' ELSE state END, '', 'UTC', 'x', '', 1, 0, 0 FROM ({made}) AS made"
        )
        conn.exec_driver_sql(
            "INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count) "
            f"SELECT id, tenant, 0, state, 1, 0 FROM ({made}) AS made"
        )
        wanted: dict[str, list[tuple[str, str, str]]] = {}
        for ident, tenant, state, name in conn.exec_driver_sql(f"SELECT * FROM ({made}) AS made ORDER BY id"):
            wanted.setdefault(tenant, []).append((ident, state, name))
    store, page = _paged_store(migrated_engine, clock, analysed), 100
    failed = []
    for tenant in ("one", "mid", "big"):
        own = wanted[tenant]
        for state, prefix in FILTERS:
            # a page filtered by other than paused reads PAGE_SCAN jobs at most,
            # and says where it stopped when it stopped short
            scanning = state != "paused"
            window = own[:PAGE_SCAN] if scanning else own
            expected = [i for i, s, n in window if (not state or s == state) and n.startswith(prefix)][:page]
            with captured(migrated_engine) as seen:
                found = await store.page(tenant=tenant, limit=page, state=state, name_prefix=prefix)
            assert [job.id for job in found.jobs] == expected, (tenant, state, prefix)
            stopped = scanning and len(expected) < page and len(own) >= PAGE_SCAN
            assert found.scanned_to == (own[PAGE_SCAN - 1][0] if stopped else ""), (tenant, state, prefix)
            [(statement, parameters, _)] = [sent for sent in seen if _on(("job_cursors",), sent.statement)]
            # what the page may read: the tenant's paused jobs for a paused
            # page, else its jobs up to PAGE_SCAN; and the one more a LIMIT may read
            bound = (sum(s == "paused" for _, s, _ in own) if state == "paused" else min(len(own), PAGE_SCAN)) + 1
            for probe, values, _ in [sent for sent in seen if _on(("jobs",), sent.statement)
                                     and not _on(("job_cursors",), sent.statement)]:
                # where a short page's scan stopped: PAGE_SCAN of the tenant's index entries
                for mode in ("force_custom_plan", "force_generic_plan"):
                    ran = plan(migrated_engine, probe, values, mode=mode, analyze=True)
                    if seq_scans(ran, ("jobs",)) or rows_read(ran, "jobs") > bound:
                        failed.append(f"{tenant} {state!r} {prefix!r} probe {mode}: {rows_read(ran, 'jobs')}\n"
                                      f"{probe}\n{describe(ran)}")
            for mode in ("force_custom_plan", "force_generic_plan"):
                ran = plan(migrated_engine, statement, parameters, mode=mode, analyze=True)
                read = (rows_read(ran, "jobs"), rows_read(ran, "job_cursors"))
                if seq_scans(ran, ("jobs", "job_cursors")) or max(read) > bound:
                    failed.append(f"{tenant} state={state!r} prefix={prefix!r} {mode}: read {read} > {bound}\n"
                                  f"{statement}\n{describe(ran)}")
    assert not failed, f"{len(failed)} failed\n\n" + "\n\n".join(failed)


SPREAD_TENANTS, SPREAD_JOBS = 100, 300
"""Tenants, and jobs of each, in :func:`test_every_tenant_s_filtered_walk_reads_a_bounded_scan_a_page`:
three :data:`.jobpages.PAGE_SCAN` of jobs."""


@pytest.mark.parametrize("analysed", [False, True], ids=["never-analysed", "analysed"])
async def test_every_tenant_s_filtered_walk_reads_a_bounded_scan_a_page(migrated_engine, clock, analysed) -> None:
    """SearchJobs without a tenant, filtered so that one job of 30 000
    (100 tenants' jobs interleaved by id) matches, the last: each page
    reads at most :data:`.jobpages.PAGE_SCAN` jobs and as many cursors,
    in a custom plan and a generic one, never the table whole; pages
    before it are short (empty, a token to where the scan stopped), and
    the walk carrying on finds the job once and ends. Unbounded, the
    first page read all 30 000 jobs and cursors in one statement."""
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL's plans")
    total = SPREAD_TENANTS * SPREAD_JOBS
    assert total >= 2 * PAGE_SCAN
    tenants = TenantStore(migrated_engine, clock)
    for n in range(SPREAD_TENANTS):
        await tenants.create(Tenant(name=f"t{n:03d}"))
    made = (
        f"SELECT 'job_' || lpad(g::text, 7, '0') AS id, 't' || lpad(mod(g, {SPREAD_TENANTS})::text, 3, '0') AS tenant, "
        f"CASE WHEN g = {total} THEN 'rare-last' ELSE 'n-' || g END AS name, "
        f"CASE WHEN g = {total} THEN 'completed' ELSE 'active' END AS state FROM generate_series(1, {total}) g"
    )
    with migrated_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, tenant, partition, name, state, spec, time_zone, tzdata_version, pause_reason, "
            f"version, created_at, updated_at) SELECT id, tenant, 0, name, 'active', '', 'UTC', 'x', '', 1, 0, 0 "
            f"FROM ({made}) AS made"
        )
        conn.exec_driver_sql(
            "INSERT INTO job_cursors (job_id, tenant, partition, state, version, run_count) "
            f"SELECT id, tenant, 0, state, 1, 0 FROM ({made}) AS made"
        )
    store, last = _paged_store(migrated_engine, clock, analysed), f"job_{total:07d}"
    failed = []
    for state, prefix in (("", "rare"), ("completed", ""), ("completed", "rare")):
        walked, after, short, sent = [], "", 0, []
        while True:
            with captured(migrated_engine) as seen:
                page = await store.page(after_id=after, limit=101, state=state, name_prefix=prefix)
            sent += [(s, after) for s in seen if _on(("jobs",), s.statement)]
            walked += [job.id for job in page.jobs]
            if not page.scanned_to:
                break
            assert not page.jobs or page.jobs[-1].id <= page.scanned_to, (state, prefix)
            assert page.scanned_to > after and len(page.jobs) <= 100, (state, prefix)
            after, short = page.scanned_to, short + 1
        assert walked == [last], (state, prefix, walked)
        assert short == total // PAGE_SCAN, (state, prefix, short)
        assert len(sent) == 2 * (short + 1), [s.statement for s, _ in sent]  # a page and its probe each
        for (statement, parameters, _), after in sent:
            for mode in ("force_custom_plan", "force_generic_plan"):
                ran = plan(migrated_engine, statement, parameters, mode=mode, analyze=True)
                read = (rows_read(ran, "jobs"), rows_read(ran, "job_cursors"))
                if seq_scans(ran, ("jobs", "job_cursors")) or max(read) > PAGE_SCAN + 1:
                    failed.append(f"state={state!r} prefix={prefix!r} after {after!r} {mode}: read {read}\n"
                                  f"{statement}\n{describe(ran)}")
    assert not failed, f"{len(failed)} failed\n\n" + "\n\n".join(failed)


@pytest.mark.parametrize("specs", [False, True])
async def test_the_claim_counts_a_due_job_s_waiting_executions_on_their_index_in_a_generic_plan(engine, specs) -> None:
    """The claim's SELECT counts each due job's executions not started (the
    backlog cap, ``policy/backlog.py``): per returned row a LIMITed range of
    ``executions_not_started_job``, never ``executions`` read whole."""
    statement = DUE_SQL[False, True, specs, True]
    parameters = {"owned": list(range(4)), "epochs": [1] * 4, "horizon": to_us(from_us(HISTORY)), "batch": 1000}
    top = plan(engine, statement, parameters)
    assert not seq_scans(top, ("executions",)), describe(top)
    assert "executions_not_started_job" in {n.get("Index Name") for n in nodes(top)}, describe(top)
