"""The alert webhook (``--alert-webhook URL``) through the real server, with a
real worker and a local HTTP sink, on the embedded stores and on PostgreSQL
+ etcd: a real dead letter's alert is POSTed when raised and again when the
replay resolves it; a sink answering 500 twice gets it on the third try; an
alert raised while no server sent webhooks goes out after a restart with one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.support.polling import eventually
from tests.support.server import Running, running_server
from tests.support.workers import running_worker
from tickwheel_worker import HandlerRegistry, PermanentError
WAIT = 30.0
HANDLER = "billing.charge"


class Sink:
    """A local HTTP server that answers POSTs of alerts of ``kind`` with
    ``statuses`` in turn (then 200), others with 200, and keeps each
    request's JSON body and headers."""

    def __init__(self, *statuses: int, kind: str = "dead_letter") -> None:
        self.statuses = list(statuses)
        self.kind = kind
        self.requests: list[tuple[int, dict, dict[str, str]]] = []
        """(status answered, body, headers) of every POST."""
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> "Sink":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/hooks/tickwheel?token=t0ken"
        return self

    async def __aexit__(self, *_exc) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            assert request_line.startswith("POST /hooks/tickwheel?token=t0ken "), request_line
            event = json.loads(body)
            status = self.statuses.pop(0) if self.statuses and event["kind"] == self.kind else 200
            self.requests.append((status, event, headers))
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
        finally:
            writer.close()

    def events(self, accepted_only: bool = True) -> list[tuple[str, str, str]]:
        """(alert id, state, kind) of the POSTs, by default only those answered 2xx."""
        return [(b["id"], b["state"], b["kind"]) for s, b, _ in self.requests if s < 300 or not accepted_only]

    def of_kind(self) -> list[tuple[int, dict, dict[str, str]]]:
        """The requests of alerts of ``kind``."""
        return [request for request in self.requests if request[1]["kind"] == self.kind]

    def others(self) -> int:
        """How many POSTs were of alerts of other kinds (each answered 200)."""
        return len(self.requests) - len(self.of_kind())


class Charge:
    def __init__(self) -> None:
        self.failing = True

    async def __call__(self, ctx) -> bytes:
        if self.failing:
            raise PermanentError("card declined")
        return b"charged"


@contextlib.asynccontextmanager
async def serving(store: str, etcd: str, charge: Charge, **overrides) -> AsyncIterator[tuple[Running, object, str]]:
    """A server with a worker running ``charge``; (running, scheduler stub, acme's key)."""
    async with running_server(store, etcd, **overrides) as running:
        async with grpc.aio.insecure_channel(running.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            tenants = await admin.ListTenants(admin_pb2.ListTenantsRequest(), metadata=running.admin_metadata())
            if any(t.name == "acme" for t in tenants.tenants):
                issued = await admin.IssueApiKey(admin_pb2.IssueApiKeyRequest(tenant="acme"),
                                                 metadata=running.admin_metadata())  # fmt: skip
                key = issued.api_key.secret
            else:
                key = await running.create_tenant("acme")
            credential = await running.issue_worker_credential(["acme"], handlers=[HANDLER])
            registry = HandlerRegistry()
            registry.register(HANDLER, charge)
            async with running_worker(running.address, credential, registry, worker_id="w1", http=False, slots=4):
                yield running, scheduler_pb2_grpc.SchedulerServiceStub(channel), key


async def dead_letter(scheduler, key: str, name: str) -> str:
    """A one-off job whose only execution dies; its execution id once dead."""
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=HANDLER)), payload=b"{}")
    job.schedule.once_at.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=0.5))
    created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=name), metadata=bearer(key))
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        letters = await scheduler.ListDeadLetters(scheduler_pb2.ListDeadLettersRequest(job_id=created.job.id),
                                                  metadata=bearer(key))  # fmt: skip
        if letters.executions:
            return letters.executions[0].id
        assert asyncio.get_running_loop().time() < deadline, "the execution did not die"
        await asyncio.sleep(0.1)


async def test_a_dead_letters_alert_is_posted_raised_on_the_third_try_and_resolved_after_the_replay(
    store_and_etcd,
) -> None:
    store, etcd = store_and_etcd
    charge = Charge()
    async with Sink(500, 500) as sink, serving(store, etcd, charge, alert_webhook=sink.url) as (running, scheduler, key):
        # Only the dead letter's alert: on a loaded machine the server may
        # raise others of its own (a clock_skew while its first reads of the
        # database's clock are too slow), which this test is not about.
        def dead_letters() -> list[tuple[str, str, str]]:
            return [event for event in sink.events() if event[2] == "dead_letter"]

        execution_id = await dead_letter(scheduler, key, "charge")
        await eventually(dead_letters, "the raise reached the sink")
        [(alert_id, state, kind)] = dead_letters()
        assert (state, kind) == ("raised", "dead_letter")
        assert [(s, b["id"], b["state"]) for s, b, _ in sink.of_kind()] == [
            (500, alert_id, "raised"), (500, alert_id, "raised"), (200, alert_id, "raised"),
        ], "two failures, then the same event on the third try"
        body, headers = sink.of_kind()[-1][1], sink.of_kind()[-1][2]
        assert (body["tenant"], body["execution"], body["key"]) == ("acme", execution_id, f"dead_letter:{execution_id}")
        assert body["message"] and body["raised_at"] and body["resolved_at"] is None
        assert headers["content-type"] == "application/json" and headers["idempotency-key"] == f"{alert_id}:raised"

        charge.failing = False
        await scheduler.ReplayDeadLetter(scheduler_pb2.ReplayDeadLetterRequest(execution_id=execution_id),
                                         metadata=bearer(key))  # fmt: skip
        await eventually(lambda: len(dead_letters()) == 2, "the resolve reached the sink")
        assert dead_letters() == [(alert_id, "raised", "dead_letter"), (alert_id, "resolved", "dead_letter")]
        assert sink.of_kind()[-1][1]["resolved_at"] is not None
        webhook = running.server.webhook
        # Every other alert's POST was answered 200 at once: one attempt, one delivery each.
        await eventually(
            lambda: (webhook.delivered, webhook.attempts, webhook.undeliverable) == (2 + sink.others(), 4 + sink.others(), 0),
            "both deliveries recorded, after four attempts and nothing undeliverable",
        )


async def test_an_alert_raised_without_a_webhook_is_sent_by_the_next_server_with_one(tmp_path) -> None:
    store, etcd = f"sqlite:///{tmp_path / 'store.db'}", "memory"
    charge = Charge()
    async with serving(store, etcd, charge) as (running, scheduler, key):
        assert running.server.webhook is None
        execution_id = await dead_letter(scheduler, key, "charge")
    async with Sink() as sink, serving(store, etcd, charge, alert_webhook=sink.url):
        # Only the dead letter's alert: on a loaded machine the restart may
        # raise others of its own (a partition unowned for a moment), which
        # this test is not about. Delivery is at least once (a POST timed
        # out on a loaded machine is sent again, with the same
        # Idempotency-Key): one distinct event, the raise.
        def dead_letters() -> list[tuple[str, str, str]]:
            return sorted({event for event in sink.events() if event[2] == "dead_letter"})

        await eventually(dead_letters, "the alert raised before the restart reached the sink")
        [(_, state, kind)] = dead_letters()
        assert (state, kind) == ("raised", "dead_letter")
        assert {b["execution"] for _, b, _ in sink.requests if b["kind"] == "dead_letter"} == {execution_id}
