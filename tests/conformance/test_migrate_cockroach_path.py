"""Migrating CockroachDB: every statement a transaction of its own, under a
lease (``store/migrate_steps.py``), run on PostgreSQL with the engine's
dialect named ``cockroachdb`` so ``migrate`` takes CockroachDB's path (no
CockroachDB server runs in the tests).

- every migration from empty to head, each schema change alone in its
  transaction (``tests/support/crdbsql.py``'s transaction rules, on what
  libpq's trace shows the client sent), every schema change guarded so it
  can run again, and the schema the same as PostgreSQL's path makes (but
  for PostgreSQL's own day partitions of ``attempts``);
- the transactional path, traced the same way, is what the rules refuse
  (the check can fail);
- a run killed before any statement of any migration (the lease not given
  back) is completed by the next run, which takes the dead holder's lease
  over;
- a migrator waiting for the other's lease (three racing:
  ``test_store_engine.py``); a holder whose lease
  was taken over stops before its next statement and records nothing; a
  missing lock row is an error, not a wait forever.
"""

from __future__ import annotations

import importlib
import re
import threading
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy import text
from sqlalchemy.engine import Engine

from tickwheel.shared.clock import FakeClock
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.errors import MigrationError
from tickwheel_server.store.migrate import Migration, applied_migrations, current_version, load_migrations
from tickwheel_server.store.migrate_steps import Lease
from tickwheel_server.store.transactions import run_in_transaction

from tests.support.crdbsql import DDL_AFTER_WRITE, transaction_violations, violations

from .test_cockroach_sql import client_statements
from .test_store_engine import overlap_two_migrators

pytestmark = pytest.mark.postgres
migrate_module = importlib.import_module("tickwheel_server.store.migrate")  # the package exports migrate(), the function

START = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
LEASE = timedelta(minutes=5)


@pytest.fixture
def engines():
    made: list[Engine] = []

    def make(url: str, dialect: str = "cockroachdb") -> Engine:
        engine = create_store_engine(url)
        engine.dialect.name = dialect  # every capability check takes this engine's branch
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


# Tables and indexes only PostgreSQL's path makes (migration 0013: attempts by day).
_POSTGRES_ONLY = re.compile(r"^(attempts(_p\d{8}|_default|_by_day)?|attempt_partition_walks)$")


def schema(engine: Engine) -> dict[str, list]:
    """Columns, indexes and constraints of the current schema, as PostgreSQL's catalog shows them."""
    queries = {
        "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default "
                   "FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY 1, 2",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes "
                   "WHERE schemaname = current_schema() ORDER BY 1, 2",
        "constraints": "SELECT rel.relname, con.conname, pg_get_constraintdef(con.oid) FROM pg_constraint con "
                       "JOIN pg_class rel ON rel.oid = con.conrelid "
                       "WHERE rel.relnamespace = current_schema()::regnamespace ORDER BY 1, 2",
    }  # fmt: skip
    with engine.connect() as conn:
        return {
            name: [tuple(row) for row in conn.execute(text(query)) if not _POSTGRES_ONLY.match(row[0])]
            for name, query in queries.items()
        }


def lock_row(engine: Engine) -> tuple:
    return tuple(run_in_transaction(engine, lambda c: c.execute(
        text("SELECT locked_by, locked_at FROM schema_migrations_lock WHERE id = 1")).one()))  # fmt: skip


def test_every_migration_runs_with_each_schema_change_alone_in_its_transaction(
    postgres_url: str, migrated_postgres_url: str, engines
) -> None:
    engine = engines(postgres_url)
    with client_statements(engine) as sent:
        applied = migrate(engine, clock=FakeClock(START), holder="only")
    assert [m.version for m in applied] == [m.version for m in load_migrations()]
    assert not transaction_violations(sent), transaction_violations(sent)
    assert not {(name, s) for s in sent for name in violations(s)}
    # Every schema change can run again: guarded, or (0028's) found in the catalog first.
    ddl = [s for s in sent if re.match(r"\s*(CREATE|ALTER|DROP)\b", s)]
    assert len(ddl) > 100
    unguarded = [s for s in ddl if not re.search(r"\bIF (NOT )?EXISTS\b|DROP CONSTRAINT", s)]
    assert not unguarded, unguarded
    assert not any("@" in s for s in ddl)  # index names resolved unqualified (migrations/_ddl.py)
    assert any(s.startswith("BEGIN") for s in sent) and any(s.startswith("COMMIT") for s in sent)
    assert schema(engine) == schema(engines(migrated_postgres_url, "postgresql"))
    assert migrate(engine, holder="again") == []
    assert lock_row(engine) == (None, None)  # the lease given back


def test_the_transactional_path_is_what_the_rules_refuse(postgres_url: str, engines) -> None:
    """PostgreSQL's path updates the lock row and then runs the DDL in one
    transaction: the check finds it, so it can fail."""
    engine = engines(postgres_url, "postgresql")
    with client_statements(engine) as sent:
        migrate(engine, clock=FakeClock(START), target=2)
    rules = {rule for rule, _ in transaction_violations(sent)}
    assert DDL_AFTER_WRITE in rules, sent


class Killed(Exception):
    """The migrating process dies here."""


