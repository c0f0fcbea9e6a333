"""A server frozen in the middle of a claim does not hold its partitions
past its session: the claim's transaction may sit idle no longer than the
session TTL (docs/architecture.md, "Ownership", "A frozen claim"), however
large the configured ``store_idle_in_transaction_timeout`` and the store
URL's own ``idle_in_transaction_session_timeout``: the server's engine
starts every session with its limit as a ceiling, and the claim sets none
of its own.

Real PostgreSQL, the store's components in-process: the frozen server's
claim is stopped between its statements (after the epoch check and the due
scan, or handing out, after its tenants' and busy jobs' reads too, holding
their row locks, or skipping missed runs, at its alerts, its skip range
written, as a SIGSTOP or a VM stall would leave it),
with ``store_idle_in_transaction_timeout`` and its URL's option at 600 s; the successor raises the epochs as
its ownership loop would (again while a raise is refused), claims, and the
frozen claim is woken only then. Invariants: the partitions move while the
claim is still frozen, each due run becomes exactly one execution (the
successor's), the missed ones one skip range and one alert (the
successor's), and the woken claim writes nothing.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.alerts.catalogue import skipped_key
from tickwheel_server.config import ServerConfig
from tickwheel_server.store import create_store_engine
from tickwheel_server.store import claim_handout
from tickwheel_server.store import dispatch as dispatch_module
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.claim_handout import HandOutOffer
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.errors import StoreUnavailableError
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.fairshare import FairShare
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import executions, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.conformance.test_dispatch_claim import MINUTE, PARTITIONS, World, cron_job, once_job

pytestmark = pytest.mark.postgres

NOW = datetime(2027, 1, 1, 1, 0, tzinfo=timezone.utc)
SESSION_TTL = 2.0
"""The frozen server's session TTL: what bounds its claim's idle time."""
CONFIGURED_IDLE = 600.0
"""Its configured idle-in-transaction limit, and its URL's: far past anything this test waits for."""
WAIT = 120.0
"""How long the successor keeps raising: well under CONFIGURED_IDLE, so the old path cannot pass."""


def server_engine(url: str) -> sa.Engine:
    """The engine a server with these settings builds (``app.py``), over a
    URL whose options ask for a longer idle limit."""
    config = ServerConfig(store=url, etcd="http://127.0.0.1:2379", admin_token="x" * 16, session_ttl=int(SESSION_TTL),
                          store_idle_in_transaction_timeout=CONFIGURED_IDLE)
    longer = f"{url}{'&' if '?' in url else '?'}options=-c%20idle_in_transaction_session_timeout%3D{CONFIGURED_IDLE:.0f}s"
    return create_store_engine(longer, lock_timeout=config.store_lock_timeout,
                               idle_in_transaction_timeout=config.store_idle_limit)


FREEZE_POINTS = {
    "after the due scan": (dispatch_module, "definitions"),
    "after the hand-out's reads": (claim_handout, "share_out"),
    "at the claim's alerts": (AlertStore, "raise_many_in"),
}
"""Where a claim is stopped: at its definitions (after its epoch check and
due scan, one round trip), or, handing out, at the share-out (after its
tenants' and busy jobs' round trip as well), or, raising the ``skipped``
alert of a job whose missed runs it skips, at that alert (it once came
after the claim's pipelined writes, which left the transaction with no
idle limit)."""


class Freeze:
    """Stops the first claim that reaches ``point`` until :meth:`wake`, in its thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, point: str = "after the due scan") -> None:
        self.frozen = threading.Event()
        self._woken = threading.Event()
        self._once = threading.Lock()
        module, name = FREEZE_POINTS[point]
        real = getattr(module, name)

        def stopped(*args, **kwargs):
            if self._once.acquire(blocking=False):
                self.frozen.set()
                self._woken.wait()
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, stopped)

    def wake(self) -> None:
        self._woken.set()

    @property
    def woken(self) -> bool:
        return self._woken.is_set()


async def raise_until_taken(partitions: PartitionStore, epochs: dict[int, int], owner: str, freeze: Freeze) -> set[int]:
    """Raise as the ownership loop does (again after a refusal), for at most
    WAIT seconds; what the raise took. Fails if the frozen claim was woken."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        try:
            took = await partitions.raise_epochs(epochs, owner)
        except StoreUnavailableError:  # 55P03: the frozen claim still holds the rows
            if loop.time() > deadline:
                raise
            continue
        assert not freeze.woken
        return took


