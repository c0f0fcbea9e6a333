"""Every loop that retries through an outage of the store or etcd logs it as
an outage (telemetry/outages.py): the first failure at once with its cause,
then at most a line a minute however often it retries, and its recovery
once with how long it lasted; no traceback, no ERROR.

Each loop below runs against a lease store (or a store) that is down for
ten minutes of a fake clock, moved in half-second steps: the loops retry
tens or hundreds of times meanwhile, where each try was a WARNING line
before."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import pytest

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel.shared.clock import FakeClock
from tickwheel_server.alerts.watch import AlertWatch
from tickwheel_server.app import TickwheelServer
from tickwheel_server.cluster.drain import Drainer
from tickwheel_server.cluster.presence import Presence, ServerRecord
from tickwheel_server.cluster.revocations import Revocations
from tickwheel_server.config import ServerConfig
from tickwheel_server.dispatcher.ownership_fence import EpochFence
from tickwheel_server.dispatcher.ownership_view import OwnershipView
from tickwheel_server.dispatcher.wakeup import Wakeup
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.gateway.results import ResultQueue
from tickwheel_server.lease.types import LeaseStoreUnavailable
from tickwheel_server.store.errors import StoreUnavailableError
from tickwheel_server.telemetry.outages import STILL_EVERY

DOWN_FOR = 600.0
"""Seconds of the fake clock each dependency stays down."""
STEP = 0.5
ETCD_DOWN = "etcd 127.0.0.1:2379: connection refused"
STORE_DOWN = 'connection to server at "127.0.0.1", port 5432 failed: Connection refused'


class _Blocked:
    """A watch that is established and then delivers nothing."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info):
        return None

    def __aiter__(self):
        return self

    async def __anext__(self):
        await asyncio.get_running_loop().create_future()  # until cancelled


class _Refused:
    def __init__(self, leases: "DownLeases") -> None:
        self._leases = leases

    async def __aenter__(self):
        self._leases.refused()

    async def __aexit__(self, *exc_info):
        return None


class DownLeases:
    """An etcd that refuses every call while ``down``; once up, an empty one."""

    def __init__(self) -> None:
        self.down = True
        self.failures = 0

    def refused(self) -> None:
        if self.down:
            self.failures += 1
            raise LeaseStoreUnavailable(ETCD_DOWN)

    async def put(self, key, value, *, session=None) -> int:
        self.refused()
        return 2

    async def get_prefix(self, prefix):
        self.refused()
        return []

    async def current_revision(self) -> int:
        self.refused()
        return 1

    async def open_session(self, ttl, *, keepalive=True):
        self.refused()
        return SimpleNamespace(id=7, ttl=ttl, lost=asyncio.Event(), renewals=0, close=_nothing)

    def watch(self, key, *, prefix=False, start_revision=None):
        return _Refused(self) if self.down else _Blocked()


async def _nothing(*_args, **_kwargs) -> None:
    return None


def store_down() -> StoreUnavailableError:
    return StoreUnavailableError(STORE_DOWN, attempts=10)


