"""Statements that do not depend on each other's results, sent in one round
trip: psycopg's pipeline mode on the DBAPI connection a SQLAlchemy
``Connection`` holds (PostgreSQL and CockroachDB; SQLite never comes here).

The dispatcher's claim is a chain of round trips whose wait after each
reply costs more than PostgreSQL's work for its small statements
(docs/architecture.md, "A claim's batch"). :func:`send` queues its
statements, then one Sync: the server runs them in order, as sent one by
one, and the replies come back together. With ``commit`` the COMMIT rides
in the same round trip, after the last statement.

The idle limit: psycopg ends a pipeline with a Flush after its Sync, and
PostgreSQL arms ``idle_in_transaction_session_timeout`` only as it answers
a Sync or a simple query with nothing read after it: a Flush disarms it
until the next one. A transaction left open after a pipelined trip would
sit idle with no limit, its locks held by a frozen server for good
(:mod:`.partitions`, "A frozen holder"). So a trip without the COMMIT
whose parameters all go as text is one simple-protocol query instead
(the statements joined by ``;``, their parameters written in by
psycopg's client-side binding, planned each time: small statements); a
trip with binary parameters must carry the COMMIT (a claim raises its
alerts before its writes for that): one without is refused, nothing sent.

BEGIN: psycopg begins a transaction with a round trip of its own, even in
pipeline mode (it waits for the BEGIN's reply to know the transaction's
state). A transaction run with ``begins_itself``
(:func:`.transactions.run_in_transaction`) hands its connection over in
autocommit, and the first :func:`send` then puts the BEGIN (at the
connection's isolation level) before its statements. Every statement of
such a transaction must come after that first :func:`send`: in autocommit
one before it would commit on its own, so one is refused before it is sent
(:mod:`.begin_guard`). Statements after it, through
SQLAlchemy or this module, run in the open transaction. The BEGIN and the
COMMIT sent here are never prepared (psycopg prepares a text it runs
often): they cost nothing to parse, and no pooler or other engine has to
take a transaction's control as a prepared statement.

Errors: in pipeline mode an error reaches the client at the Sync, and the
server skips the statements after the failed one up to it (a COMMIT
among them too): nothing of the transaction is applied. The error is
handed to SQLAlchemy's own handling, as :mod:`.driver` does, so it
surfaces as from ``exec_driver_sql`` (40001 and 40P01 retried, a lost
connection invalidated and retried) — except that a lost connection in a
round trip that carried the COMMIT may have committed:
:class:`~.errors.AmbiguousCommitError`, as for the runner's own COMMIT.
Unless the server had already ended the session before that round trip
(:func:`.engine.refuse_ended_session`, as before any transaction's
COMMIT: it sent something unasked while the transaction sat idle, such as
the end of a session past its ``idle_in_transaction_session_timeout``):
then nothing is sent, the connection is invalidated, and the error is a
plain, retried connection error (a claim frozen mid-way, woken after its
session was ended: :mod:`.partitions`, "A frozen holder").
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy.engine import Connection

from .engine import refuse_ended_session
from .errors import AmbiguousCommitError
from .transactions import ErrorKind, classify_error

Statement = tuple[str, dict[str, Any]]
"""Driver SQL (psycopg placeholders) and its parameters."""

_PLACEHOLDER = re.compile(r"%\(\w+\)([sbt])")


def begin_statement(dbapi_connection: Any) -> str:
    """The BEGIN psycopg would send for ``dbapi_connection``'s settings."""
    parts = ["BEGIN"]
    level = dbapi_connection.isolation_level
    if level is not None:
        parts.append("ISOLATION LEVEL " + psycopg.IsolationLevel(level).name.replace("_", " "))
    if dbapi_connection.read_only is not None:
        parts.append("READ ONLY" if dbapi_connection.read_only else "READ WRITE")
    if dbapi_connection.deferrable is not None:
        parts.append("DEFERRABLE" if dbapi_connection.deferrable else "NOT DEFERRABLE")
    return " ".join(parts)


