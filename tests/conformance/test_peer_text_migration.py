"""Migration 0036 on SQLite and PostgreSQL (and CockroachDB's path): peer
text that earlier releases stored raw (ESC, CR/LF, bidi overrides, C1) is
escaped in place with the write path's escapes, in bounded batches by
primary key; run again it changes nothing; text already escaped, or that
the API accepts (accents, ZWJ, an ideographic space), is left as it is;
and a raw row the walk never reached (a server of the earlier release
wrote it after) reads escaped."""

from __future__ import annotations

import json
import re
from importlib import import_module

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tests.conformance.conftest import STORE_BACKENDS
from tests.support.crdbsql import violations
from tickwheel.shared.clock import FakeClock
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.engine import capabilities
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.requeue import RequeueStore
from tickwheel_server.store.tables import alerts, api_keys, attempts, executions, jobs, tenants, worker_credentials
from tickwheel_server.store.tenants import TenantStore

MIGRATION = import_module("tickwheel_server.store.migrations.0036_escape_peer_text")

HOSTILE = "boom\x1b]0;owned\x07\x1b[2J\r\nforged line \u202egnp.exe\x85\x9b\x7f"
ESCAPED = "boom\\x1b]0;owned\\x07\\x1b[2J\\r\\nforged line \\u202egnp.exe\\x85\\x9b\\x7f"
ALREADY = "C:\\new\\x1b already escaped \\u202e \\\\ twice"  # printable: backslashes the peer wrote, or escapes
ACCEPTED = "Café \u3000 👩\u200d💻 fin"  # free text the API accepts: kept, as the API would have
ACCEPTED_ERROR = "Café fin"


def _tenant(name: str, reason: str) -> dict:
    return dict(name=name, weight=1, max_concurrency=0, max_jobs=100, max_payload_bytes=65536,
                requests_per_second=100, state="paused", pause_reason=reason, created_at=0, updated_at=0,
                version=1, max_pending_manual_runs=100)  # fmt: skip


def _job(n: int, reason: str) -> dict:
    return dict(id=f"job_{n:03d}", tenant="acme", partition=0, name="j", state="paused", spec=b"", time_zone="UTC",
                tzdata_version="x", pause_reason=reason, paused_at=0, version=1, created_at=0, updated_at=0,
                quota_slot=0, calendar="")  # fmt: skip


def _execution(n: int, error: str, dead: str = "", cancel: str | None = None) -> dict:
    return dict(id=f"exe_{n:03d}", job_id="job_000", tenant="acme", partition=0, origin="schedule",
                nominal_at=n, due_at=n, ready_at=n, attempt=1, delivery=1, status="dead", missed_count=0,
                reap_count=0, payload=b"", error=error, dead_reason=dead, created_at=n, finished_at=n,
                allow_overlap=False, cancel_reason=cancel)  # fmt: skip


def _attempt(n: int, error: str) -> dict:
    return dict(execution_id=f"exe_{n:03d}", attempt=1, delivery=1, status="failed", started_at=86_400_000_000 * n,
                finished_at=None, lateness_us=0, worker_id="w1", error=error, waited_us=0)  # fmt: skip


def _alert(n: int, summary: str, details: dict) -> dict:
    return dict(id=f"alr_{n:03d}", dedup_key=f"k{n}", kind="dead_letter", severity="warning", tenant="acme",
                job_id="job_000", execution_id=f"exe_{n:03d}", server_id="", summary=summary,
                details=json.dumps(details, sort_keys=True, separators=(",", ":")), raised_at=0, last_seen_at=0,
                count=1, changed_at=0)  # fmt: skip


def seed(engine, rows: int = 25) -> None:
    """``rows`` executions (and attempts, alerts) of which every fifth holds
    raw text, the others text already escaped, the API's free text, or none."""
    def text_of(n: int, accepted: str) -> str:
        return (HOSTILE, ALREADY, accepted, "", "plain")[n % 5]

    with engine.begin() as conn:
        conn.execute(tenants.insert(), [_tenant("acme", HOSTILE), _tenant("beta", ACCEPTED), _tenant("gamma", "")])
        conn.execute(jobs.insert(), [_job(n, text_of(n, ACCEPTED)) for n in range(7)])
        conn.execute(executions.insert(), [
            _execution(n, text_of(n, ACCEPTED_ERROR), dead=text_of(n + 1, ACCEPTED),
                       cancel=None if n % 2 else text_of(n + 2, ACCEPTED))
            for n in range(rows)
        ])  # fmt: skip
        conn.execute(attempts.insert(), [_attempt(n, text_of(n, ACCEPTED_ERROR)) for n in range(rows)])
        conn.execute(alerts.insert(), [
            _alert(n, f"execution exe_{n:03d} is dead: {text_of(n, ACCEPTED)}",
                   {"reason": text_of(n + 1, ACCEPTED), "error": text_of(n, ACCEPTED_ERROR)})
            for n in range(rows)
        ])  # fmt: skip
        conn.execute(api_keys.insert(), [dict(id="key_1", tenant="acme", secret_hash=b"x", description=HOSTILE,
                                              created_at=0)])  # fmt: skip
        conn.execute(worker_credentials.insert(), [dict(id="wcr_1", secret_hash=b"x", tenants='["acme"]',
                                                        handlers="[]", http=False, description=ALREADY,
                                                        created_at=0)])  # fmt: skip


