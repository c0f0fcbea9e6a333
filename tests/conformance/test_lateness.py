""""It didn't run": the lateness alert is raised per job once an occurrence
waits past its threshold, and resolved after it runs; SQLite and PostgreSQL,
fake clock."""

from __future__ import annotations

import pytest
from tickwheel.v1 import job_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel_server.alerts.catalogue import NewAlert, late_key
from tickwheel_server.alerts.lateness import LatenessWatch
from tickwheel_server.jobspec import DEFAULT_LATENESS_THRESHOLD
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.lateness import LatenessStore
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions, jobs
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import ANY_ECHO, add_execution


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def set_threshold(engine, seconds: float) -> None:
    spec = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    spec.lateness_threshold.FromMilliseconds(int(seconds * 1000))
    with engine.begin() as conn:
        conn.execute(jobs.update().values(spec=spec.SerializeToString()))


async def test_a_late_occurrence_raises_one_alert_per_job_that_resolves_after_it_runs(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for index in range(3):
        add_execution(migrated_engine, clock, f"e{index}", job_id="job_1")
    set_threshold(migrated_engine, 30)
    alerts = AlertStore(migrated_engine, clock)
    watch = LatenessWatch(LatenessStore(migrated_engine, clock), alerts, clock)
    assert await watch.check_once() == (0, 0)
    clock.advance(30)
    assert await watch.check_once() == (0, 0)  # at the threshold, not past it
    clock.advance(1)
    assert await watch.check_once() == (1, 0)
    assert await watch.check_once() == (1, 0)  # seen again: the same alert
    alert = await alerts.get(late_key("job_1"))
    assert alert is not None and alert.kind == "late" and alert.tenant == "acme" and alert.count == 2
    assert alert.details["waiting_executions"] == "3" and alert.execution_id == "e0"
    await ExecutionQueue(migrated_engine, clock).handout.hand_out_ready("s1", clock.now(), ANY_ECHO, 3)
    assert await watch.check_once() == (0, 1)
    assert await alerts.get(late_key("job_1")) is None


async def test_a_zero_threshold_turns_the_alert_off(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e0", job_id="job_1")
    set_threshold(migrated_engine, 0)
    watch = LatenessWatch(LatenessStore(migrated_engine, clock), AlertStore(migrated_engine, clock), clock)
    clock.advance(3600)
    assert await watch.check_once() == (0, 0)


async def test_a_cut_scan_resolves_nothing(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for index in range(3):
        add_execution(migrated_engine, clock, f"e{index}", job_id="job_1")
    set_threshold(migrated_engine, 1)
    alerts = AlertStore(migrated_engine, clock)
    await alerts.raise_alert(NewAlert(key=late_key("job_2"), kind="late", severity="warning", summary="s",
                                      tenant="acme", job_id="job_2"))
    clock.advance(5)
    # job_2's late executions might be past what a scan of 3 sees: not resolved.
    assert await LatenessWatch(LatenessStore(migrated_engine, clock), alerts, clock, limit=3).check_once() == (1, 0)
    assert await alerts.get(late_key("job_2")) is not None
    assert await LatenessWatch(LatenessStore(migrated_engine, clock), alerts, clock, limit=4).check_once() == (1, 1)
    assert await alerts.get(late_key("job_2")) is None


async def test_an_execution_held_back_by_its_job_or_a_key_is_late_too(migrated_engine, clock) -> None:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "held", job_id="job_1")
    set_threshold(migrated_engine, 1)
    with migrated_engine.begin() as conn:
        conn.execute(executions.update().values(status="waiting"))
    clock.advance(2)
    alerts = AlertStore(migrated_engine, clock)
    assert await LatenessWatch(LatenessStore(migrated_engine, clock), alerts, clock).check_once() == (1, 0)
    assert (await alerts.get(late_key("job_1"))).execution_id == "held"


async def test_a_paused_tenants_held_back_executions_are_not_late(migrated_engine, clock) -> None:
    tenant_store = TenantStore(migrated_engine, clock)
    await tenant_store.create(Tenant(name="acme"))
    await tenant_store.create(Tenant(name="other"))
    add_execution(migrated_engine, clock, "held", job_id="job_1")
    add_execution(migrated_engine, clock, "free", job_id="job_2", tenant="other")
    set_threshold(migrated_engine, 1)
    alerts = AlertStore(migrated_engine, clock)
    watch = LatenessWatch(LatenessStore(migrated_engine, clock), alerts, clock)
    clock.advance(2)
    assert await watch.check_once() == (2, 0)
    await tenant_store.pause("acme", "billing")
    # Held back on purpose: its open alert resolves, the other tenant's stays.
    assert await watch.check_once() == (1, 1)
    assert await alerts.get(late_key("job_1")) is None
    assert await alerts.get(late_key("job_2")) is not None
    await tenant_store.resume("acme")
    assert await watch.check_once() == (2, 0)
    assert (await alerts.get(late_key("job_1"))).execution_id == "held"


async def test_a_definition_that_does_not_parse_is_late_with_the_default_threshold(migrated_engine, clock) -> None:
    # One damaged row must not stop the watch for every job.
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    add_execution(migrated_engine, clock, "e0", job_id="job_1")
    add_execution(migrated_engine, clock, "e1", job_id="job_2")
    set_threshold(migrated_engine, 30)
    with migrated_engine.begin() as conn:
        conn.execute(jobs.update().where(jobs.c.id == "job_2").values(spec=b"\x0a\xff\x01garbage"))
    alerts = AlertStore(migrated_engine, clock)
    watch = LatenessWatch(LatenessStore(migrated_engine, clock), alerts, clock)
    clock.advance(31)
    assert await watch.check_once() == (1, 0)
    assert await alerts.get(late_key("job_1")) is not None
    clock.advance(DEFAULT_LATENESS_THRESHOLD.total_seconds() - 30)  # the default for the one this server cannot read
    assert await watch.check_once() == (2, 0)
    assert await alerts.get(late_key("job_2")) is not None
