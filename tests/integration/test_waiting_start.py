"""A start that waits (tickwheel_server/waiting.py), in process, against a
real etcd the tests stop and start:

- etcd gone between the start's wait for it and the steps after the port
  is bound (publishing this server's record): the start waits again, its
  health NOT_SERVING on the port it bound and worker streams refused with
  UNAVAILABLE, then serves once etcd is back; no crash, no half start;
- every SchedulerService and AdminService method, and the console's
  ``/api/``, is refused in that window (UNAVAILABLE, 503) with the same
  "starting: waiting for etcd at …" message, whoever calls and whatever
  the request, nothing written; health and reflection answer; a CreateJob
  the Python client sent in the window is retried and stored once the
  start is done, exactly once;
- a worker (the worker library) pulling from a server that still waits
  gets UNAVAILABLE saying what the server waits for, retries with backoff
  (one WARNING line, its retries DEBUG), and pulls normally (a job runs)
  once the server is up;
- a store URL's password (holding ``@``, ``:`` and ``%40``) appears in no
  log line and no refusal of a start that waits for that store;
- a start that fails after its etcd session opened revokes the session as
  it returns (its keys gone at once), and a revoke that fails is one line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import signal
from datetime import datetime, timezone

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tickwheel import AsyncClient, builders
from tickwheel import RetryOptions
from tickwheel.shared.clock import SystemClock
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2

from tests.integration.test_ssrf import wait_finished
from tests.support.reflection_v1 import list_services_v1
from tests.support.etcd import EtcdServer
from tests.support.server import running_server
from tickwheel_server.app import TickwheelServer
from tickwheel_server.cluster.presence import Presence
from tickwheel_server.config import ServerConfig
from tickwheel_server.lease import open_lease_store
from tickwheel_server.lease.etcd_transport import Transport
from tickwheel_server.lease.keys import ROOT
from tickwheel_server.store.engine import parse_store_url
from tickwheel_server.store.errors import StoreConfigError
from tickwheel_server.waiting import WaitingForDependencies
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig, register_builtins

WAIT = 60.0
SERVICES = ["", "tickwheel.v1.SchedulerService", "tickwheel.v1.WorkerService", "tickwheel.v1.AdminService"]
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVING = health_pb2.HealthCheckResponse.SERVING


class Lines(logging.Handler):
    """Every log line, formatted as the server's log would show it (message
    and traceback); ``seen`` is set each time one arrives."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(levelname)s %(name)s: %(message)s").format(record))
        self.seen.set()

    async def until(self, needle: str, times: int = 1) -> None:
        """Until ``needle`` is in ``times`` lines (a worker's or server's retries: nothing else to await)."""
        async with asyncio.timeout(WAIT):
            while sum(needle in line for line in self.lines) < times:
                self.seen.clear()
                await self.seen.wait()

    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def lines():
    handler = Lines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def config_for(store: str, etcd: str, token: str) -> ServerConfig:
    return ServerConfig(store=store, etcd=etcd, admin_token=token, listen="127.0.0.1:0", migrate=True,
                        shutdown_grace=1.0, session_ttl=5)


async def health(port: int) -> list[int]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return [(await stub.Check(health_pb2.HealthCheckRequest(service=s), timeout=10)).status for s in SERVICES]


async def tenant_and_worker_credential(store: str, etcd: str) -> tuple[str, str]:
    """An API key and a worker credential of tenant acme, made on a server started and stopped for it."""
    async with running_server(store, etcd) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            secret = (await admin.admin.issue_worker_credential(["acme"])).credential.secret
    return api_key, secret


def echo_worker(port: int, secret: str) -> Worker:
    registry = HandlerRegistry()
    register_builtins(registry)
    return Worker(WorkerConfig(
        address=f"127.0.0.1:{port}", credential=secret, handlers=registry, http=False,
        reconnect_initial_backoff=0.2, reconnect_max_backoff=1.0,
    ))  # fmt: skip


