"""A migrated store per test, on every backend: SQLite and real PostgreSQL
(SERIALIZABLE, as CockroachDB runs)."""

from __future__ import annotations

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.store import create_store_engine, migrate

STORE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORE_BACKENDS)
def migrated_engine(request: pytest.FixtureRequest):
    if request.param == "sqlite":
        url = request.getfixturevalue("migrated_sqlite_url")  # a copy of a migrated template
    else:
        url = request.getfixturevalue("migrated_postgres_url")  # a copy of a migrated template
    engine = create_store_engine(url)
    migrate(engine)  # applies nothing: the copy is migrated already
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(autojump=True)
