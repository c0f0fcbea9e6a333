"""A migrated store per test, on every backend: SQLite and real PostgreSQL
(SERIALIZABLE, as CockroachDB runs).

An audit, not a test (off unless asked): with ``TICKWHEEL_AS_COCKROACH=FILE``
the PostgreSQL engine's dialect is named ``cockroachdb``, so every
capability check takes CockroachDB's branch, and every statement a test's
client sent that ``tests/support/crdbsql.py`` refuses is appended to
``FILE`` with the test's id (the tests' own catalog reads included). Tests
of PostgreSQL's own branch fail in that mode by design, and PostgreSQL's
page-level serializable checks make racing writers conflict more than
CockroachDB's per-key ones would (``test_job_writes``' races)::

    TICKWHEEL_AS_COCKROACH=/tmp/crdb.txt pytest tests/conformance -k postgres
"""

from __future__ import annotations

import os

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.store import create_store_engine, migrate

from tests.support.crdbsql import violations
from tests.support.libpq_trace import client_messages

STORE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
AS_COCKROACH = os.environ.get("TICKWHEEL_AS_COCKROACH", "")


@pytest.fixture(params=STORE_BACKENDS)
def migrated_engine(request: pytest.FixtureRequest):
    if request.param == "sqlite":
        url = request.getfixturevalue("migrated_sqlite_url")  # a copy of a migrated template
    else:
        url = request.getfixturevalue("migrated_postgres_url")  # a copy of a migrated template
    engine = create_store_engine(url)
    migrate(engine)  # applies nothing: the copy is migrated already
    if request.param == "postgres" and AS_COCKROACH:
        engine.dialect.name = "cockroachdb"
        with client_messages(engine) as (messages, _used):
            yield engine
            engine.dispose()
        refused = sorted({(name, message) for message in messages if message.startswith(("Parse", "Query"))
                          for name in violations(message)})
        with open(AS_COCKROACH, "a") as out:
            out.writelines(f"{request.node.nodeid}\t{name}\t{message[:300]!r}\n" for name, message in refused)
        return
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(autojump=True)
