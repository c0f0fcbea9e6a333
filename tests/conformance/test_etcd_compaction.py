"""The etcd compactor (:mod:`tickwheel_server.maintenance.compaction`) on the
in-process lease store and a fake clock: one compactor per cluster, history
kept for the retention and compacted past it, another server taking over,
a compaction already made elsewhere, the NOSPACE alert, and its bounds."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.alerts.catalogue import ETCD_NOSPACE_KEY
from tickwheel_server.config import ConfigError, ServerConfig
from tickwheel_server.lease import WatchCompacted
from tickwheel_server.lease.keys import COMPACTION_KEY
from tickwheel_server.lease.memory import MemoryLeaseStore
from tickwheel_server.maintenance.compaction import CompactionConfig, EtcdCompaction
from tickwheel_server.store.alerts import AlertStore

RETENTION = timedelta(seconds=10)  # a pass every second


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def elapse(clock: FakeClock, seconds: float, leases: MemoryLeaseStore, key: str = "/busy") -> None:
    """Let ``seconds`` pass in steps of 0.5 s, a put at each (wake keys pouring in)."""
    for _ in range(math.ceil(seconds / 0.5)):
        await settle()
        await leases.put(key, "x")
        clock.advance(0.5)
    await settle()


async def test_one_compactor_per_cluster_keeps_the_retention_and_another_takes_over() -> None:
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    alerts = None  # the alarm's alert is the next test's; without SQL every step here is the event loop's
    sessions = [await leases.open_session(60), await leases.open_session(60)]
    duties = [
        EtcdCompaction(leases, lambda s=s: s, clock, alerts, server_id=f"s{i}", config=CompactionConfig(RETENTION))
        for i, s in enumerate(sessions)
    ]
    tasks = [asyncio.create_task(duty.run()) for duty in duties]
    try:
        start = await leases.current_revision()
        await elapse(clock, 5, leases)
        assert [d.leading for d in duties].count(True) == 1
        leader = 0 if duties[0].leading else 1
        assert (await leases.get(COMPACTION_KEY)).lease == sessions[leader].id
        assert duties[leader].compactions == 0  # nothing is older than the retention yet
        await elapse(clock, 5, leases)
        middle = await leases.current_revision()
        await elapse(clock, 4, leases)
        assert duties[leader].compactions >= 1 and duties[1 - leader].compactions == 0
        compacted = duties[leader].compacted_revision
        assert start < compacted <= middle  # compacted to what it saw about the retention ago, not later
        with pytest.raises(WatchCompacted):
            async with leases.watch("/busy", start_revision=start):
                pass
        async with leases.watch("/busy", start_revision=compacted):  # the last retention is kept
            pass

        await sessions[leader].close()
        other = duties[1 - leader]
        await elapse(clock, 2, leases)
        assert other.leading and not duties[leader].leading
        await elapse(clock, 6, leases)
        assert other.compactions == 0  # a new compactor waits one retention from its election
        await elapse(clock, 6, leases)
        assert other.compactions >= 1 and other.compacted_revision > compacted
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await leases.close()


async def test_a_revision_already_compacted_elsewhere_is_not_a_failure() -> None:
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    duty = EtcdCompaction(leases, lambda: None, clock, None, server_id="s", config=CompactionConfig(RETENTION))
    await duty.run_pass()
    await elapse(clock, 11, leases)
    assert await leases.compact(await leases.current_revision())  # etcd's own compactor, further on
    await duty.run_pass()  # wants an older revision: etcd says compacted; no error
    assert duty.compactions == 0 and duty.compacted_revision > 0
    await leases.close()


async def test_the_nospace_alarm_raises_an_alert_until_disarmed(migrated_engine) -> None:
    clock = FakeClock()
    leases = MemoryLeaseStore(clock)
    alerts = AlertStore(migrated_engine, clock)
    duty = EtcdCompaction(leases, lambda: None, clock, alerts, server_id="s1")
    await duty.run_pass()
    assert await alerts.get(ETCD_NOSPACE_KEY) is None
    leases.raised_alarms.add("NOSPACE")
    await duty.run_pass()
    alert = await alerts.get(ETCD_NOSPACE_KEY)
    assert alert is not None and alert.kind == "etcd_nospace" and alert.severity == "critical"
    assert duty.alarms == ["NOSPACE"]
    leases.raised_alarms.clear()
    await duty.run_pass()
    assert await alerts.get(ETCD_NOSPACE_KEY) is None
    await leases.close()


@pytest.mark.parametrize(
    "retention",
    [timedelta(0), timedelta(milliseconds=999), timedelta(seconds=-5), timedelta(days=7, seconds=1), 3600],
)
def test_bad_retentions_are_refused(retention: object) -> None:
    with pytest.raises(ValueError, match="retention"):
        CompactionConfig(retention=retention)  # type: ignore[arg-type]


@pytest.mark.parametrize("seconds", [0.0, 0.5, -1.0, 7 * 86400 + 1.0, math.nan, math.inf])
def test_bad_server_settings_are_refused(seconds: float) -> None:
    with pytest.raises(ConfigError, match="etcd_compaction_retention"):
        ServerConfig(store="sqlite:///x", etcd="memory", admin_token="t" * 32, etcd_compaction_retention=seconds)


def test_the_period_and_the_samples_are_bounded() -> None:
    assert CompactionConfig().period == 60 and CompactionConfig().samples == 62
    assert CompactionConfig(timedelta(seconds=1)).period == 1
    assert CompactionConfig(timedelta(days=7)).period == 60
    assert CompactionConfig(timedelta(days=7)).samples == 7 * 1440 + 2


def _load(argv: list[str], env: dict[str, str]) -> ServerConfig:
    import argparse

    from tickwheel_server.config import add_server_arguments, load_server_config

    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    base = {"TICKWHEEL_STORE": "sqlite:///x", "TICKWHEEL_ETCD": "memory", "TICKWHEEL_ADMIN_TOKEN": "t" * 32}
    return load_server_config(parser.parse_args(argv), {**base, **env})


def test_the_retention_comes_from_a_flag_or_the_environment_and_is_checked() -> None:
    assert _load([], {}).etcd_compaction_retention == 3600
    assert _load([], {"TICKWHEEL_ETCD_COMPACTION_RETENTION": "120"}).etcd_compaction_retention == 120
    assert _load(["--etcd-compaction-retention", "30"], {}).etcd_compaction_retention == 30
    for bad in ("soon", "0", "1e9", "nan"):
        with pytest.raises(ConfigError, match="etcd_compaction_retention"):
            _load([], {"TICKWHEEL_ETCD_COMPACTION_RETENTION": bad})
