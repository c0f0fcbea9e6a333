"""Hellos and streams of WorkerService.Pull refused (``api.worker``): each
refused with its status and counted, logged at WARNING once a minute per
cause and credential (the rest DEBUG), in a bounded map of credentials."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from types import SimpleNamespace

import grpc
import pytest
from tickwheel.shared.clock import FakeClock
from tickwheel.v1 import worker_pb2

from tickwheel_server.api.worker import WorkerServicer
from tickwheel_server.auth.windows import RefusalWindows
from tickwheel_server.errors import Unavailable
from tickwheel_server.gateway.budget import OverBudget
from tickwheel_server.gateway.connections import Connections, StreamCaps, WorkerConnection
from tickwheel_server.store.credentials import WorkerCredential
from tickwheel_server.telemetry.refusals import MAX_KEYS

LOGGER = "tickwheel_server.api.worker"


def credential(name: str) -> WorkerCredential:
    return WorkerCredential(id=name, tenants=("acme",), handlers=(), http=False, description="",
                            created_at=datetime(2026, 12, 7, tzinfo=timezone.utc))


class _Auth:
    """Each call's credential is the one the test says next."""

    def __init__(self) -> None:
        self.next = credential("wc")
        self.windows = RefusalWindows(FakeClock(), hold=0.0)  # a hello refused by a cap opens one

    async def worker(self, context) -> WorkerCredential:
        return self.next


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self, who: str = "wc") -> None:
        self.aborted: tuple | None = None
        self.written: list = []
        self.secret = f"tww_{who}_secret"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.secret}"),)

    async def abort(self, code, details="", trailing_metadata=()):
        self.aborted = (code, details)
        raise _Aborted

    async def write(self, message) -> None:
        self.written.append(message)


async def _stream(*messages: worker_pb2.PullRequest):
    for message in messages:
        yield message
    await asyncio.Event().wait()  # the worker sends nothing more, and stays


HELLO = worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id="w", handlers=["echo"], slots=1))


async def _pull(servicer: WorkerServicer, auth: _Auth, who: str, *after: worker_pb2.PullRequest) -> tuple:
    auth.next = credential(who)
    context, stream = _Context(who), _stream(HELLO, *after)
    with pytest.raises(_Aborted):
        await servicer.Pull(stream, context)
    await stream.aclose()
    return context.aborted


def _warnings(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and text in r.getMessage()]


async def test_hellos_past_a_cap_say_one_warning_a_credential_a_minute_through_a_flood_of_credentials(caplog) -> None:
    """A credential retrying at the cap throughout a flood of hellos from
    more credentials than the log remembers: each hello refused and counted,
    the map bounded, and that credential said once until a minute passed
    (forgetting every credential at a bound said it again after each)."""
    clock = FakeClock()
    connections = Connections(StreamCaps(max_streams=1))
    connections.reserve(WorkerConnection(worker_id="w", credential=credential("holder"), handlers=frozenset({"echo"}),
                                         http=False, slots=1, connected_at=clock.now()))
    auth = _Auth()
    servicer = WorkerServicer(auth, connections, clock, server_id="s1")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    flood, said_noisy, hellos = MAX_KEYS + 500, 0, 0
    for n in range(flood):
        if n % 100 == 0:
            caplog.clear()
            code, details = await _pull(servicer, auth, "noisy")
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_worker_streams = 1" in details
            said_noisy += len(_warnings(caplog, "hellos refused by a cap so far"))
            hellos += 1
        await _pull(servicer, auth, f"rotated{n}")
        hellos += 1
    assert said_noisy == 1
    assert connections.refused == hellos  # every hello counted, said or not
    assert len(servicer.refusals) <= MAX_KEYS
    clock.advance(60)
    caplog.clear()
    await _pull(servicer, auth, "noisy")
    assert len(_warnings(caplog, "hellos refused by a cap so far")) == 1  # a minute on: said again


class _Liveness:
    def __init__(self, *, reattach_over: bool) -> None:
        self.reattach_over = reattach_over

    async def reattach(self, connection, held, *, listed_all: bool):
        if self.reattach_over:
            raise OverBudget(connection.credential.id, f"worker credential {connection.credential.id} over budget")
        return [], []

    def heartbeat(self, connection, keys) -> None:
        raise OverBudget(connection.credential.id, f"worker credential {connection.credential.id} over budget")

    def disconnected(self, connection) -> None:
        pass


