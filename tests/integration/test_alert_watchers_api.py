"""Many WatchAlerts streams on the real server share its one alert reader:
each gets what it asked for, the reader runs while they are open and stops
when the last one goes; on the embedded stores and on PostgreSQL + etcd."""

from __future__ import annotations

import asyncio

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tests.integration.test_alerts_api import dead, read, skew
from tests.support.polling import eventually
from tickwheel.shared.clock import SystemClock
from tickwheel_server.store.alerts import AlertStore

STREAMS = 12


async def test_many_watch_streams_share_one_reader_and_each_gets_its_own(server) -> None:
    elsewhere = AlertStore(server.server.engine, SystemClock())  # another server's writes
    feed = server.server.alert_watch.feed
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        sentinels = {"acme": await elsewhere.raise_alert(dead("sentinel-acme", "acme")),
                     "globex": await elsewhere.raise_alert(dead("sentinel-globex", "globex"))}  # fmt: skip
        calls = []
        for n in range(STREAMS):
            tenant = ("acme", "globex")[n % 2]
            call = admin.WatchAlerts(
                admin_pb2.WatchAlertsRequest(include_open=True, kinds=[admin_pb2.ALERT_KIND_DEAD_LETTER],
                                             tenant=tenant),
                metadata=server.admin_metadata(),
            )  # fmt: skip
            calls.append((tenant, call))
            assert (await read(call)).id == sentinels[tenant].id
        assert feed.watchers == STREAMS
        await elsewhere.raise_alert(skew("s9"))  # no stream asked for it
        raised = {t: await elsewhere.raise_alert(dead(f"e-{t}", t)) for t in ("globex", "acme")}
        got = await asyncio.gather(*(read(call) for _, call in calls))
        assert [alert.id for alert in got] == [raised[tenant].id for tenant, _ in calls]
        for _, call in calls:
            call.cancel()
        await eventually(lambda: feed.watchers == 0, "every stream's watch gone")
