"""ListAlerts and WatchAlerts through the real gRPC server, on the embedded
stores and on PostgreSQL + etcd.

Alerts are raised through an :class:`AlertStore` of the test's own over the
server's database: it shares nothing in process with the server, so what the
server's WatchAlerts sees of it came through the store, as a change made by
another server would.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tests.integration.test_server_api import bearer, violations
from tickwheel_server.api.admin import AdminServicer, ServerInfo
from tickwheel_server.auth.authenticator import Authenticator
from tickwheel.shared.clock import SystemClock
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.alerts.catalogue import NewAlert, clock_skew_key, dead_letter_alert
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.credentials import WorkerCredentialStore
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tenants import TenantStore

WAIT = 20.0
K = admin_pb2


@pytest.fixture
async def admin(server):
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield admin_pb2_grpc.AdminServiceStub(channel)


@pytest.fixture
def elsewhere(server) -> AlertStore:
    """An alert store standing for another server."""
    return AlertStore(server.server.engine, SystemClock())


def skew(server_id: str) -> NewAlert:
    return NewAlert(clock_skew_key(server_id), "clock_skew", "critical", f"{server_id}: clock 400 ms ahead",
                    server_id=server_id, details={"skew_ms": "400"})  # fmt: skip


def dead(execution: str, tenant: str = "acme") -> NewAlert:
    return dead_letter_alert(execution_id=execution, job_id="job_1", tenant=tenant, reason="failed permanently")


async def rpc_error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value


async def test_list_alerts_filters_and_pages(server, admin, elsewhere) -> None:
    meta = server.admin_metadata()
    raised = [await elsewhere.raise_alert(dead(f"e{n}", ("acme", "globex")[n % 2])) for n in range(5)]
    await elsewhere.raise_alert(skew("s1"))
    again = await elsewhere.raise_alert(skew("s1"))
    await elsewhere.resolve("dead_letter:e0")

    # The running server may raise alerts of its own meanwhile (its clock guard, on a loaded
    # machine): the test counts those of "another server" only.
    own = server.server.server_id
    open_now = await admin.ListAlerts(K.ListAlertsRequest(), metadata=meta)
    assert not open_now.next_page_token
    open_now = [a for a in open_now.alerts if a.server_id != own]
    assert len(open_now) == 5
    [alert] = [a for a in open_now if a.kind == K.ALERT_KIND_CLOCK_SKEW]
    assert (alert.id, alert.count, alert.severity, alert.server_id) == (again.id, 2, K.ALERT_SEVERITY_CRITICAL, "s1")
    assert alert.details["skew_ms"] == "400" and not alert.HasField("resolved_at")
    assert alert.raised_at.ToDatetime(tzinfo=timezone.utc) <= alert.last_seen_at.ToDatetime(tzinfo=timezone.utc)

    seen, token = [], ""
    while True:
        page = await admin.ListAlerts(K.ListAlertsRequest(include_resolved=True, page_size=2, page_token=token),
                                      metadata=meta)  # fmt: skip
        assert len(page.alerts) <= 2
        seen.extend(page.alerts)
        token = page.next_page_token
        if not token:
            break
    instants = [a.raised_at.ToDatetime(tzinfo=timezone.utc) for a in seen]
    assert instants == sorted(instants, reverse=True)
    assert len({a.id for a in seen}) == len(seen)
    seen = [a for a in seen if a.server_id != own]
    assert len(seen) == 6
    [gone] = [a for a in seen if a.id == raised[0].id]
    assert gone.HasField("resolved_at")

    acme = await admin.ListAlerts(
        K.ListAlertsRequest(tenant="acme", kinds=[K.ALERT_KIND_DEAD_LETTER], include_resolved=True), metadata=meta)
    assert sorted(a.execution_id for a in acme.alerts) == ["e0", "e2", "e4"]  # fmt: skip
    none = await admin.ListAlerts(K.ListAlertsRequest(kinds=[K.ALERT_KIND_LATE]), metadata=meta)
    assert list(none.alerts) == []


async def test_bad_alert_requests_are_refused_naming_the_field(server, admin) -> None:
    meta = server.admin_metadata()
    cases = {
        "kinds": K.ListAlertsRequest(kinds=[K.ALERT_KIND_UNSPECIFIED]),
        "kinds ": K.ListAlertsRequest(kinds=[99]),
        "tenant": K.ListAlertsRequest(tenant="Not A Tenant"),
        "page_size": K.ListAlertsRequest(page_size=1001),
        "page_token": K.ListAlertsRequest(page_token="forged"),
    }
    for field, request in cases.items():
        error = await rpc_error(admin.ListAlerts(request, metadata=meta))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert field.strip() in violations(error), (field, violations(error))
    watches = {"kinds": K.WatchAlertsRequest(kinds=[42]), "tenant": K.WatchAlertsRequest(tenant="-x")}
    for field, request in watches.items():
        call = admin.WatchAlerts(request, metadata=meta)
        error = await rpc_error(call.read())
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and field in violations(error), field
    key = await server.create_tenant("acme")
    denied = await rpc_error(admin.ListAlerts(K.ListAlertsRequest(), metadata=bearer(key)))
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    watch_denied = await rpc_error(admin.WatchAlerts(K.WatchAlertsRequest(), metadata=bearer(key)).read())
    assert watch_denied.code() == grpc.StatusCode.PERMISSION_DENIED
    assert (await rpc_error(admin.ListAlerts(K.ListAlertsRequest()))).code() == grpc.StatusCode.UNAUTHENTICATED


async def read(call) -> admin_pb2.Alert:
    message = await asyncio.wait_for(call.read(), WAIT)
    assert message is not grpc.aio.EOF, "the watch ended"
    return message.alert


async def test_watch_alerts_sees_another_servers_changes_with_its_filters(server, admin, elsewhere, caplog) -> None:
    caplog.set_level(logging.ERROR)
    sentinel = await elsewhere.raise_alert(dead("sentinel"))
    call = admin.WatchAlerts(
        K.WatchAlertsRequest(include_open=True, kinds=[K.ALERT_KIND_DEAD_LETTER], tenant="acme"),
        metadata=server.admin_metadata(),
    )
    try:
        assert (await read(call)).id == sentinel.id  # the open alerts first; from here on, changes
        await elsewhere.raise_alert(skew("s2"))  # another kind: not sent
        await elsewhere.raise_alert(dead("e1", "globex"))  # another tenant: not sent
        raised = await elsewhere.raise_alert(dead("e2"))
        got = await read(call)
        assert (got.id, got.execution_id, got.count, got.HasField("resolved_at")) == (raised.id, "e2", 1, False)
        await elsewhere.raise_alert(dead("e2"))
        assert (await read(call)).count == 2
        await elsewhere.resolve("dead_letter:e2")
        resolved = await read(call)
        assert resolved.id == raised.id and resolved.HasField("resolved_at")
    finally:
        call.cancel()
    assert await call.code() == grpc.StatusCode.CANCELLED
    # The server is unharmed by the cancelled stream, and logged no failure for it.
    listed = await admin.ListAlerts(K.ListAlertsRequest(tenant="acme"), metadata=server.admin_metadata())
    assert [a.id for a in listed.alerts] == [sentinel.id]
    assert not [r for r in caplog.records if "WatchAlerts" in r.getMessage()]


async def test_a_watch_ends_with_ok_when_the_server_stops(tmp_path) -> None:
    """What a stopping server does: close the alert store (every watch
    returns), then stop gRPC. The client sees the stream end with OK."""
    clock = SystemClock()
    engine = create_store_engine(f"sqlite:///{tmp_path / 'store.db'}")
    await asyncio.to_thread(migrate, engine)
    tenants, workers = TenantStore(engine, clock), WorkerCredentialStore(engine, clock)
    jobs, alerts = JobStore(engine, clock, partition_count=4), AlertStore(engine, clock)
    auth = Authenticator(tenants, workers, "admin-secret", clock)
    info = ServerInfo("s1", "127.0.0.1:0", datetime.now(timezone.utc), "sqlite", 6, 4, "2026a")
    server = grpc.aio.server()
    admin_pb2_grpc.add_AdminServiceServicer_to_server(
        AdminServicer(auth, tenants, workers, jobs, info, Connections(), PartitionStore(engine, clock), alerts=alerts),
        server,
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        sentinel = await alerts.raise_alert(skew("s1"))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = admin_pb2_grpc.AdminServiceStub(channel).WatchAlerts(
                K.WatchAlertsRequest(include_open=True), metadata=bearer("admin-secret"))  # fmt: skip
            assert (await read(call)).id == sentinel.id
            alerts.close()
            assert await asyncio.wait_for(call.read(), WAIT) is grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK
    finally:
        await server.stop(1.0)
        engine.dispose()
