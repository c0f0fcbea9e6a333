"""What a failed transaction attempt means: :func:`classify_error` sorts
an error into an :class:`ErrorKind` (retry as a conflict, as a lost
connection, as the server's refusal of the moment; ambiguous; fatal) by
its SQLSTATE or its driver's kind, and :func:`unavailable_reason` says what
a store unavailable for a SQLSTATE does. Pure: only the error is read;
:mod:`.transactions` decides what follows.
"""

from __future__ import annotations

import enum
import sqlite3

from sqlalchemy import exc as sa_exc

# ------------------------------------------------------- error classification


class ErrorKind(enum.Enum):
    """What a failed transaction attempt means for retrying it."""

    CONFLICT = "conflict"
    """Serialization failure (40001), deadlock (40P01), SQLite busy/locked:
    nothing was applied; retry."""
    CONNECTION = "connection"
    """The connection could not be made or was lost before COMMIT: nothing
    was applied; retry."""
    REFUSED = "refused"
    """The server answered with an error of the moment: it refuses writes
    (25006, a replica or ``default_transaction_read_only``), a statement
    was cancelled (57014, ``statement_timeout`` or an operator's cancel), a
    lock was not granted in time (55P03, ``lock_timeout``), the session was
    ended while it sat idle in the transaction (25P03,
    ``idle_in_transaction_session_timeout``: a server frozen in the middle
    of it, woken; the session is gone, so its connection is discarded). The transaction
    was rolled back, even when the error answered its COMMIT: nothing was
    applied; retry after a backoff, and past the attempts the store is
    unavailable."""
    AMBIGUOUS = "ambiguous"
    """The commit may or may not have been applied (40003, or the connection
    broke during COMMIT)."""
    FATAL = "fatal"
    """Anything else: retrying would fail the same way."""


CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})
"""Serialization failure (CockroachDB's "restart transaction") and deadlock."""
AMBIGUOUS_SQLSTATES = frozenset({"40003"})
"""statement_completion_unknown: CockroachDB's "result is ambiguous"."""
CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
"""admin/crash shutdown, cannot connect now, too many connections (and all of class 08)."""
READ_ONLY = "25006"
LOCK_NOT_AVAILABLE = "55P03"
IDLE_SESSION_ENDED = "25P03"
REFUSED_SQLSTATES = frozenset({READ_ONLY, "57014", LOCK_NOT_AVAILABLE, IDLE_SESSION_ENDED})
"""read_only_sql_transaction, query_canceled, lock_not_available,
idle_in_transaction_session_timeout."""
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def sqlstate_of(error: BaseException) -> str | None:
    """The SQLSTATE behind ``error`` (a SQLAlchemy DBAPIError or a driver error), if any.

    psycopg 3 exposes it as ``sqlstate``, psycopg2 as ``pgcode``; this is the
    same detection sqlalchemy-cockroachdb's ``run_transaction`` relies on.
    """
    candidates = [error]
    orig = getattr(error, "orig", None)
    if orig is not None:
        candidates.insert(0, orig)
    for candidate in candidates:
        for attribute in ("sqlstate", "pgcode"):
            value = getattr(candidate, attribute, None)
            if isinstance(value, str) and value:
                return value
    return None


def classify_error(error: BaseException) -> ErrorKind:
    """Classify an error raised while running or committing a transaction.

    Pure: looks only at the error. (Whether a CONNECTION error becomes
    AMBIGUOUS depends on when it happened; :func:`run_in_transaction` decides
    that.)
    """
    sqlstate = sqlstate_of(error)
    if sqlstate is not None:
        if sqlstate in CONFLICT_SQLSTATES:
            return ErrorKind.CONFLICT
        if sqlstate in AMBIGUOUS_SQLSTATES:
            return ErrorKind.AMBIGUOUS
        if sqlstate.startswith("08") or sqlstate in CONNECTION_SQLSTATES:
            return ErrorKind.CONNECTION
        if sqlstate in REFUSED_SQLSTATES:
            return ErrorKind.REFUSED
        return ErrorKind.FATAL
    if isinstance(error, (sa_exc.DisconnectionError, sa_exc.TimeoutError)):
        return ErrorKind.CONNECTION
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return ErrorKind.CONNECTION
        orig = error.orig
        if isinstance(orig, sqlite3.Error):
            code = getattr(orig, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
                return ErrorKind.CONFLICT
            return ErrorKind.FATAL
        # psycopg reports "connection refused", "server closed the connection
        # unexpectedly" and the like as OperationalError without a SQLSTATE.
        if isinstance(error, sa_exc.OperationalError):
            return ErrorKind.CONNECTION
    return ErrorKind.FATAL


_WHY = {
    "25006": "refusing writes (read-only)",
    "57014": "cancelling statements (statement timeout)",
    "55P03": "refusing locks (lock timeout)",
    "25P03": "ending idle transactions (idle in transaction timeout)",
    "53300": "refusing connections (too many connections)",
    "57P03": "refusing connections (cannot connect now)",
}


def unavailable_reason(sqlstate: str | None) -> str:
    """What the store does when every attempt failed with ``sqlstate``, for the log and the API's UNAVAILABLE."""
    return _WHY.get(sqlstate or "", "unreachable")
