"""An upgrade over a store an earlier release left holding raw peer text,
against the real server on the embedded stores and on PostgreSQL + etcd:
the server's migration at start (0036) escapes every row in place, and
the API's readers (SearchExecutions, ListAlerts, GetTenant, ListApiKeys,
ListWorkerCredentials) answer the escaped text; a row an old server
writes raw afterwards (a rolling upgrade) is answered escaped too."""

from __future__ import annotations

import time

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tests.conformance.test_peer_text_migration import ALREADY, ESCAPED, HOSTILE, seed
from tests.support.server import running_server
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.tables import attempts, executions

BACKENDS = ["embedded", pytest.param("postgres+etcd", marks=[pytest.mark.postgres, pytest.mark.etcd])]


@pytest.fixture(params=BACKENDS)
def old_store(request, tmp_path) -> tuple[str, str]:
    """(store URL, etcd endpoint): a store at migration 0035 with raw rows,
    their instants now (so no retention pass takes them)."""
    if request.param == "embedded":
        url, etcd = f"sqlite:///{tmp_path / 'old.db'}", "memory"
    else:
        url, etcd = request.getfixturevalue("postgres_url"), request.getfixturevalue("etcd_endpoint")
    engine = create_store_engine(url)
    try:
        migrate(engine, target=35)
        seed(engine, rows=5)
        now = int(time.time() * 1e6)
        with engine.begin() as conn:
            conn.execute(executions.update().values(
                nominal_at=executions.c.nominal_at + now, due_at=executions.c.due_at + now,
                ready_at=executions.c.ready_at + now, created_at=executions.c.created_at + now,
                finished_at=executions.c.finished_at + now))  # fmt: skip
            conn.execute(attempts.update().values(started_at=now, finished_at=now))
    finally:
        engine.dispose()
    return url, etcd


async def test_an_upgraded_store_answers_every_peer_text_escaped(old_store) -> None:
    url, etcd = old_store
    async with running_server(url, etcd) as server, grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        meta = server.admin_metadata()
        engine = create_store_engine(url)
        try:
            with engine.connect() as conn:
                stored = dict(conn.execute(sa.select(executions.c.id, executions.c.error)).all())
            assert stored["exe_000"] == ESCAPED and stored["exe_001"] == ALREADY, "escaped in place at start"
            with engine.begin() as conn:  # a server of the earlier release, still running, writes raw
                conn.execute(executions.update().where(executions.c.id == "exe_003").values(error=HOSTILE))
        finally:
            engine.dispose()

        found = (await admin.SearchExecutions(admin_pb2.SearchExecutionsRequest(tenant="acme", page_size=10),
                                              metadata=meta)).executions  # fmt: skip
        by_id = {e.id: e for e in found}
        assert by_id["exe_000"].error == ESCAPED and by_id["exe_003"].error == ESCAPED
        assert by_id["exe_004"].dead_reason == ESCAPED and by_id["exe_001"].error == ALREADY
        assert [a.error for a in by_id["exe_000"].attempts] in ([], [ESCAPED])
        alerts = (await admin.ListAlerts(admin_pb2.ListAlertsRequest(tenant="acme"), metadata=meta)).alerts
        [alert] = [a for a in alerts if a.execution_id == "exe_000"]
        assert alert.summary.endswith(ESCAPED) and alert.details["error"] == ESCAPED
        tenant = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
        assert tenant.pause_reason == ESCAPED
        [key] = (await admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="acme"), metadata=meta)).api_keys
        assert key.description == ESCAPED
        [credential] = (await admin.ListWorkerCredentials(admin_pb2.ListWorkerCredentialsRequest(tenant="acme"),
                                                          metadata=meta)).credentials  # fmt: skip
        assert credential.description == ALREADY
