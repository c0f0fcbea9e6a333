"""The store: jobs, executions, history and partitions in SQL.

The engine layer (:mod:`.engine`) builds engines from URLs and reports what
each engine can do (:class:`Capabilities`); :mod:`.transactions` runs
transactions with retries on SQLSTATE 40001; :mod:`.migrate` applies the versioned schema migrations in
:mod:`.migrations`.
"""

from .engine import Capabilities, capabilities, create_store_engine, parse_store_url
from .errors import (
    AmbiguousCommitError,
    MigrationError,
    RetryableStoreError,
    StatementBeforeBeginError,
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
    TransactionConflictError,
)
from .migrate import (
    AppliedMigration,
    Migration,
    applied_migrations,
    current_version,
    load_migrations,
    migrate,
    pending_migrations,
)
from .transactions import (
    Backoff,
    ErrorKind,
    RetryEvent,
    classify_error,
    attempts_running,
    run_in_transaction,
    run_in_transaction_async,
    settle,
    sqlstate_of,
)

__all__ = [
    "AmbiguousCommitError",
    "AppliedMigration",
    "Backoff",
    "Capabilities",
    "ErrorKind",
    "Migration",
    "MigrationError",
    "RetryEvent",
    "RetryableStoreError",
    "StatementBeforeBeginError",
    "StoreConfigError",
    "StoreError",
    "StoreUnavailableError",
    "TransactionConflictError",
    "applied_migrations",
    "attempts_running",
    "capabilities",
    "classify_error",
    "create_store_engine",
    "current_version",
    "load_migrations",
    "migrate",
    "parse_store_url",
    "pending_migrations",
    "run_in_transaction",
    "run_in_transaction_async",
    "settle",
    "sqlstate_of",
]