async def runs_a_job(port: int, api_key: str) -> None:
    async with AsyncClient(f"127.0.0.1:{port}", api_key) as client:
        job = builders.once_job("echo", datetime.now(timezone.utc), handler="echo")
        execution = await wait_finished(client, (await client.create_job(job)).job.id)
    assert execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED


async def wind_up(server: TickwheelServer, starting: asyncio.Task, worker: Worker | None,
                  pulling: asyncio.Task | None) -> None:
    """Stop the worker, then the server if its start ended well, else the start."""
    if worker is not None and pulling is not None:
        await worker.stop(1.0)
        await asyncio.gather(pulling, return_exceptions=True)
    if starting.done() and not starting.cancelled() and starting.exception() is None:
        await server.stop(0.5)
    else:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)


def etcd_goes_before_the_first_publish(monkeypatch, etcd_server: EtcdServer) -> list[bool]:
    """The first publish of a start (its port bound, its partitions taken):
    etcd is killed just before it. The list holds True once it was."""
    publish = Presence.publish
    killed: list[bool] = []

    async def publish_once_etcd_went(self) -> bool:
        if not killed:
            killed.append(True)
            await asyncio.to_thread(etcd_server.stop, signal.SIGKILL)
        return await publish(self)

    monkeypatch.setattr(Presence, "publish", publish_once_etcd_went)
    return killed


pytestmark = [pytest.mark.etcd, pytest.mark.slow]


async def test_etcd_gone_after_the_port_is_bound_is_waited_for(tmp_path, etcd_server: EtcdServer, lines,
                                                               monkeypatch) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    api_key, secret = await tenant_and_worker_credential(store, etcd_server.endpoint)
    killed = etcd_goes_before_the_first_publish(monkeypatch, etcd_server)
    server = TickwheelServer(config_for(store, etcd_server.endpoint, "twa_" + "y" * 32))
    starting = asyncio.create_task(server.start())
    worker = pulling = None
    try:
        async with asyncio.timeout(WAIT):
            await server.waiting.wait()
        assert killed and not starting.done()
        port = server.waiting_port
        assert port == server.port  # the real server's port: no placeholder beside it
        assert server.waiting_for == f"etcd at {etcd_server.endpoint}"
        assert await health(port) == [NOT_SERVING] * len(SERVICES)  # not the servicer's default SERVING
        await lines.until(f"waiting for etcd at {etcd_server.endpoint} (try 1): LeaseStoreUnavailable")
        assert f"health NOT_SERVING on port {port}" in lines.text()

        # A worker is told to come back, not taken in by a half-started server.
        worker = echo_worker(port, secret)
        pulling = asyncio.create_task(worker.run())
        await lines.until(f"failed: UNAVAILABLE: starting: waiting for etcd at {etcd_server.endpoint}", 2)
        assert not worker.connected.is_set()
        assert not starting.done()

        await asyncio.to_thread(etcd_server.start)
        async with asyncio.timeout(WAIT):
            await starting
        assert server.waiting_for == ""
        assert await health(port) == [SERVING] * len(SERVICES)
        async with asyncio.timeout(WAIT):
            await worker.connected.wait()
        await runs_a_job(port, api_key)
        assert re.search(r"etcd at \S+ answers after \d+ failed tries", lines.text())
        assert "Traceback" not in lines.text()
    finally:
        await wind_up(server, starting, worker, pulling)


