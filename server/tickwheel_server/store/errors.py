"""Store errors, classified by what the caller can do about them.

Every error the store layer raises on purpose is a :class:`StoreError`. The
split that matters to callers (STYLE.md, habit 8):

- :class:`RetryableStoreError`: the operation did not happen and may succeed
  if tried again later. :func:`~tickwheel_server.store.transactions.run_in_transaction`
  already retried it with backoff before raising one of these, so a caller's
  own loop (a dispatcher tick, say) should back off further, not spin.
  - :class:`TransactionConflictError`: SQLSTATE 40001 (serialization failure,
    CockroachDB's "restart transaction") or 40P01 (deadlock), or SQLite's
    busy/locked, on every attempt.
  - :class:`StoreUnavailableError`: the connection failed or was lost on
    every attempt (server down, restarting, network).
- :class:`AmbiguousCommitError`: the connection broke while COMMIT was in
  flight (or CockroachDB said 40003): the transaction may or may not have
  been applied. Only a caller that knows its transaction is idempotent may
  retry it (``run_in_transaction(..., idempotent=True)`` does).
- :class:`StoreConfigError`: a bad engine URL or option, raised when the
  engine is built, before anything connects.
- :class:`MigrationError`: a schema migration could not be loaded or applied.
- :class:`StatementBeforeBeginError`: a transaction that ``begins_itself``
  ran a statement before its BEGIN was sent (a bug in the store's code,
  refused before the statement reached the server).

Anything else (a constraint violation, a syntax error, an exception from the
caller's own code) is *fatal*: it is raised unchanged and never retried.
"""

from __future__ import annotations

from collections.abc import Sequence


class StoreError(Exception):
    """Base class of every error the store layer raises on purpose."""


class StoreConfigError(StoreError, ValueError):
    """An engine URL or option is invalid; nothing was connected."""


class RetryableStoreError(StoreError):
    """The transaction was not applied; retrying later may succeed.

    ``attempts`` is how many times it was tried; ``sqlstate`` is the last
    error's SQLSTATE when the database gave one. The last underlying error
    is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, attempts: int, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.sqlstate = sqlstate


class TransactionConflictError(RetryableStoreError):
    """Every attempt hit a serialization failure, deadlock or lock timeout."""


class StoreUnavailableError(RetryableStoreError):
    """Every attempt failed to reach the database or lost the connection."""


class AmbiguousCommitError(StoreError):
    """The commit's outcome is unknown: it may or may not have been applied.

    The last underlying error is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class MigrationError(StoreError):
    """A schema migration could not be loaded or applied.

    ``applied`` lists the migrations this run applied (and committed) before
    the failure; the underlying error, if any, is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, applied: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.applied = list(applied)


class StatementBeforeBeginError(StoreError, RuntimeError):
    """A transaction run with ``begins_itself`` tried to run a statement
    while its connection was still in autocommit with no transaction open:
    the statement would have committed on its own, outside the transaction
    and its retries. Refused before it was sent; never retried (fatal)."""