async def _turns() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def ride_out(
    caplog: pytest.LogCaptureFixture,
    clock: FakeClock,
    component: str,
    loop: Awaitable[object],
    failures: Callable[[], int],
    come_back: Callable[[], None],
    *,
    outage: str,
    cause: str,
    least: int,
    first_after: float = 0.0,
) -> None:
    """Run ``loop`` through DOWN_FOR seconds of an outage, then ``come_back``;
    ``component``'s lines: one WARNING at the first failure naming the
    cause, at most one more a minute, one INFO recovery; nothing else above
    DEBUG, no traceback."""
    caplog.set_level(logging.DEBUG)
    prefix = f"{component}: "
    task = asyncio.ensure_future(loop)
    try:
        await _turns()
        if first_after:
            clock.advance(first_after)
            await _turns()
        assert failures() >= 1, "the loop met the outage at once"
        first = [r for r in caplog.records if r.getMessage().startswith(prefix) and r.levelno >= logging.INFO]
        assert len(first) == 1 and first[0].levelno == logging.WARNING, "the first failure is logged at once"
        assert f"{outage} unavailable: {cause}" in first[0].getMessage()
        for _ in range(int(DOWN_FOR / STEP)):
            clock.advance(STEP)
            await _turns()
        assert failures() >= least, f"only {failures()} retries in {DOWN_FOR:.0f} s"
        come_back()
        for _ in range(int(60 / STEP)):
            clock.advance(STEP)
            await _turns()
            if any(r.getMessage().startswith(f"{prefix}recovered after") for r in caplog.records):
                break
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    mine = [r for r in caplog.records if r.getMessage().startswith(prefix)]
    warnings = [r for r in mine if r.levelno == logging.WARNING]
    assert 1 <= len(warnings) <= 1 + DOWN_FOR / STILL_EVERY + 1, [r.getMessage() for r in warnings]
    assert all(r.getMessage().startswith(f"{prefix}still failing for ") for r in warnings[1:])
    recovered = [r for r in mine if r.levelno == logging.INFO]
    assert len(recovered) == 1 and recovered[0].getMessage().startswith(f"{prefix}recovered after ")
    assert int(recovered[0].getMessage().split("after ")[1].split(" s")[0]) >= DOWN_FOR
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [r for r in caplog.records if r.exc_info], "no traceback for an outage"
    assert failures() > 5 * len(warnings), "fewer lines than tries: that is the point"


async def test_presence_logs_an_etcd_outage_once_and_its_end(caplog) -> None:
    clock, leases = FakeClock(), DownLeases()
    session = SimpleNamespace(lost=asyncio.Event())
    record = ServerRecord(server_id="s1", address="127.0.0.1:1", version="test")
    presence = Presence(leases, lambda: session, clock, lambda: record, interval=1.0)

    await ride_out(caplog, clock, "presence", presence.run(), lambda: leases.failures,
                   lambda: setattr(leases, "down", False),
                   outage="etcd", cause=f"LeaseStoreUnavailable: {ETCD_DOWN}", least=300, first_after=1.0)


async def test_drain_requests_log_an_etcd_outage_once_and_its_end(caplog) -> None:
    clock, leases = FakeClock(), DownLeases()
    drainer = Drainer(SimpleNamespace(), Connections(), leases, lambda: None, clock, server_id="s1")
    await ride_out(caplog, clock, "drain requests", drainer.run(), lambda: leases.failures,
                   lambda: setattr(leases, "down", False),
                   outage="etcd", cause=f"LeaseStoreUnavailable: {ETCD_DOWN}", least=300)


async def test_the_wake_key_logs_an_etcd_outage_once_and_its_end(caplog) -> None:
    clock, leases = FakeClock(), DownLeases()
    holders = SimpleNamespace(server_id="s1", wake_key=lambda server_id: f"/tw/wake/{server_id}")
    wakeup = Wakeup(leases, holders, clock, local=lambda: None, session=lambda: None, within=1.0)
    await ride_out(caplog, clock, "wake key", wakeup.follow(), lambda: leases.failures,
                   lambda: setattr(leases, "down", False),
                   outage="etcd", cause=f"LeaseStoreUnavailable: {ETCD_DOWN}", least=55)


async def test_revocations_log_an_etcd_outage_once_and_its_end(caplog) -> None:
    clock, leases = FakeClock(), DownLeases()

    async def recheck(_ids) -> int:
        return 0

    revocations = Revocations(leases, clock, server_id="s1", forget=lambda _r: 0, forget_all=lambda: None,
                              recheck=recheck)
    await ride_out(caplog, clock, "revocations", revocations.follow(), lambda: leases.failures,
                   lambda: setattr(leases, "down", False),
                   outage="etcd", cause=f"LeaseStoreUnavailable: {ETCD_DOWN}", least=55)


async def test_the_ownership_view_logs_an_etcd_outage_once_and_its_end(caplog) -> None:
    clock, leases = FakeClock(), DownLeases()
    view = OwnershipView(leases, clock, key_prefix="/tw/", partition_count=4, changed=lambda: None,
                         holders_read=lambda _created, _revision: None, holder_deleted=lambda _p, _r: None)
    await ride_out(caplog, clock, "ownership view of /tw/members/", view.follow_members(), lambda: leases.failures,
                   lambda: setattr(leases, "down", False),
                   outage="etcd", cause=f"LeaseStoreUnavailable: {ETCD_DOWN}", least=55)


