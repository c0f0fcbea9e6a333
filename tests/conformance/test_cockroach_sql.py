"""The store's SQL stays within what CockroachDB takes, as far as that can be
checked without a CockroachDB server (docs/architecture.md, "Data").

Three checks, each against the features of ``tests/support/crdbsql.py``
(LISTEN/NOTIFY, advisory locks, LOCK TABLE, deferred constraints, heap
system columns, ``pg_`` functions, the JIT setting):

- the checker itself refuses each planted violation and passes what
  CockroachDB accepts;
- every string literal of ``store/`` (its migrations too) that names such a
  feature is in a scope listed below, each a branch PostgreSQL alone runs,
  and every listed scope still names one (a stale entry fails);
- the store's paths (a create, the claim, the hand-out, results, a retry,
  keys and their waiters, the arm and its start, a disarm, a reap, the
  safety net, a cancel, retention, alerts) run on PostgreSQL with the
  engine's dialect named ``cockroachdb``, so every capability check takes
  CockroachDB's branch; every statement the client sent (libpq's own trace:
  SQLAlchemy's, the driver's and the pipeline's alike) is checked. The same
  paths run as PostgreSQL send the PostgreSQL-only statements, and the
  check finds them: it can fail.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel_server.store import create_store_engine
from tickwheel_server.api.calendars import definition_of
from tickwheel_server.policy.jobchanges import PausedSpan
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.calendars import CalendarStore
from tickwheel_server.store.credentials import WorkerCredentialStore
from tickwheel_server.store.deadletters import DeadLetterStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.engine import capabilities
from tickwheel_server.store.executions import Capability, ResultIn
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.manual import ManualStore
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.requests import OPTIMISTIC_FROM
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tenants import Tenant, TenantStore
import tickwheel_server.store as store_package

from tests.support.crdbsql import (
    DDL_AFTER_WRITE,
    TWO_SCHEMA_CHANGES,
    WRITE_AFTER_DDL,
    found_in,
    transaction_violations,
    violations,
)
from tests.support.libpq_trace import client_messages

from .test_calendar_previous import easter, job_of
from .test_dispatch_claim import OWNED, World, once_job
from .test_handout import add_execution
from .test_job_writes import new_job

STORE = Path(store_package.__file__).parent

POSTGRES_ONLY = {
    ("migrations/0007_vacuum.py", "upgrade"): "`if not caps.is_postgres: return` (autovacuum storage parameters)",
    ("migrations/0032_job_cursors.py", "upgrade"): "job_cursors' autovacuum parameters under `if caps.is_postgres:`",
    ("handout_starts.py", "_LOCK_JOBS"): "lock_replacing: `if not caps.is_postgres: return` (READ COMMITTED rounds)",
    ("retention.py", "RetentionStore.attempt_partitions"): "caps.declarative_partitioning (PostgreSQL only)",
    ("retention.py", "RetentionStore.prune_default_partition"): "runs only once attempt_partitions() found a layout",
    ("retention.py", "_partition_ddl_turn"): "create_partition / detach_partition: declarative partitioning only",
    ("transactions.py", "TABLE_HELD_SQL"): "read only by table_held, which answers without it unless the "
                                           "dialect is postgresql (CockroachDB's is cockroachdb)",
    ("pipeline.py", "begin_statement"): "[NOT] DEFERRABLE as a transaction mode, only if psycopg's `deferrable` "
                                        "is set, which nothing in the store sets (the trace below sees every BEGIN)",
}
"""Scopes (module under store/, scope prefix) allowed to name a feature, and why only PostgreSQL runs them."""


@pytest.mark.parametrize("statement, refused", [
    ("LISTEN tickwheel_wake", ["LISTEN/NOTIFY"]),
    ("NOTIFY tickwheel_wake, 'p1'", ["LISTEN/NOTIFY"]),
    ("SELECT pg_notify('w', 'x')", ["LISTEN/NOTIFY", "pg_ function"]),
    ("SELECT pg_advisory_xact_lock(42)", ["advisory lock", "pg_ function"]),
    ("SELECT pg_try_advisory_lock(1, 2)", ["advisory lock", "pg_ function"]),
    ("LOCK TABLE jobs IN SHARE MODE", ["LOCK TABLE"]),
    ("BEGIN; LOCK executions", ["LOCK TABLE"]),
    ("ALTER TABLE a ADD CONSTRAINT f FOREIGN KEY (b) REFERENCES c (d) DEFERRABLE INITIALLY DEFERRED",
     ["deferred constraint"]),
    ("SET CONSTRAINTS ALL DEFERRED", ["deferred constraint"]),
    ("DELETE FROM attempts WHERE ctid IN (SELECT ctid FROM attempts LIMIT 10)", ["heap system column"]),
    ("SELECT xmin, id FROM jobs", ["heap system column"]),
    ("SELECT pg_table_is_visible(c.oid) FROM pg_class c", ["pg_ function"]),
    ("SET LOCAL jit = off", ["jit setting"]),
    ("set jit to on", ["jit setting"]),
    ("SELECT set_config('jit', 'off', true)", ["jit setting"]),
    ("ALTER TABLE executions SET (fillfactor = 60)", ["storage parameter"]),
    ("ALTER INDEX executions_owner SET (deduplicate_items = off)", ["storage parameter"]),
    ("CREATE INDEX IF NOT EXISTS i ON t (a) WITH (deduplicate_items = off) WHERE b IS NULL", ["storage parameter"]),
    ("CREATE TABLE t (a INT) WITH (fillfactor = 70)", ["storage parameter"]),
    ("ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000)",
     ["storage parameter"]),
    ("ALTER TABLE {} SET ({})", ["storage parameter"]),  # an f-string's fixed parts (literals())
    ("ALTER TABLE jobs RESET (fillfactor)", ["storage parameter"]),
    ("VACUUM ANALYZE executions", ["maintenance command"]),
    ("REINDEX INDEX executions_owner", ["maintenance command"]),
    # What CockroachDB takes:
    ("SELECT id FROM executions WHERE (ready_at, id) > (%(at)s, %(id)s) ORDER BY ready_at, id LIMIT 5", []),
    ("SAVEPOINT tickwheel_try", []),
    ("ROLLBACK TO SAVEPOINT tickwheel_try", []),
    ("CREATE INDEX IF NOT EXISTS worker_credentials_live_newest ON worker_credentials (created_at DESC, id) "
     "WHERE revoked_at IS NULL", []),
    ("DROP INDEX IF EXISTS executions_ended", []),
    ("UPDATE t SET (a, b) = (1, 2) WHERE id = 3", []),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT", []),
    ("SELECT name FROM cluster", []),
    ("SELECT id FROM executions WHERE status = 'scheduled' ORDER BY ready_at LIMIT 10 FOR UPDATE SKIP LOCKED", []),
    ("INSERT INTO t (a) VALUES (1) ON CONFLICT ON CONSTRAINT t_pkey DO NOTHING", []),
    ("UPDATE e SET status = 'running' FROM unnest(CAST(%(ids)s AS TEXT[]), CAST(%(d)s AS INTEGER[])) AS v (id, d) "
     "WHERE e.id = ANY (CAST(%(ids)s AS TEXT[])) AND e.id = v.id", []),
    ("SELECT name FROM tenants WHERE name = ANY (CAST($1 AS TEXT[])) ORDER BY name FOR SHARE", []),
    ("SELECT owner, locked_at, xmins_column FROM pg_stats_like_table", []),
    ("SELECT 1 -- a listener (lower case prose), the lock table's row", []),
    ("SET LOCAL statement_timeout = '5s'", []),
])  # fmt: skip
def test_the_checker_refuses_each_feature_and_passes_what_cockroachdb_takes(statement: str, refused: list) -> None:
    assert violations(statement) == refused


@pytest.mark.parametrize("sent, refused", [
    # migrate()'s transactional path: the lock row, then the migration, then its version row.
    (["BEGIN", "UPDATE schema_migrations_lock SET locked_by = $1 WHERE id = 1", "SELECT version FROM m",
      "CREATE TABLE t (id INT)", "INSERT INTO schema_migrations VALUES (1)", "COMMIT"],
     [(DDL_AFTER_WRITE, "CREATE TABLE t (id INT)"), (WRITE_AFTER_DDL, "INSERT INTO schema_migrations VALUES (1)")]),
    (["BEGIN ISOLATION LEVEL SERIALIZABLE", "CREATE INDEX i ON t (a)", "DROP INDEX j", "COMMIT"],
     [(TWO_SCHEMA_CHANGES, "DROP INDEX j")]),
    (["BEGIN", "WITH x AS (INSERT INTO t VALUES (1) RETURNING id) SELECT id FROM x",
      "/* a comment */ -- and another\n  alter table t add column c INT", "COMMIT"],
     [(DDL_AFTER_WRITE, "/* a comment */ -- and another\n  alter table t add column c INT")]),
    (["BEGIN", "upsert INTO t VALUES (1)", "TRUNCATE t", "ROLLBACK"], [(DDL_AFTER_WRITE, "TRUNCATE t")]),
    # A rollback to a savepoint does not end the transaction.
    (["BEGIN", "DELETE FROM t", "ROLLBACK TO SAVEPOINT s", "DROP TABLE u", "COMMIT"],
     [(DDL_AFTER_WRITE, "DROP TABLE u")]),
    # What CockroachDB takes: one schema change alone (reads beside it), or outside any transaction.
    (["BEGIN", "SELECT 1 FROM information_schema.columns", "ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT", "COMMIT",
      "BEGIN", "UPDATE schema_migrations_lock SET locked_at = 1", "COMMIT",
      "CREATE TABLE IF NOT EXISTS a (id INT)", "INSERT INTO a VALUES (1)", "DROP INDEX IF EXISTS i"], []),
    (["BEGIN", "INSERT INTO t SELECT * FROM u", "UPDATE t SET created_at = 1", "COMMIT", "BEGIN",
      "CREATE INDEX IF NOT EXISTS i ON t (a)", "COMMIT"], []),
])  # fmt: skip
def test_the_transaction_rules_refuse_a_schema_change_beside_a_write_or_another(sent: list, refused: list) -> None:
    assert transaction_violations(sent) == refused


def test_a_planted_literal_is_found_with_its_scope(tmp_path: Path) -> None:
    (tmp_path / "planted.py").write_text(
        '"""LISTEN NOTIFY pg_advisory_lock(1) in a docstring is prose."""\n'
        "class Store:\n"
        "    def fn(self, conn):\n"
        '        """So is this: LOCK TABLE jobs."""\n'
        '        conn.exec_driver_sql("LOCK TABLE jobs IN EXCLUSIVE MODE")\n'
        '        conn.exec_driver_sql(f"SELECT ctid FROM {self.table}")\n'
        "_LATER = (\n"
        '    "SELECT 1 "\n'
        '    "FROM x WHERE pg_try_advisory_xact_lock(7)"\n'
        ")\n"
    )
    assert found_in(tmp_path) == [
        ("planted.py", "Store.fn", "LOCK TABLE", 5),
        ("planted.py", "Store.fn", "heap system column", 6),
        ("planted.py", "_LATER", "advisory lock", 8),
        ("planted.py", "_LATER", "pg_ function", 8),
    ]


def test_the_store_names_a_postgresql_only_feature_only_in_a_postgresql_only_branch() -> None:
    hits = found_in(STORE)
    outside = [hit for hit in hits if not any(
        module == hit[0] and (hit[1] == scope or hit[1].startswith(scope + ".")) for module, scope in POSTGRES_ONLY
    )]
    assert not outside, "PostgreSQL-only SQL outside the branches listed in POSTGRES_ONLY: " + repr(outside)
    used = {(module, scope) for module, scope in POSTGRES_ONLY for hit in hits
            if hit[0] == module and (hit[1] == scope or hit[1].startswith(scope + "."))}
    assert used == set(POSTGRES_ONLY), f"stale entries: {set(POSTGRES_ONLY) - used}"


# ------------------------------------------------------------------ the statements sent, in CockroachDB's branches

_PARSED = re.compile(r'^Parse\s+"[^"]*"\s+"(.*)"\s+\d+(?:\s+\w+)*\s*$', re.S)
_QUERY = re.compile(r'^Query\s+"(.*)"\s*$', re.S)
ECHO = Capability(("acme",), ("echo",), True)


PLUMBING = {"base.py", "driver.py", "engine.py", "pipeline.py", "transactions.py"}
"""Store modules that send what their callers ask (the caller is the
sender), or only at connect time (a session's settings, SQLite's pragmas):
their own statements are in the trace of every path."""

EXERCISE_LEFT = {
    "cluster.py": "the cluster row (server start)",
    "doubt.py": "arms, starts and hand-outs whose COMMIT went unanswered",
    "gauges.py": "the gauges' queue-depth reads (metrics)",
    "lateness.py": "the lateness watch's read",
    "manualslots.py": "manual runs' quota units given back",
    "skipped.py": "the skipped alerts' resolution",
    "tenant_walk.py": "which tenants have scheduled work (multi-tenant workers)",
    "tzdata.py": "the tzdata recompute",
    "unsend.py": "hand-outs no worker saw, put back",
    "unheld.py": "a worker's hello disowning rows, and the reaper's release of them",
    "claim_handout.py": "builds the claim's tenant and busy probes, sent by that pipeline as above",
}
"""Store modules that send SQL the traced paths below do not reach, each
with the path it serves: their raw SQL literals are still scanned (the
check above), their SQLAlchemy-built statements are not. A new module
that sends SQL fails the check until a traced path reaches it or it is
listed here, and a listed one that a traced path reaches is stale."""

_SENDS = re.compile(r"\.execute\(|exec_driver_sql\(|\.scalars?\(|\bdriver\.\w+\(|\bsend\(")


def sql_modules() -> set[str]:
    """The store's modules (migrations and the migrator aside: their own
    trace, ``test_migrate_cockroach_path.py``) whose code sends SQL."""
    return {
        path.name for path in STORE.glob("*.py")
        if _SENDS.search(path.read_text()) and not path.name.startswith("migrat")
    } - PLUMBING


def _sender(frame) -> str | None:
    """The store module (not plumbing) nearest the top of ``frame``'s stack."""
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.parent == STORE and path.name not in PLUMBING:
            return path.name
        frame = frame.f_back
    return None


