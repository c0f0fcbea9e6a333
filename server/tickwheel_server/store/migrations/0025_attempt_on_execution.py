"""A plain success's attempt recorded on its execution row, not in ``attempts``.

Most executions end with one attempt that succeeds without error text. Its
record (when it started, on which worker, when the worker started it, how
long it waited for its job or a key, its output) now goes in five columns
of the execution row, written by the UPDATE that ends the execution, where
it used to be one more row (and index entry) in ``attempts``. They are NULL
on every other row: ``attempt_started_at IS NOT NULL`` says the row carries
its last attempt, ``attempt``/``delivery`` numbering it, ``succeeded`` its
status, ``finished_at`` its end; its lateness is derived as an attempt row's
is (from ``due_at`` and ``ready_at``). Readers of history merge it with the
``attempts`` rows (docs/architecture.md, Executions and attempts).

Plain nullable columns, added the same way on every engine; no index, so
the update that fills them stays as cheap as the one that did not.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.migrations._ddl import add_column

_COLUMNS = [
    ("attempt_started_at", "BIGINT"),
    ("attempt_worker_id", "TEXT"),
    ("attempt_worker_started_at", "BIGINT"),
    ("attempt_waited_us", "BIGINT"),
    ("attempt_output", None),
]


def upgrade(conn: Connection, caps: Capabilities) -> None:
    binary = "BLOB" if caps.is_sqlite else "BYTEA"
    for name, kind in _COLUMNS:
        add_column(conn, caps, "executions", f"{name} {kind or binary}")