async def test_reopening_a_lost_session_logs_an_etcd_outage_once_and_its_end(caplog) -> None:
    clock, leases = FakeClock(), DownLeases()
    server = TickwheelServer(ServerConfig(store="sqlite://", etcd="memory", admin_token="x" * 16), clock=clock,
                             lease_store=leases)
    try:
        backoff = BackoffSleeper(clock, initial=0.2, cap=server.config.session_ttl / 2)
        await ride_out(caplog, clock, "etcd session", server._reopen_session(backoff), lambda: leases.failures,
                       lambda: setattr(leases, "down", False),
                       outage="etcd", cause=f"LeaseStoreUnavailable: {ETCD_DOWN}", least=55)
        assert server._session is not None and server._session.id == 7
    finally:
        server.metrics.close()
        server.tracing.close()


async def test_the_restamp_logs_a_store_outage_once_and_its_end(caplog) -> None:
    clock = FakeClock()
    tries: list[tuple[str, str]] = []
    down = [True]

    async def restamp(old: str, new: str) -> int:
        tries.append((old, new))
        if down[0]:
            raise store_down()
        return 3

    server = TickwheelServer(ServerConfig(store="sqlite://", etcd="memory", admin_token="x" * 16), clock=clock)
    server.stores = SimpleNamespace(queue=SimpleNamespace(requeues=SimpleNamespace(restamp=restamp)))
    try:
        await ride_out(caplog, clock, "re-stamp", server._restamp("aa", "bb"), lambda: len(tries),
                       lambda: down.__setitem__(0, False),
                       outage="store", cause=f"StoreUnavailableError: {STORE_DOWN}", least=55)
        assert set(tries) == {("aa", "bb")}
        assert any(r.getMessage() == "re-stamped 3 running executions from session aa to bb" for r in caplog.records)
    finally:
        server.metrics.close()
        server.tracing.close()