@contextmanager
def sending_modules():
    """The store modules whose code sent a statement while the block runs
    (any thread: psycopg's execute is wrapped for the block)."""
    found: set[str] = set()
    patched = [(psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany"), (psycopg.Connection, "execute")]
    originals = [cls.__dict__[name] for cls, name in patched]

    def wrap(original):
        def wrapped(self, *args, **kwargs):
            module = _sender(sys._getframe(1))
            if module is not None:
                found.add(module)
            return original(self, *args, **kwargs)

        return wrapped

    for (cls, name), original in zip(patched, originals):
        setattr(cls, name, wrap(original))
    try:
        yield found
    finally:
        for (cls, name), original in zip(patched, originals):
            setattr(cls, name, original)


@contextmanager
def client_statements(engine):
    """Every SQL text the client sends on ``engine``'s connections while the
    block runs (its Parse and Query messages, from libpq's trace)."""
    texts: list[str] = []
    with client_messages(engine) as (messages, _used):
        yield texts
    for message in messages:
        match = _PARSED.match(message) or _QUERY.match(message)
        if match:
            texts.append(match.group(1))


def _job(name: str, *, overlap: int = 0, key: str = "", attempts: int = 1) -> job_pb2.Job:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      overlap_policy=overlap)
    if key:
        job.concurrency_keys.add(key=key, limit=1)
    job.retry_policy.max_attempts = attempts
    job.retry_policy.initial_backoff.FromSeconds(1)
    job.retry_policy.max_backoff.FromSeconds(1)
    return job


async def _exercise(engine, clock) -> None:
    """The store's paths once each (see the module docstring)."""
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    await PartitionStore(engine, clock).raise_epochs(OWNED, "claimer")
    world = World(engine, clock)
    created = await world.create(once_job(clock.now() + timedelta(seconds=1)), clock.now() + timedelta(seconds=1))
    claimer = DispatchStore(engine, clock)
    claimed = await claimer.claim_due(OWNED, clock.now() + timedelta(seconds=2))
    assert [e.id.split(":")[0] for e in claimed.executions] == [created.id]
    # The timer wheel's rebuild from what was claimed (dispatch.py's own read).
    rebuilt = await claimer.scheduled_in(sorted(OWNED), clock.now() + timedelta(seconds=2))
    assert [e.id for e in rebuilt] == [e.id for e in claimed.executions]
    queue = ExecutionQueue(engine, clock)
    # Keys and their waiters, a retry, a replace job's turn.
    keyed = _job("k", key="slot")
    for ident in ("k1", "k2"):
        add_execution(engine, clock, ident, job_id="job_keyed", spec=keyed)
    replace = _job("r", overlap=job_pb2.OVERLAP_POLICY_REPLACE)
    for ident in ("r1", "r2"):
        add_execution(engine, clock, ident, job_id="job_replace", spec=replace, nominal_in=float(ident[-1]))
    add_execution(engine, clock, "retry", spec=_job("t", attempts=3))
    clock.advance(3)
    handed = await queue.handout.hand_out_ready("s1", clock.now(), ECHO, 20)
    assert {"k1", "retry"} <= {h.id for h in handed} and "k2" not in {h.id for h in handed}
    outcome = {"retry": worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE}
    acks = await queue.outcomes.record_results([
        ResultIn(h.id, h.delivery, h.attempt, outcome.get(h.id, worker_pb2.RESULT_OUTCOME_SUCCEEDED), "", "w1",
                 ("acme",)) for h in handed
    ])  # fmt: skip
    assert all(a.accepted for a in acks)
    # The arm, its start and a disarm.
    for ident, due_in in (("a1", 2.0), ("a2", 2.0)):
        add_execution(engine, clock, ident, due_in=due_in, spec=_one_off(clock, due_in))
    armed = await queue.arming.arm("s1", clock.now(), clock.now() + timedelta(seconds=5), ECHO, 10)
    assert sorted(a.handed.id for a in armed) == ["a1", "a2"]
    clock.advance(2)
    first = armed[0]
    started = await queue.arming.start("s1", [(first.handed.id, first.handed.delivery, first.beside)], clock.now())
    assert started.started == [first.handed.id]
    assert await queue.arming.disarm("s1", [(armed[1].handed.id, armed[1].handed.delivery)]) == [armed[1].handed.id]
    # A reap of the session, the safety net, a cancel, history, retention, alerts.
    again = await queue.handout.hand_out_ready("s2", clock.now() + timedelta(seconds=5), ECHO, 20)
    assert again
    assert (await queue.requeues.reap_owner("s2", "session expired")).requeued
    await queue.requeues.wake_stalled()
    assert sorted(await queue.arming.armed_owners()) == []
    history = HistoryStore(engine, clock)
    await history.cancel_execution("acme", "a2")
    assert (await history.list_executions("acme", created.id)).executions
    await RetentionStore(engine, clock).prune_executions(clock.now() + timedelta(days=400), limit=100)
    await AlertStore(engine, clock).owed()
    await _exercise_changes(engine, clock, world)


async def _exercise_changes(engine, clock, world) -> None:
    """The job and calendar writes once each: BatchCreateJobs' request ids
    in their savepoint (64 ids), then again (a unique violation rolls back
    to it, the savepoint never released), a job's update, pause, resume and
    delete, a calendar's create and change with runs to re-decide, a
    credential issued and a page of them (0038's index)."""
    jobs = world.jobs
    batch = [(new_job(clock, name=f"b{i}"), f"batch-{i}") for i in range(OPTIMISTIC_FROM)]
    assert all(isinstance(outcome, tuple) for outcome in await jobs.create_many("acme", batch))
    repeated = await jobs.create_many("acme", [(new_job(clock, name=f"c{i}"), f"batch-{i}") for i in range(64)])
    assert all(isinstance(outcome, tuple) and not outcome[1] for outcome in repeated)
    record = repeated[0][0]
    updated, _ = await jobs.update(
        "acme", record.id, record.version, name="renamed", spec=record.spec, time_zone=record.time_zone,
        tzdata_version=record.tzdata_version, payload_size=0, reschedule=None, changed_by="api_key:k1",
        update_mask=("name",),
    )  # fmt: skip
    paused, _ = await jobs.pause("acme", record.id, "test")
    await jobs.resume("acme", record.id, expected_version=paused.version, span=PausedSpan(None, None),
                      tzdata_version="2026a", now=clock.now())
    await jobs.delete("acme", record.id)
    calendars = CalendarStore(engine, clock)
    await calendars.create("acme", "easter", definition_of(easter()), "cal-1")
    await world.create(job_of("0 9 * * MON"), clock.now() + timedelta(minutes=1))
    stored = await calendars.get("acme", "easter")
    await calendars.update_with_runs("acme", "easter", stored.version, definition_of(easter("2027-04-05")))
    # A run of a job naming a calendar, handed out (what a calendar's change may hold back).
    add_execution(engine, clock, "cal-run", job_id="job_cal", spec=job_of("0 9 * * MON"))
    handed = await ExecutionQueue(engine, clock).handout.hand_out_ready("s3", clock.now(), ECHO, 20)
    assert "cal-run" in [h.id for h in handed]
    credentials = WorkerCredentialStore(engine, clock)
    await credentials.issue(["acme"], ["echo"], http=False, description="sql check")
    assert (await credentials.list("acme")).credentials
    # ListJobs' page, a trigger, dead letters and the operators' queues.
    listed = await jobs.list("acme", limit=10)
    assert listed
    await ManualStore(engine, clock).trigger("acme", listed[0].id, "manual-1")
    await DeadLetterStore(engine, clock, AlertStore(engine, clock)).list("acme")
    await OperationsStore(engine, clock).queues(clock.now(), 10)


def _one_off(clock, due_in: float) -> job_pb2.Job:
    job = _job("once")
    job.schedule.once_at.FromDatetime(clock.now() + timedelta(seconds=due_in))
    return job


@pytest.mark.postgres
@pytest.mark.parametrize("engine_name", ["cockroachdb", "postgresql"])
async def test_every_statement_sent_in_cockroachdbs_branches_is_one_cockroachdb_takes(
    migrated_postgres_url: str, clock, engine_name: str
) -> None:
    engine = create_store_engine(migrated_postgres_url)
    engine.dialect.name = engine_name  # every capability check takes this engine's branch
    try:
        assert capabilities(engine).dialect == engine_name
        with client_statements(engine) as sent, sending_modules() as senders:
            await _exercise(engine, clock)
    finally:
        engine.dispose()
    missing = sql_modules() - senders - set(EXERCISE_LEFT)
    assert not missing, f"store modules sending SQL no traced path reaches (exercise or list them): {missing}"
    assert not set(EXERCISE_LEFT) & senders, f"stale: {set(EXERCISE_LEFT) & senders}"
    assert len(set(sent)) >= 60, sent
    refused = sorted({(name, text) for text in sent for name in violations(text)})
    if engine_name == "cockroachdb":
        assert not refused, "\n\n".join(f"{name}: {text}" for name, text in refused)
        assert not transaction_violations(sent)  # no store path changes the schema beside its writes
        # CockroachDB's branches ran: the arm's start and the key locks as one array statement each.
        assert any(text.startswith("UPDATE executions AS e SET status = 'running'") for text in sent)
        assert any("FROM concurrency_keys" in text and "AS JSONB) ?" in text for text in sent)
    else:  # the check can fail: PostgreSQL's rounds send the replace job's advisory lock
        assert {name for name, _ in refused} == {"advisory lock", "pg_ function"}, refused