async def test_a_worker_pulling_from_a_waiting_server_retries_then_pulls(tmp_path, etcd_server: EtcdServer,
                                                                         lines) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    api_key, secret = await tenant_and_worker_credential(store, etcd_server.endpoint)
    etcd_server.stop(signal.SIGKILL)
    server = TickwheelServer(config_for(store, etcd_server.endpoint, "twa_" + "z" * 32))
    starting = asyncio.create_task(server.start())
    worker = pulling = None
    try:
        async with asyncio.timeout(WAIT):
            await server.waiting.wait()
        port = server.waiting_port
        worker = echo_worker(port, secret)
        pulling = asyncio.create_task(worker.run())
        refused = f"stream to 127.0.0.1:{port}: connecting failed: UNAVAILABLE: starting: waiting for etcd at {etcd_server.endpoint}"
        await lines.until(refused, 3)  # retried, with backoff: the worker does not give up
        assert not worker.connected.is_set() and not pulling.done()
        told = [line for line in lines.lines if line.startswith("WARNING tickwheel_worker")]
        assert told == [f"WARNING tickwheel_worker.runtime: stream to 127.0.0.1:{port}: connecting failed, server "
                        f"unavailable: UNAVAILABLE: starting: waiting for etcd at {etcd_server.endpoint}; reconnecting"]
        assert not starting.done()

        await asyncio.to_thread(etcd_server.start)
        async with asyncio.timeout(WAIT):
            await starting
        assert server.address == f"127.0.0.1:{port}"  # where it waited
        async with asyncio.timeout(WAIT):
            await worker.connected.wait()
        await runs_a_job(port, api_key)
        assert "Traceback" not in lines.text()
        assert not [line for line in lines.lines if line.startswith(("ERROR", "CRITICAL"))]
    finally:
        await wind_up(server, starting, worker, pulling)


API_METHODS = [
    f"/{service.full_name}/{method.name}"
    for service in (scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"],
                    admin_pb2.DESCRIPTOR.services_by_name["AdminService"])
    for method in service.methods
]


async def refused_in_the_window(port: int, method: str, metadata, expected: str) -> None:
    """``method`` called with an empty request (every field default) and
    with bytes that are no message: UNAVAILABLE ``expected``, both."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        for raw in (b"", b"\xff\xff\xff"):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                if method.endswith("/WatchAlerts"):
                    async for _ in channel.unary_stream(method)(raw, metadata=metadata, timeout=10):
                        pass
                else:
                    await channel.unary_unary(method)(raw, metadata=metadata, timeout=10)
            assert (refused.value.code(), refused.value.details()) == (grpc.StatusCode.UNAVAILABLE, expected), method


async def http_get(url: str, key: str) -> tuple[int, str, dict]:
    import json
    import urllib.error
    import urllib.request

    def get() -> tuple[int, str, dict]:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers.get("Retry-After", ""), json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Retry-After", ""), json.loads(error.read())

    return await asyncio.to_thread(get)


async def test_the_api_answers_nothing_until_the_start_is_done(tmp_path, etcd_server: EtcdServer, monkeypatch) -> None:
    """etcd gone just before the start publishes this server's record (the
    port bound, partitions taken): every Scheduler and Admin method is
    refused UNAVAILABLE "starting: waiting for etcd at …" (with a tenant
    key, the admin token or no credential; a request that is no message
    too), the console's /api/ 503 with Retry-After; nothing is written;
    health and reflection answer. A CreateJob the Python client sends in
    the window is retried until the start is done, then stored once; its
    request id sent again finds that job."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    api_key, _secret = await tenant_and_worker_credential(store, etcd_server.endpoint)
    etcd_goes_before_the_first_publish(monkeypatch, etcd_server)
    refusals = asyncio.Queue()
    refusal = WaitingForDependencies.refusal

    def counted(self) -> str:
        refusals.put_nowait(None)
        return refusal(self)

    monkeypatch.setattr(WaitingForDependencies, "refusal", counted)
    token = "twa_" + "s" * 32
    config = dataclasses.replace(config_for(store, etcd_server.endpoint, token), http_listen="127.0.0.1:0")
    server = TickwheelServer(config)
    starting = asyncio.create_task(server.start())
    creating = client = None
    try:
        async with asyncio.timeout(WAIT):
            await server.waiting.wait()
        port = server.port
        expected = f"starting: waiting for etcd at {etcd_server.endpoint}"
        for metadata in ((("authorization", f"Bearer {api_key}"),), (("authorization", f"Bearer {token}"),), ()):
            for method in API_METHODS:
                await refused_in_the_window(port, method, metadata, expected)
        for path in ("api/session", "api/jobs", "api/cluster"):
            for key in (api_key, token):
                assert await http_get(server.http.url + path, key) == (
                    503, "1", {"error": {"code": 503, "message": expected}}
                ), path
        assert await health(port) == [NOT_SERVING] * len(SERVICES)
        assert "tickwheel.v1.SchedulerService" in await list_services_v1(f"127.0.0.1:{port}")

        # A create sent now: refused, retried by the client, nothing stored meanwhile.
        client = AsyncClient(f"127.0.0.1:{port}", api_key, timeout=WAIT,
                             retries=RetryOptions(max_attempts=1000, initial_backoff=0.05, max_backoff=0.2))
        job = builders.once_job("in-the-window", datetime(2099, 1, 1, tzinfo=timezone.utc), handler="echo")
        while not refusals.empty():
            refusals.get_nowait()
        creating = asyncio.create_task(client.create_job(job, request_id="in-the-window-1"))
        for _ in range(3):  # refused three times at least: retried, not given up
            async with asyncio.timeout(WAIT):
                await refusals.get()
        assert not creating.done()
        assert await server.stores.jobs.list("acme", after_id="", limit=10) == []
        assert not starting.done()

        await asyncio.to_thread(etcd_server.start)
        async with asyncio.timeout(WAIT):
            await starting
            created = (await creating).job
        again = (await client.create_job(job, request_id="in-the-window-1")).job
        listed = await client.list_jobs()
        assert again.id == created.id
        assert [j.id for j in listed.jobs] == [created.id]
        status, _, body = await http_get(server.http.url + "api/session", api_key)
        assert (status, body) == (200, {"kind": "tenant", "tenant": "acme"})
        assert await health(port) == [SERVING] * len(SERVICES)
    finally:
        if creating is not None and not creating.done():
            creating.cancel()
            await asyncio.gather(creating, return_exceptions=True)
        if client is not None:
            await client.close()
        await wind_up(server, starting, None, None)