class _AlertStore:
    """What AlertWatch.run reads of an AlertStore, numbering failing while ``down``."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.closed = False
        self.changed_event = asyncio.Event()
        self.down = True
        self.tries = 0

    async def sequence(self) -> int:
        self.tries += 1
        if self.down:
            raise store_down()
        return 0

    async def wait_for(self, _changed) -> None:
        await self.clock.sleep(1.0)


async def test_alert_numbering_logs_a_store_outage_once_and_its_end(caplog) -> None:
    clock = FakeClock()
    store = _AlertStore(clock)
    watch = AlertWatch(store)  # type: ignore[arg-type]
    await ride_out(caplog, clock, "alert numbering", watch.run(), lambda: store.tries,
                   lambda: setattr(store, "down", False),
                   outage="store", cause=f"StoreUnavailableError: {STORE_DOWN}", least=300)


async def test_result_recording_logs_a_store_outage_once_and_loses_nothing(caplog) -> None:
    clock = FakeClock()
    written: list[str] = []
    tries = [0]
    down = [True]

    async def apply(items) -> None:
        tries[0] += 1
        if down[0]:
            raise store_down()
        written.extend(result for _connection, result in items)

    async def refuse(item, error) -> None:
        raise AssertionError(f"{item} refused: {error}")

    queue: ResultQueue[str, str] = ResultQueue(apply, clock, refuse=refuse, retry_delay=1.0)
    await queue.submit("w1", ["r1", "r2"])
    await ride_out(caplog, clock, "result recording", queue.run(), lambda: tries[0],
                   lambda: down.__setitem__(0, False),
                   outage="store", cause=f"StoreUnavailableError: {STORE_DOWN}", least=300)
    assert written == ["r1", "r2"]  # nothing accepted is lost


async def test_epoch_raises_log_a_store_outage_once_and_name_a_bounded_list(caplog) -> None:
    clock = FakeClock()
    tries = [0]
    down = [True]

    class Partitions:
        async def raise_epochs(self, epochs, server_id):
            tries[0] += 1
            if down[0]:
                raise store_down()
            return list(epochs)

    fence = EpochFence(Partitions(), DownLeases(), "s1", clock)  # type: ignore[arg-type]
    won = {p: SimpleNamespace(fencing_revision=10 + p) for p in range(4096)}

    async def every_tick() -> None:
        while True:
            await fence.raise_epochs(won)
            await clock.sleep(1.0)

    await ride_out(caplog, clock, "partition epochs", every_tick(), lambda: tries[0],
                   lambda: down.__setitem__(0, False),
                   outage="store", cause=f"StoreUnavailableError: {STORE_DOWN}", least=300)
    longest = max(len(r.getMessage()) for r in caplog.records if r.getMessage().startswith("partition epochs"))
    assert longest < 500, "4096 partitions are not listed in a line"


async def test_a_conflict_past_the_retries_is_still_a_warning_each_time_without_traceback(caplog) -> None:
    """``retryable``: not an outage (no rate limit, no recovery line), not a defect (no traceback)."""
    from tickwheel_server.store.errors import TransactionConflictError

    clock = FakeClock()
    down = [True]

    async def apply(items) -> None:
        raise TransactionConflictError("40001 on every attempt", attempts=5)

    async def refuse(item, error) -> None:
        raise AssertionError(f"{item} refused: {error}")

    queue: ResultQueue[str, str] = ResultQueue(apply, clock, refuse=refuse, retry_delay=1.0)
    await queue.submit("w1", ["r1"])
    caplog.set_level(logging.DEBUG)
    task = asyncio.ensure_future(queue.run())
    try:
        for _ in range(3):
            await _turns()
            clock.advance(1.0)
        await _turns()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert down[0]
    lines = [r for r in caplog.records if r.getMessage().startswith("result recording:")]
    assert len(lines) >= 3 and all(r.levelno == logging.WARNING and not r.exc_info for r in lines)
    assert "TransactionConflictError: 40001 on every attempt" in lines[0].getMessage()
    assert queue.pending == 1  # kept, not refused



@pytest.fixture
def monotonic(monkeypatch):
    """``time.monotonic`` moved by hand: the metrics and the console log by it."""
    import time

    now = [5000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


async def test_store_gauges_failing_at_every_scrape_log_the_outage_once(caplog, monotonic) -> None:
    from tickwheel_server.telemetry.metrics import Metrics

    metrics = Metrics()
    down = [True]
    tries = [0]

    async def refresh() -> None:
        tries[0] += 1
        if down[0]:
            raise store_down()

    metrics.before_scrape(refresh)
    caplog.set_level(logging.DEBUG)
    try:
        for _ in range(600):  # a scrape every 15 s for two and a half hours
            await metrics.refresh()
            monotonic[0] += 15.0
        down[0] = False
        await metrics.refresh()
    finally:
        metrics.close()
    mine = [r for r in caplog.records if r.getMessage().startswith("metrics: ") and r.levelno >= logging.INFO]
    warnings = [r for r in mine if r.levelno == logging.WARNING]
    assert len(warnings) <= 1 + 600 * 15 / STILL_EVERY
    assert f"store unavailable: StoreUnavailableError: {STORE_DOWN}" in warnings[0].getMessage()
    assert mine[-1].levelno == logging.INFO and mine[-1].getMessage().startswith("metrics: recovered after 9000 s")
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_console_requests_refused_in_an_outage_log_one_line_not_one_each(caplog, monotonic) -> None:
    from tickwheel_server.web.api import json_endpoint

    down = [True]

    class Console:
        _starting = SimpleNamespace(done=True)  # started: the outage is the store's

        @json_endpoint
        async def jobs(self, request):
            if down[0]:
                raise store_down()
            return {"jobs": []}

    console = Console()
    caplog.set_level(logging.DEBUG)
    for n in range(1000):  # a client polling hard, paths of its choosing
        answer = await console.jobs(SimpleNamespace(path=f"/api/jobs?x={n}"))
        assert answer.status == 503
        monotonic[0] += 0.01
    down[0] = False
    assert (await console.jobs(SimpleNamespace(path="/api/jobs"))).status == 200
    mine = [r for r in caplog.records if r.getMessage().startswith("console jobs: ")]
    assert [r.levelno for r in mine if r.levelno >= logging.INFO] == [logging.WARNING, logging.INFO]
    assert "answered 503" in mine[0].getMessage() and "/api/jobs?x=" not in caplog.text
