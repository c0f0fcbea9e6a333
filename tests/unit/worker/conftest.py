"""Fixtures: a real grpc.aio server running the scripted service of ``worker_fakes``,
and real Workers connected to it (stopped at teardown)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc.aio
import pytest

from tickwheel.shared.clock import Clock
from tickwheel.v1 import worker_pb2_grpc
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig
from tests.unit.worker.worker_fakes import LOOPBACK, WAIT, FakeWorkerService, StartWorker

@pytest.fixture
async def fake_server() -> AsyncIterator[FakeWorkerService]:
    service = FakeWorkerService()
    server = grpc.aio.server()
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    service.address = f"127.0.0.1:{port}"
    try:
        yield service
    finally:
        await server.stop(grace=None)


@pytest.fixture
async def start_worker(fake_server: FakeWorkerService) -> AsyncIterator[StartWorker]:
    """``await start_worker(registry, slots=2, ...)``: a running Worker (on
    ``clock=`` if given, else the system clock); stopped at teardown."""
    running: list[tuple[Worker, asyncio.Task[None]]] = []

    async def start(registry: HandlerRegistry | None = None, *, clock: Clock | None = None, **overrides: Any) -> Worker:
        settings: dict[str, Any] = dict(
            address=fake_server.address,
            credential="worker-secret",
            handlers=registry if registry is not None else HandlerRegistry(),
            reconnect_initial_backoff=0.02,
            reconnect_max_backoff=0.2,
            cancel_grace=0.2,
            slots=2,
            address_policy=LOOPBACK,
            # 2 s of silence at the fake's 0.1 s heartbeats: a test process that
            # stalls (a full collection of a heap grown over a whole suite) must
            # not make the worker give up on its stream. The tests of that
            # detection set a short limit themselves.
            server_silence_intervals=20,
        )
        settings.update(overrides)
        worker = Worker(WorkerConfig(**settings), clock=clock)
        running.append((worker, asyncio.create_task(worker.run())))
        return worker

    yield start
    for worker, task in running:
        await asyncio.wait_for(worker.stop(grace=0), WAIT)
        await asyncio.wait_for(task, WAIT)  # re-raises anything run() raised