def send(
    conn: Connection, statements: list[Statement], *, commit: bool = False
) -> list[list[tuple] | int]:
    """Run ``statements`` in order in one round trip (and COMMIT after them
    with ``commit``); per statement, its rows (one that returns rows) or
    how many rows it changed. In a transaction run with ``begins_itself``
    whose BEGIN is not yet sent, the BEGIN goes first in the same trip.

    A trip that leaves its transaction open and whose parameters all go
    as text is sent as one simple-protocol query (:func:`_one_query`):
    psycopg's pipeline ends each trip with a Flush after the Sync, and
    PostgreSQL arms ``idle_in_transaction_session_timeout`` only when it
    answers a Sync or a query with nothing read after it, so a server
    frozen after a pipelined trip would hold the transaction's locks with
    no idle limit (:mod:`.partitions`, "A frozen holder"). So a trip
    with a binary parameter (one that cannot go as text) and no COMMIT is
    refused before anything is sent: :class:`ValueError`."""
    if commit:
        refuse_ended_session(conn)  # the session ended while idle in this transaction: nothing of it was applied
    dbapi = conn.connection.dbapi_connection
    if not commit and statements:
        if not all(_as_text(statement, parameters) for statement, parameters in statements):
            raise ValueError("a pipelined round trip that leaves its transaction open arms no idle limit: "
                             "send binary parameters with the COMMIT")
        return _one_query(conn, dbapi, statements)
    cursors: list[Any] = []
    statement, parameters = statements[0] if statements else ("COMMIT", {})
    try:
        try:
            with dbapi.pipeline():
                if dbapi.autocommit and dbapi.info.transaction_status == TransactionStatus.IDLE:
                    dbapi.execute(begin_statement(dbapi), prepare=False)
                for statement, parameters in statements:
                    cursor = dbapi.cursor()
                    cursors.append(cursor)
                    cursor.execute(statement, parameters)
                if commit:  # as a statement: psycopg's commit() would wait for its reply in a trip of its own
                    dbapi.execute("COMMIT", prepare=False)
            return [cursor.fetchall() if cursor.description is not None else cursor.rowcount for cursor in cursors]
        except psycopg.Error as error:
            conn._handle_dbapi_exception(error, statement, parameters, cursors[-1] if cursors else None, None)
            raise  # pragma: no cover (the handler raises)
    except Exception as error:
        if commit and classify_error(error) is ErrorKind.CONNECTION:
            raise AmbiguousCommitError(
                "the connection failed in a round trip that carried the COMMIT; the transaction may or may not "
                "have been applied"
            ) from error
        raise
    finally:
        for cursor in cursors:
            cursor.close()


def _as_text(statement: str, parameters: dict[str, Any]) -> bool:
    """Whether a statement's parameters may be written into its text: no
    binary placeholder (``%(name)b``), every value a string, an integer or None."""
    return "b" not in _PLACEHOLDER.findall(statement) and all(
        value is None or isinstance(value, (str, int)) for value in parameters.values()
    )


def _one_query(conn: Connection, dbapi: Any, statements: list[Statement]) -> list[list[tuple] | int]:
    """:func:`send` without a COMMIT, as one simple-protocol query: the
    statements' texts with their parameters written in as literals
    (psycopg's client-side binding), joined by ``;``. Never prepared: each
    is planned with its values (a few small statements a trip)."""
    cursor = psycopg.ClientCursor(dbapi)
    texts = [cursor.mogrify(statement, parameters) for statement, parameters in statements]
    begins = dbapi.autocommit and dbapi.info.transaction_status == TransactionStatus.IDLE
    text = "; ".join(([begin_statement(dbapi)] if begins else []) + texts)
    try:
        try:
            cursor.execute(text, prepare=False)
            results: list[list[tuple] | int] = []
            while True:
                results.append(cursor.fetchall() if cursor.description is not None else cursor.rowcount)
                if not cursor.nextset():
                    break
            return results[1:] if begins else results
        except psycopg.Error as error:
            conn._handle_dbapi_exception(error, text, {}, cursor, None)
            raise  # pragma: no cover (the handler raises)
    finally:
        cursor.close()