def test_a_run_killed_before_any_statement_is_completed_by_the_next(
    postgres_url: str, migrated_postgres_url: str, engines, monkeypatch
) -> None:
    """Each migration is killed before its first statement, then before its
    second, … (the lease renewal before each statement, backfill batch and
    the version row), by runs that die holding the lease; each next run,
    another process, takes the dead lease over once it is stale and starts
    the migration again from its first statement."""
    engine = engines(postgres_url)
    kill_at: dict[int, int] = {}
    current = {"version": 0, "renewals": 0}
    apply_stepwise, renew = migrate_module._apply_stepwise, Lease.renew

    def tracked(engine_, migration, caps, lease, now):
        current.update(version=migration.version, renewals=0)
        return apply_stepwise(engine_, migration, caps, lease, now)

    def dying_renew(self, conn=None):
        current["renewals"] += 1
        at = kill_at.setdefault(current["version"], 1)
        if current["renewals"] == at:
            kill_at[current["version"]] = at + 1
            raise Killed(f"{current['version']} at {at}")
        renew(self, conn)

    monkeypatch.setattr(migrate_module, "_apply_stepwise", tracked)
    monkeypatch.setattr(Lease, "renew", dying_renew)
    monkeypatch.setattr(Lease, "release", lambda self: None)  # a killed process gives nothing back
    runs = 0
    while True:
        runs += 1
        clock = FakeClock(START + runs * (LEASE + timedelta(seconds=1)))  # the last run's lease is stale
        try:
            migrate(engine, clock=clock, holder=f"run-{runs}", lease=LEASE)
            break
        except MigrationError as exc:
            assert isinstance(exc.__cause__, Killed), exc
        assert runs < 2000
    versions = [m.version for m in load_migrations()]
    assert sorted(kill_at) == versions and all(at > 1 for at in kill_at.values())
    assert runs == sum(at - 1 for at in kill_at.values()) + 1
    assert [m.version for m in applied_migrations(engine)] == versions
    assert schema(engine) == schema(engines(migrated_postgres_url, "postgresql"))


def _table(name: str):
    return lambda conn, caps: conn.execute(text(f"CREATE TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY)"))


def test_a_migrator_waits_for_the_lease_and_then_skips_what_was_applied(
    postgres_url: str, engines, monkeypatch
) -> None:
    waiting = threading.Event()
    wait = Lease.wait

    def observed_wait(self):
        waiting.set()
        wait(self)

    monkeypatch.setattr(Lease, "poll", 0.01)
    monkeypatch.setattr(Lease, "wait", observed_wait)
    # The first holds its lease until the second has found it held.
    overlap_two_migrators(engines(postgres_url), engines(postgres_url), lambda: waiting.wait(timeout=30))
    assert waiting.is_set()


def test_a_dead_holders_lease_is_taken_over_once_stale(postgres_url: str, engines) -> None:
    engine = engines(postgres_url)
    migrate(engine, migrations=[Migration(1, "a", _table("a"))], holder="setup")
    clock = FakeClock(START)
    stale = clock.now() - LEASE - timedelta(microseconds=1)
    run_in_transaction(engine, lambda c: c.execute(
        text("UPDATE schema_migrations_lock SET locked_by = 'dead-host:1', locked_at = :at WHERE id = 1"),
        dict(at=int(stale.timestamp() * 1_000_000))))  # fmt: skip
    applied = migrate(engine, migrations=[Migration(1, "a", _table("a")), Migration(2, "b", _table("b"))],
                      clock=clock, holder="next", lease=LEASE)
    assert [m.version for m in applied] == [2]
    assert lock_row(engine) == (None, None)


def test_a_holder_whose_lease_was_taken_over_stops_before_its_next_statement(
    postgres_url: str, engines
) -> None:
    engine, usurper = engines(postgres_url), engines(postgres_url)

    def two_tables(conn, caps) -> None:
        conn.execute(text("CREATE TABLE IF NOT EXISTS one (id INTEGER PRIMARY KEY)"))
        run_in_transaction(usurper, lambda c: c.execute(
            text("UPDATE schema_migrations_lock SET locked_by = 'usurper', locked_at = 0 WHERE id = 1")))  # fmt: skip
        conn.execute(text("CREATE TABLE IF NOT EXISTS two (id INTEGER PRIMARY KEY)"))

    with pytest.raises(MigrationError, match="lost the migration lease"):
        migrate(engine, migrations=[Migration(1, "two_tables", two_tables)], holder="victim")
    assert current_version(engine) == 0  # nothing recorded by a holder without the lease
    inspector = sa.inspect(engine)
    assert inspector.has_table("one") and not inspector.has_table("two")
    assert lock_row(engine) == ("usurper", 0)  # the victim gave back nothing it did not hold


def test_a_missing_lock_row_is_an_error_not_a_wait(postgres_url: str, engines) -> None:
    engine = engines(postgres_url)
    migrate(engine, migrations=[Migration(1, "a", _table("a"))], holder="setup")
    run_in_transaction(engine, lambda c: c.execute(text("DELETE FROM schema_migrations_lock")))
    # _ensure_bookkeeping puts the row back at the next run, so take it away between the two.
    with pytest.raises(MigrationError, match="schema_migrations_lock row is missing"):
        Lease(engine, "h", FakeClock(START)).take()


def test_a_lease_must_last(postgres_url: str, engines) -> None:
    with pytest.raises(ValueError, match="longer than zero"):
        Lease(engines(postgres_url), "h", FakeClock(START), timedelta(0))
