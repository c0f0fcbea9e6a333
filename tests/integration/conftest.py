"""Fixtures shared by the integration tests that run one real server on each
backend: the embedded stores (SQLite and in-memory leases) and real
PostgreSQL + etcd."""

from __future__ import annotations

import pytest

from tests.support.server import running_server

BACKENDS = ["embedded", pytest.param("postgres+etcd", marks=[pytest.mark.postgres, pytest.mark.etcd])]


@pytest.fixture(params=BACKENDS)
def store_and_etcd(request) -> tuple[str, str]:
    """(store URL, etcd endpoint) of one backend: a fresh SQLite file with
    in-memory leases, or a fresh PostgreSQL database with the session's etcd.
    Both hold the schema already (``migrated_sqlite_url``,
    ``migrated_postgres_url``): the server's migration at start applies nothing."""
    if request.param == "embedded":
        return request.getfixturevalue("migrated_sqlite_url"), "memory"
    return request.getfixturevalue("migrated_postgres_url"), request.getfixturevalue("etcd_endpoint")


@pytest.fixture
async def server(store_and_etcd):
    """A server with default settings on each backend (:func:`running_server`)."""
    store, etcd = store_and_etcd
    async with running_server(store, etcd) as running:
        yield running


@pytest.fixture
async def servers_on_each_backend(migrated_sqlite_url, migrated_postgres_url, etcd_endpoint):
    """One server with default settings on each backend, side by side, by
    backend name (the ids of :data:`BACKENDS`), for a test that runs its case
    on both at once (:func:`tests.support.server.on_each_backend`)."""
    async with (
        running_server(migrated_sqlite_url, "memory") as embedded,
        running_server(migrated_postgres_url, etcd_endpoint) as postgres,
    ):
        yield {"embedded": embedded, "postgres+etcd": postgres}
