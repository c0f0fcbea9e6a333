"""Fixed driver SQL on the connection's own psycopg cursor (PostgreSQL and CockroachDB).

The create's statements (:mod:`.jobcreate`, :mod:`.requests`, :mod:`.quota`)
are fixed texts with psycopg parameters (the claim's go in round trips of
several, :mod:`.pipeline`); SQLAlchemy's ``exec_driver_sql``
adds an execution context, events and a result wrapper around each, about as
much CPU as psycopg's own execute (loadtest/RESULTS.md, "CreateJob on uvloop,
and where the thread hop went"). Here they run on a cursor of the DBAPI
connection the SQLAlchemy ``Connection`` holds, in its transaction: one
cursor per pooled connection, kept in its record's ``info`` for its life
(a cursor is psycopg's adapters and state, made anew per statement
otherwise); it holds the last statement's result until the next, and one
that raised is closed and replaced.

An error is handed to SQLAlchemy's own handling
(``Connection._handle_dbapi_exception``), so it surfaces exactly as from
``exec_driver_sql``: wrapped in SQLAlchemy's DBAPIError of the same kind
(``IntegrityError`` for a unique violation, ``OperationalError`` for a lost
connection), the connection invalidated when the dialect calls it a
disconnect, and so classified by :func:`.transactions.classify_error` as
before (40001 retried, a lost connection retried or ambiguous). What is
lost: SQLAlchemy's statement events (``before_cursor_execute``) and its
``echo`` do not see these statements; PostgreSQL's own statistics
(``pg_stat_statements``, what the benchmarks read) do. SQLite never comes
here: its statements stay SQLAlchemy's.
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy.engine import Connection

from .begin_guard import refuse_before_begin

_CURSOR = "tickwheel.driver.cursor"
"""The key of a pooled connection's cursor in its record's ``info`` (which
SQLAlchemy empties when the connection is closed or invalidated)."""


def _run(conn: Connection, statement: str, parameters: dict[str, Any]) -> Any:
    pooled = conn.connection
    if pooled.dbapi_connection.autocommit:  # in a transaction that begins itself, only after its BEGIN
        refuse_before_begin(pooled.info, pooled.dbapi_connection, statement)
    cursor = pooled.info.get(_CURSOR)
    if cursor is None:
        cursor = pooled.info[_CURSOR] = pooled.dbapi_connection.cursor()
    try:
        cursor.execute(statement, parameters)
    except psycopg.Error as error:
        _drop(conn, cursor)
        conn._handle_dbapi_exception(error, statement, parameters, cursor, None)  # raises
    return cursor


def _drop(conn: Connection, cursor: Any) -> None:
    """Forget ``cursor`` after an error: the next statement gets a new one."""
    conn.connection.info.pop(_CURSOR, None)
    cursor.close()


def rows(conn: Connection, statement: str, parameters: dict[str, Any]) -> list[tuple]:
    """Run ``statement`` with ``parameters``; every row it returned, as the
    driver's tuples."""
    cursor = _run(conn, statement, parameters)
    try:
        return cursor.fetchall()
    except psycopg.Error as error:
        _drop(conn, cursor)
        conn._handle_dbapi_exception(error, statement, parameters, cursor, None)  # raises


def rowcount(conn: Connection, statement: str, parameters: dict[str, Any]) -> int:
    """Run ``statement`` with ``parameters``; how many rows it changed."""
    return _run(conn, statement, parameters).rowcount


_SAVEPOINT = "SAVEPOINT tickwheel_try"
_ROLLBACK_TO_SAVEPOINT = "ROLLBACK TO SAVEPOINT tickwheel_try"


def savepoint(conn: Connection) -> None:
    """Mark where :func:`rollback_to_savepoint` goes back to, in the
    transaction's own session: one round trip, and none to release it
    (SQLAlchemy's ``begin_nested`` sends ``RELEASE SAVEPOINT`` when it
    succeeded; the transaction's COMMIT keeps what followed it anyway, and
    on PostgreSQL and CockroachDB an unreleased savepoint holds nothing
    but its name). A later one of the same name hides this one."""
    _run(conn, _SAVEPOINT, {})


def rollback_to_savepoint(conn: Connection) -> None:
    """Undo what followed the last :func:`savepoint` (its row locks let go
    too), after an error in it or by choice; the transaction goes on."""
    _run(conn, _ROLLBACK_TO_SAVEPOINT, {})
