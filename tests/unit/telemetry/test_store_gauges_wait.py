"""The store gauges' reads are bounded per scrape: a read the store holds up
(a table locked) goes on alone, the scrape answers with the last figures
after ``wait`` and reports it as a store outage; one read at a time however
many scrapes come; the figures are new once it ends."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import SystemClock
from tickwheel_server.store.errors import StoreUnavailableError
from tickwheel_server.store.operations import TenantQueue
from tickwheel_server.telemetry.gauges import StoreGauges


class HeldStore:
    """A GaugeStore whose queue read waits until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reads = 0

    async def queues(self, now: datetime, top: int) -> list[TenantQueue]:
        self.reads += 1
        await self.release.wait()
        return [TenantQueue(tenant="acme", ready=3, running=0, oldest_ready_at=now)]

    async def dead_letters(self) -> int:
        return 2

    async def open_alerts(self) -> dict[str, int]:
        return {"late": 1}


async def test_a_held_read_does_not_hold_the_scrape_nor_start_another() -> None:
    engine = sa.create_engine("sqlite://")
    gauges = StoreGauges(engine, SystemClock(), wait=0.05)
    store = gauges._store = HeldStore()
    for _ in range(3):
        with pytest.raises(StoreUnavailableError, match="has not answered the gauges' reads"):
            await asyncio.wait_for(gauges.refresh(), 10)  # bounded: a regression fails, not hangs
    assert store.reads == 1 and gauges.queues == [] and gauges.dead_letters == 0
    store.release.set()
    await gauges.refresh()
    assert store.reads == 1 and gauges.queues == [({"tenant": "acme"}, 3.0)] and gauges.dead_letters == 2
    engine.dispose()
