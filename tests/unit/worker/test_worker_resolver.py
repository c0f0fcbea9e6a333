"""Name lookups of HTTP targets against a name server that hangs (hardening,
session 22): bounded by the call's deadline or its abort, abandoned past it,
and capped per tenant so one tenant's slow resolver starves no one else."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tickwheel.v1 import job_pb2, worker_pb2
from tickwheel_worker import HandlerRegistry
from tickwheel_worker.http_target import HttpCall, build_request
from tickwheel_worker.resolver import LookupTimeout, Resolver, ResolverBusy
from tests.unit.worker.test_worker_http_target import TargetServer
from tests.unit.worker.worker_fakes import LOOPBACK, WAIT, FakeWorkerService, StartWorker, make_assignment

OUTCOME = worker_pb2.ResultOutcome
HUNG = ".hung.test"


class HangingNameServer:
    """``socket.getaddrinfo`` for names ending in :data:`HUNG` waits until
    released (a name server that never answers); other names resolve as usual."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = 0
        self._real = socket.getaddrinfo
        self._lock = threading.Lock()

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list:
        if isinstance(host, str) and host.endswith(HUNG):
            with self._lock:
                self.asked += 1
            self.release.wait(120)
            raise socket.gaierror(socket.EAI_AGAIN, "temporary failure in name resolution")
        return self._real(host, port, *args, **kwargs)


@pytest.fixture
def name_server(monkeypatch) -> Iterator[HangingNameServer]:
    fake = HangingNameServer()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    try:
        yield fake
    finally:
        fake.release.set()


@pytest.fixture
def target() -> Iterator[TargetServer]:
    """The HTTP target server of ``test_worker_http_target`` (it answers ``/ok`` with 200)."""
    with TargetServer() as server:
        yield server


def hung_target(name: str = "api") -> job_pb2.HttpTarget:
    return job_pb2.HttpTarget(url=f"http://{name}{HUNG}/charge")


async def test_a_hung_lookup_is_abandoned_at_the_deadline_and_the_slot_comes_back(
    fake_server: FakeWorkerService, start_worker: StartWorker, target: TargetServer,
    name_server: HangingNameServer,
) -> None:
    """Before, the call's thread sat in ``getaddrinfo`` past the deadline (an
    abort shuts sockets, and a lookup has none), and held the worker's only
    slot for as long as the name server took."""
    worker = await start_worker(HandlerRegistry(), slots=1)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:hung", http=hung_target(), deadline_in=0.3))

    result = await stream.wait_result("e:hung")
    assert result.outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT, result.error
    await stream.wait_for(lambda s: s.credit_total == 2)  # the slot came back, the lookup still hangs
    assert worker.in_flight() == [] and not name_server.release.is_set()

    other = make_assignment("e:other", http=job_pb2.HttpTarget(url=target.url("/ok")))
    other.tenant = "globex"
    await stream.assign(other)
    result = await stream.wait_result("e:other")
    assert result.outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED, result.error


async def test_a_tenant_past_its_lookups_fails_at_once_and_others_run(
    fake_server: FakeWorkerService, start_worker: StartWorker, target: TargetServer,
    name_server: HangingNameServer,
) -> None:
    resolver = Resolver(per_tenant=1, total=8)
    await start_worker(HandlerRegistry(), slots=2, resolver=resolver)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:first", http=hung_target(), deadline_in=0.3))
    assert (await stream.wait_result("e:first")).outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT
    # The deadline's abort sends the result and, on the call's thread, counts
    # the lookup abandoned: the two race, so wait for the count (bounded).
    for _ in range(int(WAIT / 0.01)):
        if resolver.abandoned("acme") == 1:
            break
        await asyncio.sleep(0.01)
    assert resolver.abandoned("acme") == 1  # still under way

    await stream.assign(make_assignment("e:second", http=hung_target("other"), deadline_in=30))
    second = await stream.wait_result("e:second")
    assert second.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE, second.error
    assert "1 lookups of tenant acme's target hosts outlived their calls" in second.error
    assert name_server.asked == 1  # nothing more was asked of the hung name server

    other = make_assignment("e:globex", http=job_pb2.HttpTarget(url=target.url("/ok")))
    other.tenant = "globex"
    await stream.assign(other)
    assert (await stream.wait_result("e:globex")).outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED

    name_server.release.set()  # the name server answers at last: the tenant's count goes back
    for _ in range(int(WAIT / 0.01)):
        if resolver.abandoned() == 0:
            break
        threading.Event().wait(0.01)
    assert resolver.abandoned() == 0


def test_the_caps_count_abandoned_lookups_until_they_return(name_server: HangingNameServer) -> None:
    resolver = Resolver(per_tenant=2, total=3)
    assert resolver.resolve("acme", "127.0.0.1", 80, 5)  # one that answers is never counted
    for name in ("a", "b"):
        with pytest.raises(LookupTimeout, match=f"{name}{HUNG}"):
            resolver.resolve("acme", f"{name}{HUNG}", 80, 0.05)
    with pytest.raises(ResolverBusy, match="tenant acme"):
        resolver.resolve("acme", "c" + HUNG, 80, 0.05)
    with pytest.raises(LookupTimeout):
        resolver.resolve("globex", "d" + HUNG, 80, 0.05)
    with pytest.raises(ResolverBusy, match="3 lookups of target hosts outlived their calls .* on this worker"):
        resolver.resolve("initech", "127.0.0.1", 80, 5)
    assert (resolver.abandoned("acme"), resolver.abandoned("globex"), resolver.abandoned()) == (2, 1, 3)
    assert name_server.asked == 3
    name_server.release.set()
    for _ in range(int(WAIT / 0.01)):
        if resolver.abandoned() == 0:
            break
        threading.Event().wait(0.01)
    assert resolver.abandoned() == 0 and resolver.resolve("acme", "127.0.0.1", 80, 5)


def test_a_burst_of_lookups_a_healthy_resolver_answers_meets_no_cap() -> None:
    """Lookups a call still waits for are bounded by the slots, not capped:
    a burst of one tenant's calls to one host all start."""
    release = threading.Barrier(20)

    def slow_but_healthy(host: str, port: int) -> list:
        release.wait(WAIT)  # all twenty under way at once
        return socket.getaddrinfo("127.0.0.1", port, type=socket.SOCK_STREAM)

    resolver = Resolver(slow_but_healthy, per_tenant=1, total=1)
    answers: list = []
    callers = [threading.Thread(target=lambda: answers.append(resolver.resolve("acme", "api.example", 80, WAIT)))
               for _ in range(20)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(WAIT)
    assert len(answers) == 20 and resolver.abandoned() == 0


def test_an_abort_abandons_a_lookup_under_way(name_server: HangingNameServer) -> None:
    resolver = Resolver()
    request = build_request(
        hung_target(), execution_id="e:1", attempt=1, delivery=1, scheduled_at="", traceparent="", payload=b"",
        user_agent="test",
    )
    call = HttpCall(request, timeout=60, address_policy=LOOPBACK, resolver=resolver, tenant="acme")
    outcome: list = []
    runner = threading.Thread(target=lambda: outcome.append(call.run()), daemon=True)
    runner.start()
    for _ in range(int(WAIT / 0.01)):
        if name_server.asked:
            break
        threading.Event().wait(0.01)
    call.abort()
    runner.join(WAIT)
    assert not runner.is_alive() and not name_server.release.is_set()
    assert outcome[0].outcome == OUTCOME.RESULT_OUTCOME_CANCELED, outcome[0].error


def test_caps_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Resolver(per_tenant=0)
