"""Migration 0007: per-table autovacuum settings of ``jobs`` and
``executions`` on PostgreSQL; recorded and nothing else on SQLite."""

from __future__ import annotations

from importlib import import_module

import sqlalchemy as sa

from tickwheel_server.store import capabilities
from tickwheel_server.store.migrate import applied_migrations

SETTINGS = import_module("tickwheel_server.store.migrations.0007_vacuum").SETTINGS


def test_autovacuum_settings_are_on_the_two_rewritten_tables(migrated_engine) -> None:
    assert 7 in {m.version for m in applied_migrations(migrated_engine)}
    if not capabilities(migrated_engine).is_postgres:
        return  # nothing to set: SQLite has no autovacuum (CockroachDB skips it too)
    with migrated_engine.connect() as conn:
        stored = dict(conn.execute(sa.text(
            "SELECT relname, reloptions FROM pg_class WHERE relname IN ('jobs', 'executions') AND relkind = 'r'"
        )).all())
    for table, settings in SETTINGS.items():
        assert dict(option.split("=", 1) for option in stored[table]) == settings, table
