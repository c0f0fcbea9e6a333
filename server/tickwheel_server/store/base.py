"""What every SQL store shares: an engine, a clock, and transactions with retries."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.types import NullType

from tickwheel.shared.clock import Clock

from .engine import Capabilities, capabilities
from .skiptally import tallied
from .transactions import RetryEvent, isolation_level, run_in_transaction_async

T = TypeVar("T")

_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")


def driver_sql(statement: str) -> str:
    """A statement written with ``:name`` parameters, as psycopg driver SQL
    for :func:`execute_arrays` (PostgreSQL and CockroachDB), each parameter
    a ``%(name)s``. One array parameter keeps one statement text (one plan)
    whatever the batch, where an expanding ``IN`` renders a bind per
    element. Each statement casts its parameters (``CAST(:ids AS
    TEXT[])``): an array literal goes as a string of unknown type, which
    the cast types when the statement is parsed. (Sent as ``text``, the
    cast would be a conversion the executor may repeat for every row it
    compares: seen as seconds per batch.)"""
    return _PARAMETER.sub(r"%(\1)s", statement)


def execute_arrays(conn: Connection, statement: str, parameters: dict) -> CursorResult:
    """Run a :func:`driver_sql` statement; list parameters go as array
    literals (:func:`array_literal`). psycopg's own list dumpers handle each
    element in Python (in text a regular expression decides the quoting); a
    hand-out round or a batch of results sends tens of thousands of
    elements."""
    return conn.exec_driver_sql(
        statement, {name: array_literal(value) if isinstance(value, list) else value for name, value in parameters.items()}
    )


def _escaped(text: str) -> bool:
    """Whether ``text`` holds a character an array element's quoting escapes
    (``"`` or ``\\``): two substring scans, where a regular expression's
    character class steps through a batch's every character in the regex
    engine, far slower (loadtest/RESULTS.md, "the server's Python per
    execution")."""
    return '"' in text or "\\" in text


def array_literal(values: list) -> str:
    """The PostgreSQL literal of a one-dimensional array of strings,
    integers and None (NULL): every string element quoted, so only ``"``
    and ``\\`` need escaping. Lists of strings or of integers, with or
    without NULLs, are joined without a Python call per element where the
    common case allows."""
    if not values:
        return "{}"
    nulls = values.count(None)
    if nulls == len(values):
        return "{" + ",".join(["NULL"] * nulls) + "}"
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if kinds == {str}:
        if nulls == 0:
            if not _escaped("".join(values)):
                return '{"' + '","'.join(values) + '"}'
        elif not _escaped("".join(value for value in values if value is not None)):
            return "{" + ",".join("NULL" if value is None else f'"{value}"' for value in values) + "}"
    elif kinds == {int}:
        if nulls == 0:
            return "{" + ",".join(map(str, values)) + "}"
        return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"
    return "{" + ",".join(map(_element, values)) + "}"


_ARRAY_TYPES = {"TEXT": sa.Text, "INTEGER": sa.Integer, "BIGINT": sa.BigInteger}


def array_parameter(values: Sequence, kind: str = "TEXT"):
    """``CAST(:p AS kind[])`` bound to :func:`array_literal` of ``values``
    (PostgreSQL and CockroachDB): one parameter and one statement text
    whatever the number of values. The parameter has no SQLAlchemy type, so
    no bind cast is rendered (``%(p)s::VARCHAR``) and the literal goes as a
    string of unknown type, which the cast types once (see :func:`driver_sql`)."""
    literal = sa.bindparam(None, array_literal(list(values)), type_=NullType())
    return sa.cast(literal, ARRAY(_ARRAY_TYPES[kind]))


def one_of(caps: Capabilities, column, values: Sequence, kind: str = "TEXT"):
    """``column IN (values)`` as one statement text whatever their number:
    ``column = ANY (CAST(:p AS kind[]))`` on PostgreSQL and CockroachDB,
    where an expanding ``IN`` renders a text per list length (a prepared
    plan each, and a plan-cache entry each on CockroachDB); SQLite keeps
    the expanding ``IN`` (its callers bind at most its parameter limit)."""
    if caps.is_sqlite:
        return column.in_(list(values))
    return column == sa.any_(array_parameter(values, kind))


def pairs_in(caps: Capabilities, columns: tuple, pairs: Sequence[tuple], kinds: tuple[str, ...]):
    """``(a, b) IN (pairs)`` as one statement text whatever their number:
    on PostgreSQL and CockroachDB ``a = ANY (:as) AND CAST(:pairs AS
    JSONB) ? (length(a) || ':' || a || b)`` (``b`` as text), ``:pairs`` an
    object whose keys are the pairs written so (the length makes the key
    say where ``a`` ends). The ``ANY`` gives the planner the first column's
    index path; the pairing is then one lookup among the object's keys
    (sorted: a binary search, nothing copied) for each row read, whatever
    plan the statement gets. Paired by a join or ``IN`` over ``unnest``
    instead, a generic plan (which takes every array for ten elements)
    became a nested loop rescanning the arrays for each row read: quadratic
    in the batch. SQLite keeps the expanding tuple ``IN``. Two columns; no
    element is NULL."""
    if caps.is_sqlite:
        return sa.tuple_(*columns).in_(list(pairs))
    if len(columns) != 2 or any(kind not in _ARRAY_TYPES for kind in kinds):
        raise ValueError("pairs_in pairs two columns of the array types")
    first, second = (column if kind == "TEXT" else sa.cast(column, sa.Text) for column, kind in zip(columns, kinds))
    keys = dict.fromkeys(f"{len(str(a))}:{a}{b}" for a, b in pairs)
    literal = sa.bindparam(None, json.dumps(keys, ensure_ascii=False), type_=NullType())
    key = sa.cast(sa.func.length(first), sa.Text).concat(sa.literal_column("':'")).concat(first).concat(second)
    return sa.and_(
        columns[0] == sa.any_(array_parameter([a for a, _ in pairs], kinds[0])),
        sa.cast(literal, JSONB).op("?")(key.self_group()),
    )


def _element(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"no array literal for {type(value).__name__}")


def tuples(result: CursorResult) -> list[tuple]:
    """Every row of a driver-SQL result as the driver's plain tuples: for the
    thousands of rows a batch reads, SQLAlchemy's ``Row`` objects cost more
    than the rows' values."""
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
        self.row_locked_level = isolation_level(engine, "READ COMMITTED") if self.caps.is_postgres else None
        """The level ``row_locked`` transactions run at, on the engine's own
        pool (:func:`.transactions.run_in_transaction`'s ``isolation``);
        None where they keep the engine's level."""
        self.retries: Counter[str] = Counter()
        """Failed attempts this store's transactions retried, by SQLSTATE
        (``""`` for SQLite busy and lost connections): how a test tells a
        deadlock (``40P01``) or a serialization failure (``40001``) that
        the retries hid from none at all."""
        self.on_skipped: Callable[[Mapping[str, int]], None] | None = None
        """Called on the event loop with the occurrences each committed
        transaction recorded as skipped, by reason (:mod:`.skiptally`)."""

    async def _tx(
        self, fn: Callable[[Connection], T], *, idempotent: bool = False, row_locked: bool = False,
        begins_itself: bool = False, handled: frozenset[str] = frozenset(),
    ) -> T:
        skipped: Counter[str] = Counter()
        result = await run_in_transaction_async(
            self.engine, tallied(fn, skipped), clock=self.clock, idempotent=idempotent, on_retry=self._count_retry,
            isolation=self.row_locked_level if row_locked else None, begins_itself=begins_itself, handled=handled,
        )  # fmt: skip
        if skipped and self.on_skipped is not None:
            self.on_skipped(skipped)
        return result

    def _count_retry(self, event: RetryEvent) -> None:
        self.retries[event.sqlstate or ""] += 1


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size``: how a long id list
    is bound in several statements, each within the engine's parameter limit."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def newest_first(query, created, ident, after: tuple[int, str] | None):
    """``query`` ordered newest first by ``created`` (then by ``ident``),
    from the row that follows ``after`` = (created instant in microseconds,
    id) of the last row of the previous page (None: from the first): a
    keyset for the caller to LIMIT. A stable order: every row is on exactly
    one page however many share an instant. ``created <= after``, implied by
    the keyset, is stated apart: an index on ``created`` (leading, or after
    an equality) then starts its walk at the previous page's last instant,
    where the keyset's OR alone is only a filter, read from the newest row."""
    if after is not None:
        query = query.where(
            created <= after[0], sa.or_(created < after[0], sa.and_(created == after[0], ident > after[1]))
        )
    return query.order_by(created.desc(), ident)
