"""What every SQL store shares: an engine, a clock, and transactions with retries."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection, CursorResult, Engine

from ..clock import Clock
from .engine import capabilities, run_in_transaction_async

T = TypeVar("T")

_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")


def driver_sql(statement: str) -> str:
    """A statement written with ``:name`` parameters, as psycopg driver SQL
    for ``Connection.exec_driver_sql`` (PostgreSQL and CockroachDB): every
    parameter bound in psycopg's binary format (``%(name)b``). The hot
    paths' parameters are arrays of thousands of ids; the text format quotes
    each element through a regular expression (5 ms per 2 000 strings), the
    binary one does not (0.8 ms), and one array parameter keeps one
    statement text (one plan) whatever the batch, where an expanding ``IN``
    renders a bind per element. Each statement casts its parameters, so
    their types are never guessed."""
    return _PARAMETER.sub(r"%(\1)b", statement)


def tuples(result: CursorResult) -> list[tuple]:
    """Every row of a driver-SQL result as the driver's plain tuples: for the
    thousands of rows a batch reads, SQLAlchemy's ``Row`` objects cost about
    3 µs each."""
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


class SqlStore:
    """Base of the per-aggregate stores.

    Every public method runs as one transaction through
    :func:`run_in_transaction_async`, so it is retried on SQLSTATE 40001 and
    must therefore compute only from what it reads and from arguments decided
    before the first try (``now`` is read once per call, before the
    transaction).

    Transactions run at the engine's isolation level (SERIALIZABLE by
    default), except the queue's hot path on PostgreSQL proper, which asks
    for ``row_locked=True``: READ COMMITTED, for statements whose correctness
    rests on row locks (``FOR UPDATE [SKIP LOCKED]``, conditional updates)
    rather than on the serializable snapshot. PostgreSQL's serializable
    checks track reads by page once a transaction reads more than a few rows
    of a page, and every non-HOT update writes every index, so two batched
    queue transactions over disjoint rows conflict anyway and one is
    retried; at READ COMMITTED they do not. CockroachDB and SQLite keep
    their serializable transactions (CockroachDB's conflicts are per key).
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock
        self.caps = capabilities(engine)
        self.row_locked_engine: Engine | None = (
            engine.execution_options(isolation_level="READ COMMITTED") if self.caps.is_postgres else None
        )
        """The engine that ``row_locked`` transactions use; None where they
        keep the engine's own level."""

    async def _tx(self, fn: Callable[[Connection], T], *, idempotent: bool = False, row_locked: bool = False) -> T:
        engine = self.row_locked_engine if row_locked and self.row_locked_engine is not None else self.engine
        return await run_in_transaction_async(engine, fn, clock=self.clock, idempotent=idempotent)
