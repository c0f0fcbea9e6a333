"""The circuit breaker through the store, on SQLite and PostgreSQL, on a
fake clock: tenant acme's calls to host A fail; once 20 calls in the window
failed, acme's retries to A are held past the open period (the probe first)
and its alert is raised, while acme's calls to host B and globex's to A keep
their normal backoff; the probe succeeds, the circuit closes and the alert
resolves."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel_server.circuits import CircuitBreaker
from tickwheel_server.policy.breaker import OPEN, SPREAD, BreakerSettings
from tickwheel.shared.ids import to_us
from tickwheel_server.alerts.catalogue import circuit_open_key
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_handout import add_execution
from .test_handout import result as handout_result

FAILED = worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE
SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED
HTTP_WORKERS = Capability(("acme", "globex"), (), True)
SETTINGS = BreakerSettings(window=60, min_calls=20, failure_ratio=0.5, open_for=30)


def result(handed, outcome, **overrides):
    """The result of a worker serving both tenants."""
    return handout_result(handed, outcome, tenants=HTTP_WORKERS.tenants, **overrides)


def http_job(host: str) -> job_pb2.Job:
    job = job_pb2.Job(name="j", target=job_pb2.Target(http=job_pb2.HttpTarget(url=f"https://{host}:8443/hook")))
    job.retry_policy.max_attempts = 10
    job.retry_policy.initial_backoff.FromSeconds(1)
    job.retry_policy.max_backoff.FromSeconds(10)
    return job


@pytest.fixture
async def breaker(clock) -> CircuitBreaker:
    return CircuitBreaker(SETTINGS, clock, rng=random.Random(3))


@pytest.fixture
async def store(migrated_engine, clock, breaker) -> ExecutionQueue:
    for name in ("acme", "globex"):
        await TenantStore(migrated_engine, clock).create(Tenant(name=name))
    return ExecutionQueue(migrated_engine, clock, rng=random.Random(7), breaker=breaker)


def ready_at(engine, ids) -> dict[str, tuple[str, int, int]]:
    """(status, attempt, ready_at) of each execution."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(executions.c.id, executions.c.status, executions.c.attempt, executions.c.ready_at)
            .where(executions.c.id.in_(list(ids)))
        )  # fmt: skip
        return {row.id: (row.status, row.attempt, row.ready_at) for row in rows}


async def test_retries_to_a_failing_host_pause_and_the_alert_follows_the_circuit(
    store, breaker, migrated_engine, clock
) -> None:
    hosts = {f"acme-a-{n:02d}": ("acme", "a.example") for n in range(20)}
    hosts.update({f"acme-b-{n}": ("acme", "b.example") for n in range(3)})
    hosts.update({f"globex-a-{n}": ("globex", "a.example") for n in range(3)})
    for ident, (tenant, host) in hosts.items():
        add_execution(migrated_engine, clock, ident, tenant=tenant, handler=None, spec=http_job(host))
    a_ids = sorted(i for i in hosts if i.startswith("acme-a"))
    others = sorted(i for i in hosts if not i.startswith("acme-a"))

    # Every first attempt fails; acme's 20th call to A opens its circuit.
    handed = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), HTTP_WORKERS, 100)}
    assert sorted(handed) == sorted(hosts)
    await store.outcomes.record_results([result(handed[i], FAILED) for i in a_ids + others])
    opened_at = clock.now()
    assert breaker.state("acme", "a.example") == OPEN
    [change] = breaker.take_changes()
    assert (change.tenant, change.host, change.opened) == ("acme", "a.example", True)
    rows = ready_at(migrated_engine, hosts)
    normal = to_us(opened_at + timedelta(seconds=1))
    pause_end = to_us(opened_at + timedelta(seconds=30))
    assert all(rows[i][2] <= normal for i in a_ids[:19]), "retries scheduled before it opened keep their backoff"
    probe = a_ids[19]
    assert pause_end <= rows[probe][2] <= pause_end + SPREAD * 30 * 1e6, "the call that opened it: the probe"
    assert all(rows[i][:2] == ("scheduled", 2) and rows[i][2] <= normal for i in others), "not acme's A: unaffected"

    alerts = AlertStore(migrated_engine, clock)
    await alerts.record_circuits([change])
    alert = await alerts.get(circuit_open_key("acme", "a.example"))
    assert alert is not None and (alert.kind, alert.tenant) == ("circuit_open", "acme")
    assert "acme" in alert.summary and "a.example" in alert.summary and "20 of 20 calls" in alert.summary
    assert alert.details["host"] == "a.example" and alert.details["probes_from_us"] == str(pause_end)
    assert await alerts.get(circuit_open_key("globex", "a.example")) is None

    # The retries come due: acme's to A fail again and are held one pause
    # past the probe; acme's to B and globex's to A succeed at once.
    clock.advance(2)
    retried = {h.id: h for h in await store.handout.hand_out_ready("s1", clock.now(), HTTP_WORKERS, 100)}
    assert sorted(retried) == sorted(a_ids[:19] + others)
    await store.outcomes.record_results(
        [result(retried[i], FAILED) for i in a_ids[:19]] + [result(retried[i], SUCCEEDED) for i in others]
    )
    rows = ready_at(migrated_engine, hosts)
    held_until = to_us(opened_at + timedelta(seconds=60))
    assert all(rows[i][:2] == ("scheduled", 3) and rows[i][2] >= held_until for i in a_ids[:19])
    assert all(rows[i][0] == "succeeded" for i in others)
    assert breaker.take_changes() == []

    # The pause ends: only the probe is ready; it succeeds and closes the circuit.
    clock.set(opened_at + timedelta(seconds=30 * (1 + SPREAD)))
    [probing] = await store.handout.hand_out_ready("s1", clock.now(), HTTP_WORKERS, 100)
    assert probing.id == probe
    await store.outcomes.record_results([result(probing, SUCCEEDED)])
    [closed] = breaker.take_changes()
    assert (closed.host, closed.opened) == ("a.example", False)
    await alerts.record_circuits([closed])
    assert await alerts.get(circuit_open_key("acme", "a.example")) is None
    page = await alerts.list(kinds=["circuit_open"], include_resolved=True)
    assert [(a.key, a.resolved_at is not None) for a in page.alerts] == [("circuit_open:acme:a.example", True)]


async def test_handler_targets_and_permanent_failures_are_not_counted(store, breaker, migrated_engine, clock) -> None:
    for n in range(20):
        add_execution(migrated_engine, clock, f"echo-{n}", handler="echo")
        add_execution(migrated_engine, clock, f"bad-{n}", handler=None, spec=http_job("a.example"))
    workers = Capability(("acme",), ("echo",), True)
    handed = await store.handout.hand_out_ready("s1", clock.now(), workers, 100)
    assert len(handed) == 40
    await store.outcomes.record_results(
        [result(h, FAILED if h.id.startswith("echo") else worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT) for h in handed]
    )
    assert len(breaker) == 0 and breaker.take_changes() == []
