"""Every recorded attempt as SQL text, for tests that read history with raw SQL.

A plain success keeps its attempt on its execution row rather than in
``attempts`` (migration 0025); :data:`ALL_ATTEMPTS` is the parenthesised
query that reads both as rows of ``attempts`` (same columns), so that
``FROM {ALL_ATTEMPTS} AS a`` reads what ``FROM attempts AS a`` read before.
Plain SQL that SQLite, PostgreSQL and CockroachDB all accept.
"""

from __future__ import annotations

from sqlalchemy.dialects import postgresql

from tickwheel_server.store.history import attempt_history

ALL_ATTEMPTS = "(" + str(
    attempt_history().element.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
).replace("\n", " ") + ")"
