"""The migrated stores the fixtures hand out (``migrated_sqlite_url``,
``migrated_postgres_url``, copies of a template migrated once per session)
are what ``migrate()`` leaves on an empty store: the same tables, columns,
indexes, constraints and recorded migrations, and ``migrate()`` on a copy
applies nothing. Were they not, every test on ``migrated_engine`` and the
integration ``server`` fixture would test a schema the product never makes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.migrate import applied_migrations, load_migrations

from tests.support.sqlite import copy_store

POSTGRES_SCHEMA = {
    "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default, ordinal_position "
               "FROM information_schema.columns WHERE table_schema = 'public'",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "constraints": "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                   "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public'",
    "tables": "SELECT c.relname, c.relkind, pg_get_partkeydef(c.oid) FROM pg_class c "
              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'",
}  # fmt: skip
SQLITE_SCHEMA = {"objects": "SELECT type, name, tbl_name, sql FROM sqlite_master"}


def schema(engine: sa.Engine, queries: dict[str, str]) -> dict[str, list[tuple]]:
    with engine.connect() as conn:
        return {name: sorted(tuple(row) for row in conn.execute(sa.text(query))) for name, query in queries.items()}


def migrations(engine: sa.Engine) -> list[tuple[int, str]]:
    return [(m.version, m.name) for m in applied_migrations(engine)]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_migrated_copy_is_what_migrate_makes_of_an_empty_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        copy_url = request.getfixturevalue("migrated_sqlite_url")
        fresh_url, queries = f"sqlite:///{tmp_path / 'fresh.db'}", SQLITE_SCHEMA
    else:
        copy_url = request.getfixturevalue("migrated_postgres_url")
        fresh_url, queries = request.getfixturevalue("postgres_url"), POSTGRES_SCHEMA
    copy, fresh = create_store_engine(copy_url), create_store_engine(fresh_url)
    try:
        assert migrate(fresh)  # an empty store: every migration applies
        shipped = [(m.version, m.name) for m in load_migrations()]
        assert migrations(fresh) == shipped
        assert migrations(copy) == shipped
        assert migrate(copy) == []  # nothing left to apply
        made, copied = schema(fresh, queries), schema(copy, queries)
        assert all(made.values()), made  # the queries see the schema at all
        assert copied == made
    finally:
        copy.dispose()
        fresh.dispose()


def test_a_write_to_a_migrated_copy_reaches_neither_the_template_nor_the_next_copy(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    first = create_store_engine(request.getfixturevalue("migrated_sqlite_url"))
    try:
        with first.begin() as conn:
            conn.execute(sa.text("DELETE FROM schema_migrations"))
        assert migrations(first) == []
    finally:
        first.dispose()
    copy_store(request.getfixturevalue("_migrated_sqlite_template"), tmp_path / "next.db")
    second = create_store_engine(f"sqlite:///{tmp_path / 'next.db'}")
    try:
        assert migrations(second) == [(m.version, m.name) for m in load_migrations()]
    finally:
        second.dispose()
