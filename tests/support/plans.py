"""PostgreSQL plans of the statements a store really sends: captured with a
``before_cursor_execute`` listener, prepared with their parameters as
``$n`` and explained under a plan cache mode (psycopg prepares a statement
it sends often, and PostgreSQL may then keep one generic plan for it,
planned without the parameters' values). The statements
``store/pipeline.py`` queues are captured too."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy import event

from tickwheel_server.store import pipeline

INDEX_SCANS = ("Index Scan", "Bitmap Index Scan", "Index Only Scan")


def as_prepared(statement: str, parameters: dict) -> tuple[str, str]:
    """A captured driver statement as ``PREPARE`` text (``$n`` for each
    ``%(name)s``) and the ``EXECUTE`` argument list, every parameter a literal."""
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    prepared = re.sub(r"%\((\w+)\)[sb]", number, statement).replace("%%", "%")

    def literal(value) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, (bytes, bytearray, memoryview)):
            return "'\\x" + bytes(value).hex() + "'"
        if isinstance(value, list):
            value = "{" + ",".join(
                "NULL" if v is None else f'"{v}"' if isinstance(v, str) else str(v) for v in value
            ) + "}"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return str(value)

    return prepared, ", ".join(literal(parameters[name]) for name in names)


class Sent(NamedTuple):
    """A statement as the engine sent it."""

    statement: str
    parameters: dict | Sequence
    """Its parameters (an executemany's first set; positional on SQLite)."""
    sets: int
    """How many parameter sets it was sent with: more than one is an
    executemany, which the driver sends as one statement per set."""


@contextmanager
def captured(engine: sa.Engine) -> Iterator[list[Sent]]:
    """Every statement ``engine`` sends while the block runs: through
    SQLAlchemy, and those queued in a round trip of their own by
    ``store/pipeline.py`` (which SQLAlchemy's events do not see)."""
    seen: list[Sent] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        first = (parameters[0] if parameters else {}) if executemany else parameters
        seen.append(Sent(statement, dict(first) if isinstance(first, Mapping) else first,
                         len(parameters) if executemany else 1))

    send = pipeline.send

    def pipelined(conn, statements, **options):
        if conn.engine is engine:
            seen.extend(Sent(statement, dict(parameters), 1) for statement, parameters in statements)
        return send(conn, statements, **options)

    event.listen(engine, "before_cursor_execute", capture)
    pipeline.send = pipelined
    try:
        yield seen
    finally:
        pipeline.send = send
        event.remove(engine, "before_cursor_execute", capture)


def plan(
    engine: sa.Engine, statement: str, parameters: dict, *, mode: str = "force_generic_plan", analyze: bool = False
) -> dict:
    """The plan (EXPLAIN's JSON, its top node) of ``statement`` prepared and
    executed under ``plan_cache_mode = mode``; nothing it would write is
    written. ``analyze``: run (a read only) and report what each node read."""
    prepared, arguments = as_prepared(statement, parameters)
    with engine.connect() as conn:
        try:
            conn.exec_driver_sql(f"SET plan_cache_mode = {mode}")
            cursor = conn.connection.driver_connection.cursor()
            cursor.execute(f"PREPARE probe AS {prepared}")
            try:
                cursor.execute(f"EXPLAIN ({'ANALYZE, ' if analyze else ''}FORMAT JSON) EXECUTE probe({arguments})")
                return cursor.fetchone()[0][0]["Plan"]
            finally:
                conn.rollback()  # a prepared statement outlives its transaction unless that failed
                cursor.execute("SELECT 1 FROM pg_prepared_statements WHERE name = 'probe'")
                if cursor.fetchone():
                    cursor.execute("DEALLOCATE probe")
        finally:
            conn.rollback()


def nodes(top: dict) -> list[dict]:
    """Every node of a plan, the top one first."""
    return [top] + [node for child in top.get("Plans", []) for node in nodes(child)]


def describe(top: dict) -> list[tuple[str, str | None, str | None]]:
    """(node type, relation, index) of each node: what an assertion shows."""
    return [(n["Node Type"], n.get("Relation Name"), n.get("Index Name")) for n in nodes(top)]


def seq_scans(top: dict, tables: tuple[str, ...]) -> list[str]:
    """The tables of ``tables`` the plan reads whole."""
    return [n["Relation Name"] for n in nodes(top) if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in tables]


def rows_read(top: dict, table: str) -> int:
    """What an analyzed plan's scans of ``table`` read: the rows they
    returned and those their filters removed, over all their loops."""
    return sum(
        (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)
        for n in nodes(top) if n.get("Relation Name") == table
    )
