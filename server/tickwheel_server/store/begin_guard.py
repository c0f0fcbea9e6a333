"""The guard of a transaction that begins itself (:mod:`.pipeline`).

A transaction run with ``begins_itself``
(:func:`.transactions.run_in_transaction`) holds its connection in
autocommit until its first :func:`.pipeline.send` puts the BEGIN in front
of its statements. A statement sent before that, or after a COMMIT sent in
a trip, would commit on its own, outside the transaction and its retries.
Such a statement is refused before it is sent, with
:class:`~.errors.StatementBeforeBeginError` (fatal, never retried): by a
``before_cursor_execute`` listener on the engine, added by its first such
transaction (:func:`guard`), for what SQLAlchemy sends, and by
:mod:`.driver` for its own statements. A statement on a connection not in
autocommit (every other transaction's) pays one attribute read.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy.engine import Engine

from .errors import StatementBeforeBeginError

BEGINS_ITSELF = "tickwheel.begins_itself"
"""The key a ``begins_itself`` attempt sets in its pooled connection's
``info`` while it holds the connection (removed before it goes back)."""

_guarded: weakref.WeakSet[Engine] = weakref.WeakSet()
"""The engines :func:`_refuse_before_begin` listens on (those that ran a
``begins_itself`` transaction)."""
_guarded_lock = threading.Lock()


def refuse_before_begin(info: dict, dbapi_connection: Any, statement: str) -> None:
    """Raise :class:`StatementBeforeBeginError` when ``dbapi_connection``, held
    by a ``begins_itself`` attempt (``info``, its pooled record's), is in
    autocommit with no transaction open: ``statement`` would commit on its
    own. Called only for a connection already known to be in autocommit
    (the caller reads that one attribute first), so every other statement
    pays one attribute read."""
    if info.get(BEGINS_ITSELF) and dbapi_connection.info.transaction_status == TransactionStatus.IDLE:
        raise StatementBeforeBeginError(
            "a transaction that begins itself ran a statement before its BEGIN was sent (the first statements "
            "must go through store.pipeline.send); refused, nothing sent: " + statement[:200]
        )


def _refuse_before_begin(conn, cursor, statement, parameters, context, executemany) -> None:
    """``before_cursor_execute``: :func:`refuse_before_begin` for every
    statement SQLAlchemy sends (store.driver checks its own)."""
    if cursor.connection.autocommit:
        refuse_before_begin(conn.info, cursor.connection, statement)


def guard(engine: Engine) -> None:
    """Add the listener to ``engine`` (once)."""
    if engine not in _guarded:
        with _guarded_lock:
            if engine not in _guarded:
                event.listen(engine, "before_cursor_execute", _refuse_before_begin)
                _guarded.add(engine)