def expected(text: str | None) -> str | None:
    return None if text is None else text.replace(HOSTILE, ESCAPED)


def stored(engine) -> dict[str, list[tuple]]:
    """Every peer-text column, by table, in primary key order."""
    found = {}
    with engine.connect() as conn:
        for table in MIGRATION.COLUMNS:
            names = ", ".join([*table.key, *table.columns])
            found[table.name] = [
                tuple(row) for row in conn.execute(sa.text(f"SELECT {names} FROM {table.name} ORDER BY {names}"))
            ]
    return found


def statements_of(engine) -> tuple[list[str], callable]:
    sent: list[str] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", capture)
    return sent, lambda: event.remove(engine, "before_cursor_execute", capture)


def walk(engine) -> list[str]:
    """The whole backfill again, as a second migrating process would run it: its cursors."""
    caps = capabilities(engine)
    cursors, after = [], ""
    while after is not None:
        cursors.append(after)
        with engine.begin() as conn:
            after = MIGRATION.backfill(conn, caps, after)
    return cursors


@pytest.fixture(params=[*STORE_BACKENDS, pytest.param("cockroachdb", marks=pytest.mark.postgres)])
def old_engine(request, tmp_path):
    """A store at migration 0035 (``cockroachdb``: PostgreSQL under CockroachDB's name, so its path)."""
    backend = request.param
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    if backend == "cockroachdb":
        engine.dialect.name = "cockroachdb"
    migrate(engine, target=35)
    yield engine
    engine.dispose()


def test_the_migration_escapes_every_column_of_peer_text_in_place(old_engine, monkeypatch) -> None:
    seed(old_engine)
    before = stored(old_engine)
    monkeypatch.setattr(MIGRATION, "BATCH", 10)
    migrate(old_engine)
    after = stored(old_engine)
    for table in MIGRATION.COLUMNS:
        width = len(table.key)
        assert [row[:width] for row in after[table.name]] == [row[:width] for row in before[table.name]]
        for was, now in zip(before[table.name], after[table.name]):
            for name, old, new in zip(table.columns, was[width:], now[width:]):
                if name == "details":
                    assert json.loads(new) == {k: expected(v) for k, v in json.loads(old).items()}, (table, was)
                else:
                    assert new == expected(old), (table.name, name, was)
    assert after["tenants"][0] == ("acme", ESCAPED)
    assert after["tenants"][1] == ("beta", ACCEPTED), "free text the API accepts is kept"
    assert after["executions"][2][1] == ACCEPTED_ERROR and after["executions"][1][1] == ALREADY


def test_run_again_the_migration_changes_nothing_and_writes_nothing(old_engine, monkeypatch) -> None:
    seed(old_engine)
    monkeypatch.setattr(MIGRATION, "BATCH", 10)
    migrate(old_engine)
    once = stored(old_engine)
    sent, stop = statements_of(old_engine)
    try:
        walk(old_engine)
    finally:
        stop()
    assert stored(old_engine) == once
    assert not [s for s in sent if s.lstrip().upper().startswith("UPDATE")], "nothing left to escape: no write"


def test_a_large_table_is_escaped_in_bounded_batches_by_primary_key(old_engine, monkeypatch) -> None:
    seed(old_engine, rows=95)
    monkeypatch.setattr(MIGRATION, "BATCH", 10)
    sent, stop = statements_of(old_engine)
    try:
        cursors = walk(old_engine)
    finally:
        stop()
    # 95 executions and 95 attempts: ten batches each, the last of five rows.
    executions_walk = [c for c in cursors if c and json.loads(c)[0] == 0] + [""]
    assert len(executions_walk) == 10 and json.loads(cursors[1]) == [0, ["exe_009"]]
    assert sum(1 for c in cursors if c and json.loads(c)[0] == 1) == 10
    bounds = [s for s in sent if re.search(r"FROM executions WHERE .* LIMIT 1 OFFSET", s)]
    assert len(bounds) == 10, "one LIMITed read of a batch's end a batch"
    updates = [s for s in sent if s.lstrip().upper().startswith("UPDATE")]
    # One UPDATE a changed column a batch, each row by its primary key (and only if unchanged since read).
    assert updates and all(re.search(r"WHERE (id|name|execution_id) = (\?|%\(k_)", s) for s in updates), updates
    assert len([s for s in updates if s.startswith("UPDATE executions SET error")]) == 10
    if old_engine.dialect.name != "sqlite":
        assert not [(v, s) for s in sent for v in violations(s)], "SQL CockroachDB refuses"
    escaped = stored(old_engine)
    assert all(row[1] != HOSTILE for row in escaped["executions"])
    assert sum(1 for row in escaped["attempts"] if row[3] == ESCAPED) == 19


