"""Attempt rows written in a batch: one statement whatever the batch on
PostgreSQL and CockroachDB, for every writer that ends deliveries (a batch
of results, a requeue, a reap). A driver-level executemany sends one INSERT
per row; SQLite, with no arrays and no network, keeps it."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from .base import driver_sql, execute_arrays
from .engine import Capabilities
from .tables import attempts

_ATTEMPT_COLUMNS = (
    ("execution_id", "TEXT"), ("attempt", "INTEGER"), ("delivery", "INTEGER"), ("status", "TEXT"),
    ("started_at", "BIGINT"), ("finished_at", "BIGINT"), ("lateness_us", "BIGINT"), ("worker_id", "TEXT"),
    ("error", "TEXT"), ("waited_us", "BIGINT"), ("worker_started_at", "BIGINT"), ("output", "BYTEA"),
)
_INSERT_ATTEMPTS = driver_sql(
    f"INSERT INTO attempts ({', '.join(name for name, _ in _ATTEMPT_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'CAST(:{name} AS {kind}[])' for name, kind in _ATTEMPT_COLUMNS)})"
)


def insert_attempts(conn: Connection, caps: Capabilities, history: list[dict]) -> None:
    """Insert ``history``, attempt rows as :func:`.executions.attempt_row`
    makes them (each names every column above), in the caller's
    transaction: one statement over parallel arrays on PostgreSQL and
    CockroachDB, an executemany on SQLite. Nothing for an empty list."""
    if not history:
        return
    if not caps.is_sqlite:
        arrays = {name: [row[name] for row in history] for name, _ in _ATTEMPT_COLUMNS}
        # BYTEA[] from text: each element in the hex input format, NULL for none.
        arrays["output"] = [None if out is None else "\\x" + out.hex() for out in arrays["output"]]
        execute_arrays(conn, _INSERT_ATTEMPTS, arrays)
        return
    conn.execute(attempts.insert(), history)
