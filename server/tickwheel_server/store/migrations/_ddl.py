"""Schema changes a migration can run again: what CockroachDB needs, whose
DDL is not transactional (``store/migrate_steps.py``): a migration stopped
between two statements is applied again from its first on the next run.

``CREATE TABLE`` and ``CREATE INDEX`` say ``IF NOT EXISTS`` and ``DROP``
says ``IF EXISTS`` in the migrations themselves (all three engines take
them). Adding or dropping a column has that guard on PostgreSQL (9.6 on)
and CockroachDB, not on SQLite, whose migrations are transactional and so
never half applied: :func:`add_column` and :func:`drop_column` leave it out
there. Where a statement has no such guard (an ``INSERT … SELECT`` from a
table or column a later statement drops), the migration asks the catalog
first: :func:`has_table`, :func:`has_column`.

An index is dropped by its name alone on every engine: CockroachDB finds an
unqualified index name among the tables of the current schema (its "Index
name resolution", cockroach#24778), and the store's index names are unique,
as PostgreSQL requires.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from tickwheel_server.store.engine import Capabilities


def add_column(conn: Any, caps: Capabilities, table: str, column: str) -> None:
    """``ALTER TABLE table ADD COLUMN column`` (``column``: its name and type), unless it exists."""
    guard = "" if caps.is_sqlite else "IF NOT EXISTS "
    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {guard}{column}"))


def drop_column(conn: Any, caps: Capabilities, table: str, column: str) -> None:
    """``ALTER TABLE table DROP COLUMN column``, if it exists."""
    guard = "" if caps.is_sqlite else "IF EXISTS "
    conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {guard}{column}"))


def drop_index(conn: Any, name: str) -> None:
    conn.execute(text(f"DROP INDEX IF EXISTS {name}"))


def has_table(conn: Any, caps: Capabilities, table: str) -> bool:
    if caps.is_sqlite:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :table"
    else:
        query = "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = :table"
    return conn.execute(text(query), dict(table=table)).first() is not None


def has_column(conn: Any, caps: Capabilities, table: str, column: str) -> bool:
    if caps.is_sqlite:
        query = "SELECT 1 FROM pragma_table_info(:table) WHERE name = :column"
    else:
        query = (
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = :table AND column_name = :column"
        )
    return conn.execute(text(query), dict(table=table, column=column)).first() is not None
