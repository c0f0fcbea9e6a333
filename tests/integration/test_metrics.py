"""`/metrics` on a real server: after a job ran through a worker, the
lateness histogram has real observations and the success is counted; only
the admin token may scrape."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import grpc
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.support.polling import eventually
from tests.support.server import running_server
from tests.support.workers import builtin_handlers, running_worker
from tickwheel_server.telemetry.metrics import LATENESS_BUCKETS
from tickwheel_server.telemetry.prometheus import parse_samples


def _get(url: str, token: str | None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, "", error.read().decode()


async def test_metrics_show_the_lateness_and_outcome_of_a_run(store_and_etcd) -> None:
    store, etcd = store_and_etcd
    async with (
        running_server(store, etcd, http_listen="127.0.0.1:0") as running,
        grpc.aio.insecure_channel(running.address) as channel,
    ):
        url = running.server.http.url.rstrip("/") + "/metrics"
        acme = await running.create_tenant("acme")
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = job_pb2.Job(name="metered", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        job.schedule.cron.expression = "0 0 1 1 *"
        created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="m1"),
                                           metadata=bearer(acme))
        credential = await running.issue_worker_credential(["acme"], handlers=["echo"])
        async with running_worker(running.address, credential, builtin_handlers(), worker_id="metered-worker",
                                  http=False):  # fmt: skip
            await scheduler.TriggerJob(
                scheduler_pb2.TriggerJobRequest(id=created.job.id, request_id="t1"), metadata=bearer(acme)
            )
            succeeded = ("tickwheel_executions_total", (("outcome", "succeeded"), ("tenant", "acme")))

            async def scraped_with_the_success():
                status, content_type, text = await asyncio.to_thread(_get, url, running.admin_token)
                assert status == 200, text
                samples = parse_samples(text)
                return (content_type, samples) if samples.get(succeeded) else None

            content_type, samples = await eventually(scraped_with_the_success, "the success is counted")

        assert content_type.startswith("text/plain; version=0.0.4")
        assert samples[succeeded] == 1
        acme_labels = (("tenant", "acme"),)
        count = samples[("tickwheel_start_lateness_seconds_count", acme_labels)]
        total = samples[("tickwheel_start_lateness_seconds_sum", acme_labels)]
        assert count >= 1
        buckets = [
            samples[("tickwheel_start_lateness_seconds_bucket", (("le", le), ("tenant", "acme")))]
            for le in [*(str(int(b)) if float(b).is_integer() else repr(b) for b in LATENESS_BUCKETS), "+Inf"]
        ]
        assert buckets == sorted(buckets) and buckets[-1] == count
        # The sum agrees with the buckets: each observation lies between the
        # lower and the upper bound of its bucket.
        edges = [0.0, *LATENESS_BUCKETS, float("inf")]
        per_bucket = [b - a for a, b in zip([0, *buckets], buckets)]
        low = sum(n * edges[i] for i, n in enumerate(per_bucket))
        high = sum(n * edges[i + 1] for i, n in enumerate(per_bucket) if n)
        assert low <= total <= high
        assert samples[("tickwheel_claim_batch_size_count", (("stage", "handout"),))] >= 1
        # The server takes its partitions in the background (a trigger needs
        # none): the gauge shows them all once it holds them.
        partitions = running.server.config.partition_count

        async def all_partitions_owned():
            status, _, text = await asyncio.to_thread(_get, url, running.admin_token)
            return status == 200 and parse_samples(text).get(("tickwheel_partitions_owned", ())) == partitions

        await eventually(all_partitions_owned, f"tickwheel_partitions_owned shows {partitions}")
        assert samples[("tickwheel_workers_connected", ())] >= 0
        assert samples[("tickwheel_dead_letters", ())] == 0
        assert ("tickwheel_wheel_size", ()) in samples

        status, _, _ = await asyncio.to_thread(_get, url, None)
        assert status == 401
        status, _, _ = await asyncio.to_thread(_get, url, acme)
        assert status == 403
