"""The circuit breaker through a real server and worker (issue 6): tenant
acme's HTTP target on host A (127.0.0.1) answers 500; after 25 calls all
failing, acme's circuit for A opens, its ``circuit_open`` alert is raised
and every retry of acme's jobs to A is held past the open period, while
acme's calls to host B (127.0.0.2) and globex's to A are retried at once;
then A recovers, a probe closes the circuit and the alert resolves.

Short settings (a 10 s open period) and polling; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa
from tickwheel import AsyncClient, builders
from tickwheel.v1 import job_pb2

from tests.support.server import running_server
from tickwheel.shared.ids import to_us
from tickwheel_server.alerts.catalogue import circuit_open_key
from tickwheel.shared.targets import LOOPBACK_NETWORKS, TargetPolicy
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig

WAIT = 60.0
OPEN_FOR = 10.0
"""Long enough for a loaded machine to create the other jobs and see every
retry to A held before the first probes (both asserted: a probe would open
a new period)."""


class Target:
    """A real HTTP server on ``host``: ``/down`` answers 500 while
    :attr:`failing`, ``/flaky`` answers 500 to a first attempt only."""

    def __init__(self, host: str) -> None:
        self.failing = True
        self.calls: list[str] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target.calls.append(self.path)
                failed = target.failing if self.path == "/down" else self.headers.get("Tickwheel-Attempt") == "1"
                self.send_response(500 if failed else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hosts() -> Iterator[tuple[Target, Target]]:
    a, b = Target("127.0.0.1"), Target("127.0.0.2")
    yield a, b
    a.close()
    b.close()


async def eventually(check, what: str):
    """Poll ``check`` (async) until it returns something truthy; that value."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


RETRY = job_pb2.RetryPolicy(max_attempts=30)
RETRY.initial_backoff.FromMilliseconds(100)
RETRY.max_backoff.FromMilliseconds(200)


def statuses(engine: sa.Engine, job_ids: list[str]) -> list:
    """(status, ready_at) of the jobs' executions, read from the store (the API's request rate is a quota)."""
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT status, ready_at FROM executions WHERE job_id IN :ids")
            .bindparams(sa.bindparam("ids", expanding=True)), {"ids": job_ids},
        ).all()  # fmt: skip


async def create_jobs(client: AsyncClient, name: str, url: str, count: int) -> list[str]:
    now = datetime.now(timezone.utc)
    return [
        (await client.create_job(builders.once_job(f"{name}-{n}", now, url=url, retry=RETRY))).job.id
        for n in range(count)
    ]


async def test_a_failing_host_opens_its_tenants_circuit_only(tmp_path, hosts) -> None:
    a, b = hosts
    async with running_server(
        f"sqlite:///{tmp_path / 'store.db'}", allow_target_networks=("127.0.0.0/8",), breaker_open=OPEN_FOR
    ) as running:
        server = running.server
        async with AsyncClient(running.address, admin_token=running.admin_token) as admin:
            acme_key = (await admin.admin.create_tenant("acme")).api_key.secret
            globex_key = (await admin.admin.create_tenant("globex")).api_key.secret
            secret = (await admin.admin.issue_worker_credential(["acme", "globex"], http=True)).credential.secret
        worker = Worker(WorkerConfig(address=running.address, credential=secret, handlers=HandlerRegistry(), slots=16,
                                     address_policy=TargetPolicy.allowing(LOOPBACK_NETWORKS)))  # fmt: skip
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(worker.connected.wait(), WAIT)
            async with AsyncClient(running.address, acme_key) as acme, AsyncClient(running.address, globex_key) as globex:
                down = await create_jobs(acme, "down", f"{a.url}/down", 25)
                key = circuit_open_key("acme", "127.0.0.1")
                alert = await eventually(lambda: server.stores.alerts.get(key), "the circuit_open alert")
                assert alert.tenant == "acme" and "127.0.0.1" in alert.summary
                probes_from = int(alert.details["probes_from_us"])

                # While it is open: acme's calls to B and globex's to A fail
                # once and are retried at once, not held.
                others = await create_jobs(acme, "b", f"{b.url}/flaky", 3)
                others += await create_jobs(globex, "a", f"{a.url}/flaky", 3)
                for job_id, client in zip(others, [acme] * 3 + [globex] * 3):
                    async def succeeded(job_id=job_id, client=client):
                        done = job_pb2.EXECUTION_STATUS_SUCCEEDED
                        return next((e for e in (await client.list_executions(job_id)).executions if e.status == done),
                                    None)  # fmt: skip

                    execution = await eventually(succeeded, f"{job_id} to succeed")
                    retried = [t for t in execution.attempts if t.attempt == 2]
                    assert retried, job_id
                    # Due (its start less its lateness) before the probes: not
                    # held, however late a loaded machine started it.
                    ready = to_us(retried[0].started_at.ToDatetime(timezone.utc)) - retried[0].lateness.ToMicroseconds()
                    assert ready < probes_from, job_id

                # Every retry of acme's jobs to A ends up held past the open period
                # (waiting: scheduled, or armed ahead of that instant, which the
                # API shows as scheduled; the open period is shorter than the
                # arming window).
                async def all_held():
                    rows = statuses(server.engine, down)
                    return len(rows) == 25 and all(
                        r.status in ("scheduled", "armed") and r.ready_at >= probes_from for r in rows
                    )

                await eventually(all_held, "acme's retries to A to be held")
                still = await server.stores.alerts.get(key)
                assert still is not None and still.details["probes_from_us"] == str(probes_from), (
                    "held within the first open period"
                )
                assert server.breaker.state("acme", "127.0.0.2") == server.breaker.state("globex", "127.0.0.1") == (
                    "closed"
                )

                # A recovers: a probe closes the circuit, the alert resolves, the held retries succeed.
                a.failing = False

                async def resolved():
                    return await server.stores.alerts.get(key) is None

                await eventually(resolved, "the alert to resolve")

                async def all_succeeded():
                    rows = statuses(server.engine, down)
                    return len(rows) == 25 and all(r.status == "succeeded" for r in rows)

                await eventually(all_succeeded, "acme's jobs to A to succeed")
                assert server.breaker.opened >= 1 and server.breaker.circuits() == []
        finally:
            await worker.stop(1.0)
            await asyncio.gather(task, return_exceptions=True)