PASSWORD = "p@ss:w0rd%40x"
"""A password holding ``@``, ``:`` and ``%40``; in a URL: ``p%40ss%3Aw0rd%2540x``."""
ENCODED = "p%40ss%3Aw0rd%2540x"


@pytest.mark.parametrize("port", [1])
async def test_a_store_password_is_never_logged_by_a_start_that_waits(lines, port: int) -> None:
    """PostgreSQL is not listening there: the start waits for it, logging a
    line a try, and answers refusals naming the store; none of them, at any
    level, holds the password or a piece of it."""
    store = f"postgresql+psycopg://tw:{ENCODED}@127.0.0.1:{port}/tw"
    server = TickwheelServer(config_for(store, "memory", "twa_" + "w" * 32))
    starting = asyncio.create_task(server.start())
    try:
        await lines.until("waiting for the store at", 2)
        assert not starting.done()
        shown = f"postgresql+psycopg://tw:***@127.0.0.1:{port}/tw"
        assert f"waiting for the store at {shown} (try 1): StoreUnavailableError" in lines.text()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.waiting_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await admin_pb2_grpc.AdminServiceStub(channel).ClusterStatus(admin_pb2.ClusterStatusRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details() == f"starting: waiting for the store at {shown}"
        assert server.waiting_for == f"the store at {shown}"
    finally:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
    text = lines.text()
    for piece in (PASSWORD, ENCODED, "w0rd", "p@ss", "p%40ss", "%2540"):
        assert piece not in text, piece


def test_a_store_url_that_does_not_parse_names_no_piece_of_its_password() -> None:
    """The password not encoded: what follows its ``:`` reads as a port that
    is not a number; the refusal says how to write it, not what it is."""
    with pytest.raises(StoreConfigError) as refused:
        parse_store_url(f"postgresql+psycopg://tw:{PASSWORD}@127.0.0.1:1/tw")
    message = str(refused.value)
    assert message.startswith("store URL is not a URL: its port is not a number")
    assert "%40" in message  # how to write an @
    for piece in ("w0rd", "%40x", "ss:", "@127.0.0.1"):
        assert piece not in message, message


async def test_cluster_status_without_etcd_logs_the_outage_once_not_per_call(tmp_path, lines, monkeypatch) -> None:
    """A dashboard polling ClusterStatus while etcd cannot be read: each call
    answers (this server only); the log has one line, then its recovery."""
    from tickwheel_server.lease.types import LeaseStoreUnavailable

    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as running:
        presence = running.server.presence
        servers = presence.servers

        async def unreadable():
            raise LeaseStoreUnavailable("etcd 127.0.0.1:2379: connection refused")

        monkeypatch.setattr(presence, "servers", unreadable)
        async with AsyncClient(running.address, admin_token=running.admin_token) as admin:
            for _ in range(200):
                status = await admin.admin.cluster_status()
                assert [s.server_id for s in status.servers] == [running.server.server_id]
            monkeypatch.setattr(presence, "servers", servers)
            await admin.admin.cluster_status()
    mine = [line for line in lines.lines if "AdminService.ClusterStatus" in line and not line.startswith("DEBUG")]
    assert len(mine) == 2, mine
    assert mine[0].startswith("WARNING") and "reading etcd failed, etcd unavailable: LeaseStoreUnavailable" in mine[0]
    assert mine[1].startswith("INFO") and "recovered after" in mine[1] and "(200 failures)" in mine[1]


async def session_keys(endpoint: str, session_id: int) -> list[str]:
    """The keys etcd holds under ``session_id``'s lease, read from etcd itself."""
    reader = open_lease_store(endpoint, SystemClock())
    try:
        return [kv.key for kv in await reader.get_prefix(ROOT) if kv.lease == session_id]
    finally:
        await reader.close()


async def a_start_that_fails_once_published(server: TickwheelServer, monkeypatch, before=None) -> int:
    """Start ``server``; its first publish (the session is open, the port
    bound, partitions owned) fails with a defect, after ``before()``. The
    start's session id, once the start raised that defect."""
    opened: list[int] = []

    async def publish_fails(self) -> bool:
        opened.append(server._session.id)
        assert await session_keys(server.config.etcd, opened[0]), "the session holds no key yet: no test"
        if before is not None:
            await before()
        raise RuntimeError("a defect in the start")

    monkeypatch.setattr(Presence, "publish", publish_fails)
    with pytest.raises(RuntimeError, match="a defect in the start"):
        async with asyncio.timeout(WAIT):
            await server.start()
    return opened[0]


def gave_up_the_revoke_in_one_line(lines: Lines, session_id: int) -> None:
    """One WARNING line says the revoke of ``session_id`` was not done and
    its keys expire with its TTL. It is the failed start's ("no answer within
    ABANDON_REVOKE") or the session's (etcd refused the revoke: the session's
    keep-alives, unanswered, had its connection dialled again, and a frozen
    etcd fails a new connection fast), as the machine's load orders them."""
    told = [line for line in lines.lines if "revoke" in line and f"{session_id:x}" in line]
    assert len(told) == 1, told
    assert re.fullmatch(
        f"WARNING tickwheel.server: could not revoke etcd session {session_id:x} of the failed start "
        r"\(its keys expire with its TTL\): no answer within 0\.5 s"
        f"|WARNING tickwheel_server.lease.etcd_session: could not revoke lease {session_id:x} "
        r"\(its keys expire with its TTL\): .+", told[0]), told
    assert "Traceback" not in lines.text()


async def test_a_failed_start_revokes_its_session_at_once(tmp_path, etcd_server: EtcdServer, lines,
                                                          monkeypatch) -> None:
    """The keys of a start that failed after its session opened (its
    server record, the partitions it took) are gone as it returns, not a
    TTL later: another server takes those partitions at once."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    server = TickwheelServer(config_for(store, etcd_server.endpoint, "twa_" + "v" * 32))
    session_id = await a_start_that_fails_once_published(server, monkeypatch)
    assert await session_keys(etcd_server.endpoint, session_id) == []
    assert "could not revoke" not in lines.text()


async def test_a_failed_start_whose_revoke_fails_logs_it_once_and_raises_its_own_error(
    tmp_path, etcd_server: EtcdServer, lines, monkeypatch
) -> None:
    """etcd gone as the start fails: the revoke is given up within its bound,
    said in one WARNING line; the start raises the defect, not the revoke's
    error; the keys then expire with the session's TTL."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    server = TickwheelServer(config_for(store, etcd_server.endpoint, "twa_" + "u" * 32))

    async def etcd_goes() -> None:
        await asyncio.to_thread(etcd_server.stop, signal.SIGKILL)

    session_id = await a_start_that_fails_once_published(server, monkeypatch, etcd_goes)
    told = [line for line in lines.lines if "revoke" in line and f"{session_id:x}" in line]
    assert len(told) == 1 and told[0].startswith("WARNING"), told
    assert "expire with its TTL" in told[0]
    assert "Traceback" not in lines.text()


async def test_a_failed_start_gives_up_a_revoke_etcd_does_not_answer(tmp_path, etcd_server: EtcdServer, lines,
                                                                     monkeypatch) -> None:
    """etcd frozen (SIGSTOP) as the start fails: the revoke is given up
    within ABANDON_REVOKE, in one WARNING line, and the start raises its own
    error."""
    import tickwheel_server.app as app

    monkeypatch.setattr(app, "ABANDON_REVOKE", 0.5)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    server = TickwheelServer(config_for(store, etcd_server.endpoint, "twa_" + "t" * 32))

    async def etcd_freezes() -> None:
        await asyncio.to_thread(etcd_server.freeze)

    try:
        session_id = await a_start_that_fails_once_published(server, monkeypatch, etcd_freezes)
    finally:
        etcd_server.thaw()
    gave_up_the_revoke_in_one_line(lines, session_id)


async def test_a_failed_start_whose_lost_session_was_being_revoked_still_revokes_or_says_so(
    tmp_path, etcd_server: EtcdServer, lines, monkeypatch
) -> None:
    """etcd frozen long enough for the session to be lost before the start
    fails (a loaded machine): the session loop is revoking the lost lease
    when the failed start cancels it. That revoke is not dropped in silence:
    the failed start sends it again and, etcd still frozen, gives it up in
    one WARNING line."""
    import tickwheel_server.app as app

    monkeypatch.setattr(app, "ABANDON_REVOKE", 0.5)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    server = TickwheelServer(config_for(store, etcd_server.endpoint, "twa_" + "w" * 32))
    revoking = asyncio.Event()
    call = Transport.call

    async def call_seen(self, pick, request, what):
        if what == "lease revoke":
            revoking.set()
        return await call(self, pick, request, what)

    monkeypatch.setattr(Transport, "call", call_seen)

    async def etcd_freezes_until_the_session_is_lost() -> None:
        await asyncio.to_thread(etcd_server.freeze)
        await server._session.lost.wait()  # within its TTL: its renewals go unanswered
        await revoking.wait()  # the session loop revokes the lost lease, etcd does not answer

    try:
        session_id = await a_start_that_fails_once_published(server, monkeypatch,
                                                             etcd_freezes_until_the_session_is_lost)
    finally:
        etcd_server.thaw()
    gave_up_the_revoke_in_one_line(lines, session_id)