@pytest.mark.parametrize("point", sorted(FREEZE_POINTS))
async def test_a_frozen_claim_holds_its_partitions_no_longer_than_its_session(
    migrated_postgres_url: str, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    clock = FakeClock(NOW, autojump=True)  # retries' backoff on the fake clock
    frozen_engine, successor_engine = server_engine(migrated_postgres_url), server_engine(migrated_postgres_url)
    try:
        await TenantStore(successor_engine, clock).create(Tenant(name="acme"))
        old_epochs = {p: 1 for p in range(PARTITIONS)}
        new_epochs = {p: 2 for p in range(PARTITIONS)}
        await PartitionStore(successor_engine, clock).raise_epochs(old_epochs, "frozen")
        world = World(successor_engine, clock)
        skipping = point == "at the claim's alerts"
        if skipping:  # missed since 10 minutes: -2 min runs for the nine up to it, 8 skipped, -1 … +1 run
            job = await world.create(cron_job(), NOW - 10 * MINUTE)
            due = [NOW + k * MINUTE for k in (-2, -1, 0, 1)]
        else:
            job = await world.create(once_job(NOW), NOW)
            due = [NOW]

        freeze = Freeze(monkeypatch, point)
        frozen = DispatchStore(frozen_engine, clock, alerts=AlertStore(frozen_engine, clock) if skipping else None)
        offer = None
        if point == "after the hand-out's reads":
            offer = HandOutOffer("frozen", ((Capability(("acme",), ("echo",), True), 100),), FairShare(),
                                 lambda: None, lambda at_us: at_us)  # fmt: skip
        frozen_claim = asyncio.ensure_future(frozen.claim_due(old_epochs, NOW, offer=offer))
        successor_alerts = AlertStore(successor_engine, clock)
        try:
            assert await asyncio.to_thread(freeze.frozen.wait, WAIT), f"the claim never got {point}"

            took = await raise_until_taken(PartitionStore(successor_engine, clock), new_epochs, "successor", freeze)
            assert took == set(new_epochs), "the successor's raise took every partition while the claim was frozen"
            successor = DispatchStore(successor_engine, clock, alerts=successor_alerts)
            claimed = await successor.claim_due(new_epochs, NOW)
            assert sorted(e.id for e in claimed.executions) == sorted(execution_id(job.id, at) for at in due)
            assert not freeze.woken
        finally:
            freeze.wake()
            woken = await frozen_claim

        woke = (woken.executions, woken.jobs, woken.stale_partitions, woken.handed_out, woken.alerts_raised)
        assert woke == ([], 0, set(old_epochs), [], 0), (
            "the woken claim found its transaction ended and the successor's epochs"
        )
        with successor_engine.connect() as conn:
            rows = conn.execute(sa.select(executions.c.id, executions.c.due_at).where(executions.c.job_id == job.id)).all()
            ranges = conn.execute(sa.select(skips.c.count).where(skips.c.job_id == job.id)).scalars().all()
        assert sorted(tuple(row) for row in rows) == sorted((execution_id(job.id, at), to_us(at)) for at in due), (
            "exactly one execution a due run"
        )
        assert ranges == ([8] if skipping else []), "the missed runs skipped once, by the successor"
        alert = await successor_alerts.get(skipped_key(job.id))
        assert (alert and alert.count) == (1 if skipping else None), "one skipped alert, raised once"
    finally:
        frozen_engine.dispose()
        successor_engine.dispose()