def _gateway(*, reattach_over: bool) -> SimpleNamespace:
    return SimpleNamespace(liveness=_Liveness(reattach_over=reattach_over), wake=lambda: None)


async def test_hellos_refused_by_the_budget_say_one_warning_a_credential_a_minute(caplog) -> None:
    clock = FakeClock()
    auth = _Auth()
    servicer = WorkerServicer(auth, Connections(), clock, server_id="s1", gateway=_gateway(reattach_over=True))
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    for who in ["greedy"] * 50 + ["other"] * 50:
        code, details = await _pull(servicer, auth, who)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "over budget" in details
    said = _warnings(caplog, "over budget")
    assert said == ["worker w refused: worker credential greedy over budget",
                    "worker w refused: worker credential other over budget"]
    assert len([r for r in caplog.records if "over budget" in r.getMessage()]) == 100  # the rest DEBUG
    clock.advance(60)
    await _pull(servicer, auth, "greedy")
    assert len(_warnings(caplog, "over budget")) == 3


async def test_streams_ended_over_budget_say_one_warning_a_credential_a_minute(caplog) -> None:
    """A heartbeat listing what the stream does not hold, past the budget:
    each stream ended RESOURCE_EXHAUSTED, one WARNING for the credential."""
    clock = FakeClock()
    auth = _Auth()
    connections = Connections()
    servicer = WorkerServicer(auth, connections, clock, server_id="s1", gateway=_gateway(reattach_over=False))
    beat = worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat(
        executions=[worker_pb2.ExecutionProgress(execution_id="nope:1", delivery=1)]))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    for _ in range(20):
        code, details = await _pull(servicer, auth, "greedy", beat)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "over budget" in details
    assert _warnings(caplog, "over budget") == ["worker w: worker credential greedy over budget"]
    assert connections.held_by("greedy") == (0, 0)


async def test_streams_ended_by_a_second_hello_say_one_warning_a_credential_a_minute(caplog) -> None:
    clock = FakeClock()
    auth = _Auth()
    connections = Connections()
    servicer = WorkerServicer(auth, connections, clock, server_id="s1")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    for who in ["chatty"] * 20 + ["other"] * 20:
        code, details = await _pull(servicer, auth, who, HELLO)
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "hello" in details
    assert _warnings(caplog, "second hello") == ["worker w sent a second hello: its stream is ended"] * 2
    assert connections.held_by("chatty") == (0, 0)
    clock.advance(60)
    await _pull(servicer, auth, "chatty", HELLO)
    assert len(_warnings(caplog, "second hello")) == 3


class _InDoubt(_Liveness):
    """This server's session is in doubt: every re-attachment refused (``gateway.liveness``)."""

    def __init__(self) -> None:
        super().__init__(reattach_over=False)

    async def reattach(self, connection, held, *, listed_all: bool):
        raise Unavailable("server session s1 is in doubt: cannot re-attach executions now; say hello again "
                          "shortly or to another server")


async def test_hellos_refused_while_the_session_is_in_doubt_say_one_line_without_traceback(caplog) -> None:
    """A worker saying hello again and again while this server's session is
    in doubt: each hello refused UNAVAILABLE with the reason; the log says
    one WARNING line a credential a minute, no traceback (a refusal, not a
    defect), the rest DEBUG."""
    clock = FakeClock()
    auth = _Auth()
    servicer = WorkerServicer(auth, Connections(), clock, server_id="s1",
                              gateway=SimpleNamespace(liveness=_InDoubt(), wake=lambda: None))
    caplog.set_level(logging.DEBUG)
    for _ in range(20):
        code, details = await _pull(servicer, auth, "wc")
        assert code == grpc.StatusCode.UNAVAILABLE and "is in doubt" in details
    assert [r.exc_info for r in caplog.records if r.exc_info] == []
    said = _warnings(caplog, "in doubt")
    assert said == ["worker w refused, to say hello again: server session s1 is in doubt: cannot re-attach "
                    "executions now; say hello again shortly or to another server"]
    assert len([r for r in caplog.records if "in doubt" in r.getMessage()]) == 20  # the rest DEBUG
    clock.advance(60)
    await _pull(servicer, auth, "wc")
    assert len(_warnings(caplog, "in doubt")) == 2
