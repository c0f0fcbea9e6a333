"""A migrated store per test, on every backend: SQLite and real PostgreSQL
(SERIALIZABLE, as CockroachDB runs)."""

from __future__ import annotations

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.store import create_store_engine, migrate

STORE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORE_BACKENDS)
def migrated_engine(request: pytest.FixtureRequest, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    engine = create_store_engine(url)
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(autojump=True)