async def test_a_raw_row_the_migration_did_not_reach_reads_escaped(migrated_engine) -> None:
    """A server of the earlier release wrote these after the walk passed (a rolling upgrade)."""
    seed(migrated_engine, rows=5)
    clock = FakeClock(autojump=True)
    history = HistoryStore(migrated_engine, clock)
    execution = await history.get_execution("acme", "exe_000")
    assert execution.error == ESCAPED and execution.attempts[0].error == ESCAPED
    assert (await history.get_execution("acme", "exe_004")).dead_reason == ESCAPED
    assert (await history.get_execution("acme", "exe_002")).error == ACCEPTED_ERROR
    [alert] = [a for a in (await AlertStore(migrated_engine, clock).list(limit=10)).alerts if a.execution_id == "exe_000"]
    assert alert.summary == "execution exe_000 is dead: " + ESCAPED and alert.details["error"] == ESCAPED
    tenant_store = TenantStore(migrated_engine, clock)
    assert (await tenant_store.get("acme")).pause_reason == ESCAPED
    assert (await tenant_store.get("beta")).pause_reason == ACCEPTED



async def test_a_raw_cancel_reason_the_migration_did_not_reach_reaches_the_worker_escaped(
    migrated_engine,
) -> None:
    """A running row whose cancel request an earlier release stored raw:
    the cancel sent to its worker (``cancel_requests``) carries the reason
    escaped, and when the run ends canceled in a requeue (here its
    session's reap) the reason it ends with is stored escaped."""
    clock = FakeClock(autojump=True)
    with migrated_engine.begin() as conn:
        conn.execute(tenants.insert(), [_tenant("acme", "")])
        conn.execute(jobs.insert(), [_job(0, "")])
        conn.execute(executions.insert(), [{
            **_execution(1, "", cancel=HOSTILE), "status": "running", "finished_at": None, "owner": "s1",
            "worker_id": "w1", "handed_out_at": 1, "cancel_requested_at": 1}])
    requeues = RequeueStore(migrated_engine, clock)
    [request] = await requeues.cancel_requests("s1")
    assert (request.execution_id, request.reason) == ("exe_001", ESCAPED)
    assert (await requeues.reap_owner("s1", "session expired")).canceled == ["exe_001"]
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(executions.c.status, executions.c.dead_reason)).one() == ("canceled", ESCAPED)

@pytest.mark.postgres
def test_a_row_rewritten_between_the_batch_s_read_and_its_update_keeps_the_new_text(
    postgres_url, monkeypatch
) -> None:
    """A result recorded meanwhile (a run retried, a new error stored
    escaped by the new release's writer) is not overwritten with the
    escape of what the batch read: the UPDATE writes only where the column
    still holds it. At READ COMMITTED (an operator's setting), where no
    serialization failure would retry the batch."""
    engine = create_store_engine(postgres_url, isolation="READ COMMITTED")
    try:
        migrate(engine, target=35)
        seed(engine, rows=5)
        executions_table, *others = MIGRATION.COLUMNS
        written: list[str] = []

        def escape_while_a_writer_commits(text: str) -> str:
            if text == HOSTILE and not written:
                with engine.begin() as writer:  # another connection, committed first
                    writer.execute(executions.update().where(executions.c.id == "exe_000").values(error="retried"))
                written.append("exe_000")
            return MIGRATION.stored_error(text)

        columns = dict(executions_table.columns, error=escape_while_a_writer_commits)
        monkeypatch.setattr(MIGRATION, "COLUMNS", (executions_table._replace(columns=columns), *others))
        migrate(engine)
        with engine.connect() as conn:
            errors = dict(conn.execute(sa.select(executions.c.id, executions.c.error)).all())
        assert written and errors["exe_000"] == "retried", "the writer's text, not the batch's escape"
        assert errors["exe_001"] == ALREADY and errors["exe_003"] == ""
    finally:
        engine.dispose()
