"""Isolation in the hand-out transaction (issue 6), on SQLite and PostgreSQL,
with a fake clock: weighted fair share across tenants with per-tenant caps,
each overlap policy with executions that keep running across rounds,
concurrency keys across two "servers" (two stores, two sessions), the cancel
signal for running executions, and the wake-ups that keep queues moving.

The pure rules (the fair-share allocation, the overlap and key decisions)
are table-tested in tests/unit/policy/test_fairness.py and test_admission.py.

A "long-running handler" here is an execution handed out and not finished:
no result is recorded until the test says so. Two servers are two
:class:`ExecutionQueue` instances with their own sessions over one database.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel_server.errors import FailedPrecondition
from tickwheel.shared.ids import to_us
from tickwheel_server.store.executions import Capability, Lost, ResultIn
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.history import HistoryStore, attempt_history
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.jobs import JobStore
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import concurrency_keys, executions, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.support.plans import captured

from .test_handout import add_execution

# Every recorded attempt: the table's rows and those plain successes keep on their execution rows.
attempts = attempt_history()

ECHO = ("echo",)
MINUTE = 60.0


def spec(overlap=job_pb2.OVERLAP_POLICY_SKIP, keys: dict[str, int] | None = None, attempts_: int = 3,
         backoff: int = 5) -> job_pb2.Job:
    job = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      overlap_policy=overlap)
    for key, limit in (keys or {}).items():
        job.concurrency_keys.add(key=key, limit=limit)
    job.retry_policy.max_attempts = attempts_
    job.retry_policy.initial_backoff.FromSeconds(backoff)
    job.retry_policy.max_backoff.FromSeconds(backoff)
    return job


def row_of(engine, ident: str):
    with engine.connect() as conn:
        return conn.execute(sa.select(executions).where(executions.c.id == ident)).first()


def status(engine, *idents: str) -> list[str | None]:
    return [None if (row := row_of(engine, i)) is None else row.status for i in idents]


def skips_of(engine, job_id: str) -> list[tuple]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(skips.c.from_at, skips.c.to_at, skips.c.count, skips.c.reason)
            .where(skips.c.job_id == job_id).order_by(skips.c.from_at)
        ).all()
    return [tuple(r) for r in rows]


def running_count(engine, tenant: str) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(sa.func.count()).select_from(executions)
            .where(executions.c.tenant == tenant, executions.c.status == "running")
        ).scalar()


def key_row(engine, tenant: str, name: str):
    with engine.connect() as conn:
        return conn.execute(
            sa.select(concurrency_keys).where(concurrency_keys.c.tenant == tenant, concurrency_keys.c.name == name)
        ).first()


class Server:
    """One server's view: its store (own fair-share state) and session."""

    def __init__(self, engine, clock, owner: str, tenants=("acme", "globex"), **options) -> None:
        self.store = ExecutionQueue(engine, clock, rng=random.Random(3), **options)
        self.owner = owner
        self.clock = clock
        self.capability = Capability(tuple(tenants), ECHO, False)

    async def claim(self, limit: int = 100, at: float = 0.0):
        return await self.store.handout.hand_out_ready(self.owner, self.clock.now() + timedelta(seconds=at), self.capability, limit)

    async def finish(self, handed, outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED):
        acks = await self.store.outcomes.record_results([
            ResultIn(h.id, h.delivery, h.attempt, outcome, "", "w1", self.capability.tenants) for h in handed
        ])
        assert all(a.accepted for a in acks), acks
        return acks


@pytest.fixture
async def tenants(migrated_engine, clock) -> TenantStore:
    store = TenantStore(migrated_engine, clock)
    await store.create(Tenant(name="acme"))
    await store.create(Tenant(name="globex"))
    return store


def occurrences(engine, clock, job_id: str, count: int, *, job: job_pb2.Job, every: float = MINUTE,
                first_in: float = 0.0, tenant: str = "acme", origin: str = "scheduled") -> list[str]:
    """``count`` occurrences of one job, ``every`` seconds apart from ``first_in``."""
    idents = []
    for index in range(count):
        ident = f"{job_id}:{index}" if origin == "scheduled" else f"{job_id}:{origin}:{index}"
        add_execution(engine, clock, ident, due_in=first_in + index * every, job_id=job_id, spec=job, tenant=tenant,
                      origin=origin)
        idents.append(ident)
    return idents


# ----------------------------------------------------------------------------- fair share in the store


LATERAL = pytest.mark.parametrize("lateral", [True, False], ids=["lateral", "union"])
"""PostgreSQL runs both statement forms: LATERAL, and the UNION ALL that CockroachDB gets."""


@LATERAL
async def test_a_tenant_with_a_backlog_does_not_delay_another_and_never_exceeds_its_cap(
    migrated_engine, clock, tenants, lateral
) -> None:
    await tenants.update("acme", weight=1, max_concurrency=30)
    await tenants.update("globex", weight=3)
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW)
    due = to_us(clock.now())
    rows = [
        dict(id=f"a{i:05d}", job_id="job_a", tenant="acme", ready_at=due + i) for i in range(20_000)
    ] + [dict(id=f"b{i:02d}", job_id="job_b", tenant="globex", ready_at=due + 10_000 + i) for i in range(50)]
    with migrated_engine.begin() as conn:
        for job_id, tenant in (("job_a", "acme"), ("job_b", "globex")):
            insert_jobs(conn, [dict(
                id=job_id, tenant=tenant, partition=0, name="j", state="active", spec=job.SerializeToString(),
                time_zone="UTC", next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x",
                pause_reason="", paused_at=None, version=1, created_at=0, updated_at=0)])
        conn.execute(executions.insert(), [
            dict(r, partition=0, origin="scheduled", nominal_at=r["ready_at"], due_at=r["ready_at"], attempt=1,
                 delivery=0, status="scheduled", handler="echo", missed_count=1, reap_count=0, payload=b"",
                 error="", dead_reason="", created_at=0)
            for r in rows
        ])
    server = Server(migrated_engine, clock, "s1", lateral=lateral)
    clock.advance(1)
    per_round = []
    for _ in range(4):  # nothing finishes: acme fills its cap and stops there
        handed = await server.claim(limit=40)
        per_round.append((sum(h.tenant == "acme" for h in handed), sum(h.tenant == "globex" for h in handed)))
        assert running_count(migrated_engine, "acme") <= 30
    # globex (weight 3) gets three quarters of the first round, the rest of
    # its 50 in the second; acme its quarter, then what globex leaves, up to its cap.
    assert per_round == [(10, 30), (20, 20), (0, 0), (0, 0)]
    assert running_count(migrated_engine, "acme") == 30
    # A second server counts the same running executions: the cap holds across servers.
    assert await Server(migrated_engine, clock, "s2").claim(limit=40) == []
    acme = [h for h in await server.store.handout.hand_out_ready("s1", clock.now(), server.capability, 40)]
    assert acme == []
    with migrated_engine.connect() as conn:
        some = conn.execute(
            sa.select(executions.c.id, executions.c.delivery, executions.c.attempt)
            .where(executions.c.tenant == "acme", executions.c.status == "running").limit(7)
        ).all()
    await server.store.outcomes.record_results([ResultIn(r.id, r.delivery, r.attempt, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "",
                                                "w1", ("acme",)) for r in some])
    again = await server.claim(limit=40)
    assert len(again) == 7 and {h.tenant for h in again} == {"acme"}
    assert running_count(migrated_engine, "acme") == 30
    # Oldest first within a tenant: the first 37 + 7 of acme's backlog.
    with migrated_engine.connect() as conn:
        started = conn.execute(
            sa.select(executions.c.id).where(executions.c.tenant == "acme", executions.c.delivery == 1)
            .order_by(executions.c.id)
        ).scalars().all()
    assert started == [f"a{i:05d}" for i in range(37)]


async def test_weights_hold_round_after_round_with_small_rounds(migrated_engine, clock, tenants) -> None:
    await tenants.update("globex", weight=3)
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW)
    for tenant in ("acme", "globex"):
        for index in range(60):
            add_execution(migrated_engine, clock, f"{tenant}-{index:02d}", job_id=f"job_{tenant}", spec=job,
                          tenant=tenant)
    server = Server(migrated_engine, clock, "s1")
    got = {"acme": 0, "globex": 0}
    for _ in range(10):
        for handed in await server.claim(limit=4):
            got[handed.tenant] += 1
    assert got == {"acme": 10, "globex": 30}


async def test_the_loose_scan_finds_the_same_tenants_as_the_probe(migrated_engine, clock, tenants) -> None:
    for index, tenant in enumerate(("acme", "globex", "acme")):
        add_execution(migrated_engine, clock, f"e{index}", tenant=tenant)
    add_execution(migrated_engine, clock, "later", tenant="globex", due_in=30)
    loose = Server(migrated_engine, clock, "s1", loose_scan_above=0)
    handed = await loose.claim()
    assert sorted(h.id for h in handed) == ["e0", "e1", "e2"]
    only_acme = Server(migrated_engine, clock, "s2", tenants=("acme",), loose_scan_above=0)
    assert await only_acme.claim(at=60) == []  # "later" is globex's


# ----------------------------------------------------------------------------- overlap policies


async def test_skip_records_one_range_per_running_execution_and_keeps_no_row(migrated_engine, clock, tenants) -> None:
    first, second, third, fourth = occurrences(migrated_engine, clock, "job_s", 4, job=spec())
    server = Server(migrated_engine, clock, "s1")
    [running] = await server.claim()
    assert running.id == first
    clock.advance(MINUTE)
    assert await server.claim() == []
    clock.advance(MINUTE)
    assert await server.claim() == []
    assert status(migrated_engine, first, second, third) == ["running", None, None]
    nominal = [row_of(migrated_engine, fourth).nominal_at - int(MINUTE * 1e6) * k for k in (2, 1)]
    assert skips_of(migrated_engine, "job_s") == [(nominal[0], nominal[1], 2, "overlap")]
    page = await HistoryStore(migrated_engine, clock).list_executions("acme", "job_s")
    assert [(s.count, s.reason) for s in page.skips] == [(2, "overlap")]
    await server.finish([running])
    clock.advance(MINUTE)
    [next_one] = await server.claim()
    assert next_one.id == fourth


async def test_a_retry_wait_counts_as_running(migrated_engine, clock, tenants) -> None:
    first, second = occurrences(migrated_engine, clock, "job_r", 2, job=spec(backoff=3600), every=2)
    server = Server(migrated_engine, clock, "s1")
    [handed] = await server.claim()
    [ack] = await server.finish([handed], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE)
    assert ack.retry is not None and ack.retry.ready_at_us > row_of(migrated_engine, second).ready_at
    clock.advance(2)
    assert await server.claim() == []  # the second is skipped: the first waits for its retry
    assert status(migrated_engine, first, second) == ["scheduled", None]
    assert [r[2:] for r in skips_of(migrated_engine, "job_r")] == [(1, "overlap")]


@LATERAL
async def test_queue_one_buffers_one_and_starts_it_when_the_current_one_ends(
    migrated_engine, clock, tenants, lateral
) -> None:
    ids = occurrences(migrated_engine, clock, "job_q", 4, job=spec(job_pb2.OVERLAP_POLICY_QUEUE_ONE))
    server = Server(migrated_engine, clock, "s1", lateral=lateral)
    [current] = await server.claim()
    clock.advance(MINUTE)
    assert await server.claim() == []
    clock.advance(MINUTE)
    assert await server.claim() == []
    assert status(migrated_engine, *ids[:3]) == ["running", "waiting", None]
    waited_from = row_of(migrated_engine, ids[1]).waiting_since
    clock.advance(30)
    await server.finish([current])
    assert status(migrated_engine, ids[1]) == ["scheduled"]  # woken in the outcome's transaction
    [buffered] = await server.claim()
    assert buffered.id == ids[1]
    await server.finish([buffered])
    with migrated_engine.connect() as conn:
        waited = conn.execute(sa.select(attempts.c.waited_us).where(attempts.c.execution_id == ids[1])).scalar()
    assert waited == buffered.handed_out_at_us - waited_from == 90_000_000  # from its due instant to its start
    clock.advance(MINUTE)
    [last] = await server.claim()
    assert last.id == ids[3]


async def test_allow_runs_occurrences_side_by_side(migrated_engine, clock, tenants) -> None:
    ids = occurrences(migrated_engine, clock, "job_a", 3, job=spec(job_pb2.OVERLAP_POLICY_ALLOW), every=1)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(2)
    assert sorted(h.id for h in await server.claim()) == ids
    assert status(migrated_engine, *ids) == ["running"] * 3


async def test_replace_cancels_the_running_one_through_its_worker_then_starts(migrated_engine, clock, tenants) -> None:
    old, new = occurrences(migrated_engine, clock, "job_x", 2, job=spec(job_pb2.OVERLAP_POLICY_REPLACE))
    s1, s2 = Server(migrated_engine, clock, "s1"), Server(migrated_engine, clock, "s2")
    [running] = await s1.claim()
    clock.advance(MINUTE)
    handed = await s2.claim()  # another server decides the replacement
    assert handed == [] and handed.stopped == 1
    assert status(migrated_engine, old, new) == ["running", "waiting"]
    assert await s2.store.requeues.cancel_requests("s2") == []
    [request] = await s1.store.requeues.cancel_requests("s1")
    assert (request.execution_id, request.delivery, request.reason) == (old, running.delivery,
                                                                         f"canceled: replaced by {new}")
    await s1.finish([running], worker_pb2.RESULT_OUTCOME_CANCELED)  # the worker's answer
    row = row_of(migrated_engine, old)
    assert (row.status, row.dead_reason, row.cancel_requested_at) == ("canceled", f"canceled: replaced by {new}", None)
    [replacement] = await s2.claim()
    assert replacement.id == new


async def test_manual_runs_queue_behind_a_running_one_unless_they_may_overlap(migrated_engine, clock, tenants) -> None:
    [scheduled] = occurrences(migrated_engine, clock, "job_m", 1, job=spec())
    server = Server(migrated_engine, clock, "s1")
    [running] = await server.claim()
    triggered = occurrences(migrated_engine, clock, "job_m", 2, job=spec(), origin="trigger", every=1, first_in=1)
    with migrated_engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.id == triggered[1]).values(allow_overlap=True))
    clock.advance(5)
    assert [h.id for h in await server.claim()] == [triggered[1]]
    assert status(migrated_engine, *triggered) == ["waiting", "running"]
    await server.finish([running])
    [queued] = await server.claim()
    assert queued.id == triggered[0] and status(migrated_engine, scheduled) == ["succeeded"]
    assert skips_of(migrated_engine, "job_m") == []


async def test_a_backfill_runs_its_occurrences_one_after_another_in_nominal_order(migrated_engine, clock, tenants) -> None:
    ids = occurrences(migrated_engine, clock, "job_b", 5, job=spec(), origin="backfill", every=0.001)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    order = []
    for _ in range(5):
        [handed] = await server.claim()
        order.append(handed.id)
        assert status(migrated_engine, *ids).count("running") == 1  # one at a time, the rest wait
        await server.finish([handed])  # wakes the next in line
    assert order == ids
    assert skips_of(migrated_engine, "job_b") == []  # manual runs are never skipped


async def test_replace_cancels_a_whole_queue_it_did_not_read(migrated_engine, clock, tenants) -> None:
    [running_id] = occurrences(migrated_engine, clock, "job_z", 1, job=spec(job_pb2.OVERLAP_POLICY_REPLACE))
    server = Server(migrated_engine, clock, "s1")
    [running] = await server.claim()
    queued = occurrences(migrated_engine, clock, "job_z", 12, job=spec(job_pb2.OVERLAP_POLICY_REPLACE),
                         origin="trigger", every=0.001, first_in=1)
    clock.advance(2)
    assert await server.claim() == []  # the triggers queue behind the running one
    assert status(migrated_engine, *queued) == ["waiting"] * 12
    [newest] = occurrences(migrated_engine, clock, "job_z:next", 1, job=spec(job_pb2.OVERLAP_POLICY_REPLACE),
                           first_in=10)
    with migrated_engine.begin() as conn:  # the next occurrence of the same job
        conn.execute(executions.update().where(executions.c.id == newest).values(job_id="job_z"))
    clock.advance(10)
    handed = await server.claim()
    assert handed == [] and handed.stopped == 1
    assert status(migrated_engine, *queued) == ["canceled"] * 12  # more than the round read
    assert {row_of(migrated_engine, q).dead_reason for q in queued} == {f"canceled: replaced by {newest}"}
    assert status(migrated_engine, running_id, newest) == ["running", "waiting"]
    await server.finish([running], worker_pb2.RESULT_OUTCOME_CANCELED)
    assert [h.id for h in await server.claim()] == [newest]


async def test_a_requeue_of_an_execution_asked_to_stop_ends_it_and_frees_the_job(migrated_engine, clock, tenants) -> None:
    old, new = occurrences(migrated_engine, clock, "job_y", 2, job=spec(job_pb2.OVERLAP_POLICY_REPLACE))
    server = Server(migrated_engine, clock, "s1")
    [running] = await server.claim()
    clock.advance(MINUTE)
    assert (await server.claim()).stopped == 1
    result = await server.store.requeues.requeue("s1", [Lost(old, running.delivery, "worker w1 disconnected", "w1")],
                                        counts=True)
    assert result.canceled == [old] and not result.requeued
    assert status(migrated_engine, old, new) == ["canceled", "scheduled"]
    assert [h.id for h in await server.claim()] == [new]


async def test_a_requeue_or_reap_of_a_deleted_jobs_execution_ends_it_canceled(migrated_engine, clock, tenants) -> None:
    """DeleteJob lets a running execution finish; one whose worker or server
    is lost has not started again, and a hand-out of it would carry no target
    (the worker failed it: dead, a dead letter of a job gone)."""
    [lost] = occurrences(migrated_engine, clock, "job_gone_a", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
    [reaped] = occurrences(migrated_engine, clock, "job_gone_b", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
    dead, alive = Server(migrated_engine, clock, "dead-session"), Server(migrated_engine, clock, "s2")
    clock.advance(1)
    handed = {h.id: h for h in await dead.claim()}
    assert sorted(handed) == sorted([lost, reaped])
    with migrated_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM jobs WHERE id IN ('job_gone_a', 'job_gone_b')"))
    result = await dead.store.requeues.requeue(
        "dead-session", [Lost(lost, handed[lost].delivery, "worker w1 disconnected", "w1")], counts=True)
    assert result.canceled == [lost] and not result.requeued and not result.dead
    reap = await alive.store.requeues.reap_owner("dead-session", "server session expired")
    assert reap.canceled == [reaped] and not reap.requeued
    assert status(migrated_engine, lost, reaped) == ["canceled", "canceled"]
    assert {row_of(migrated_engine, ident).dead_reason for ident in (lost, reaped)} == {"canceled: job deleted"}
    assert await alive.claim() == []


# ----------------------------------------------------------------------------- concurrency keys


async def test_a_key_with_limit_one_runs_one_of_three_jobs_at_a_time_across_servers(
    migrated_engine, clock, tenants
) -> None:
    idents = []
    for index in range(3):
        job = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"billing-db": 1})
        idents += occurrences(migrated_engine, clock, f"job_k{index}", 1, job=job, first_in=index * 0.001)
    s1, s2 = Server(migrated_engine, clock, "s1"), Server(migrated_engine, clock, "s2")
    clock.advance(1)
    [first] = await s1.claim()
    assert first.id == idents[0]
    assert await s2.claim() == []
    assert status(migrated_engine, *idents) == ["running", "waiting", "waiting"]
    assert row_of(migrated_engine, idents[1]).wait_key == "billing-db"
    assert json.loads(row_of(migrated_engine, idents[0]).held_keys) == ["billing-db"]
    assert key_row(migrated_engine, "acme", "billing-db").running == 1
    clock.advance(10)
    await s1.finish([first])
    [second] = await s2.claim()  # the next in ready order, on the other server
    assert second.id == idents[1]
    assert await s1.claim() == []
    clock.advance(10)
    await s2.finish([second])
    [third] = await s1.claim()
    assert third.id == idents[2]
    assert key_row(migrated_engine, "acme", "billing-db").running == 1
    await s1.finish([third])
    assert key_row(migrated_engine, "acme", "billing-db").running == 0
    with migrated_engine.connect() as conn:
        history = conn.execute(
            sa.select(attempts.c.execution_id, attempts.c.started_at, attempts.c.finished_at, attempts.c.waited_us)
            .order_by(attempts.c.started_at)
        ).all()
    assert [h.execution_id for h in history] == idents
    assert [h.waited_us for h in history] == [0, 10_000_000, 20_000_000]  # measured, not hidden
    assert all(a.finished_at <= b.started_at for a, b in zip(history, history[1:]))


async def test_a_round_writes_its_holds_waits_and_cancels_in_one_statement_each(
    migrated_engine, clock, tenants
) -> None:
    """What a round decides per candidate (key slots held, waits, cancels)
    is one UPDATE per kind on PostgreSQL (arrays), one per row on SQLite;
    a key's name is the tenant's and may hold any character."""
    hostile = 'db"\\x,{1} \'; --'
    keyed = []
    for index in range(5):
        keyed += occurrences(migrated_engine, clock, f"job_h{index}", 1,
                             job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {hostile: 2}), first_in=index * 0.001)
    replaced = occurrences(migrated_engine, clock, "job_r", 3, job=spec(job_pb2.OVERLAP_POLICY_REPLACE),
                           every=0.001, first_in=0.01)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    with captured(migrated_engine) as seen:
        handed = await server.claim()
    assert sorted(h.id for h in handed) == sorted(keyed[:2] + replaced[-1:])
    assert status(migrated_engine, *keyed) == ["running"] * 2 + ["waiting"] * 3
    assert [json.loads(row_of(migrated_engine, i).held_keys) for i in keyed[:2]] == [[hostile]] * 2
    assert [row_of(migrated_engine, i).wait_key for i in keyed] == [None] * 2 + [hostile] * 3
    assert {(row_of(migrated_engine, i).delivery, row_of(migrated_engine, i).owner) for i in keyed[2:]} == {(0, None)}
    assert key_row(migrated_engine, "acme", hostile).running == 2
    assert status(migrated_engine, *replaced) == ["canceled", "canceled", "running"]
    assert {row_of(migrated_engine, i).dead_reason for i in replaced[:2]} == {f"canceled: replaced by {replaced[-1]}"}
    updates = [sent for sent in seen if sent.statement.startswith("UPDATE executions")]
    if migrated_engine.dialect.name == "postgresql":  # holds, waits, cancels: one each, over arrays
        assert [sent.sets for sent in updates if sent.sets > 1] == [], [s.statement for s in updates if s.sets > 1]
        assert sum("FROM unnest" in sent.statement for sent in updates) == 3
    else:
        assert sorted(sent.sets for sent in updates if sent.sets > 1) == [2, 2, 3]


async def test_a_reaped_execution_gives_its_slot_back(migrated_engine, clock, tenants) -> None:
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1})
    a = occurrences(migrated_engine, clock, "job_ka", 1, job=job)
    b = occurrences(migrated_engine, clock, "job_kb", 1, job=job, first_in=0.001)
    dead, alive = Server(migrated_engine, clock, "dead-session"), Server(migrated_engine, clock, "s2")
    clock.advance(1)
    assert [h.id for h in await dead.claim()] == a
    assert await alive.claim() == []
    result = await alive.store.requeues.reap_owner("dead-session", "server session expired")
    assert [r.execution_id for r in result.requeued] == a
    assert key_row(migrated_engine, "acme", "db").running == 0
    assert status(migrated_engine, *b) == ["scheduled"]  # woken by the reap
    # Both are ready again; the older one (the reaped) goes first, the other waits again.
    assert [h.id for h in await alive.claim()] == a
    assert status(migrated_engine, *b) == ["waiting"]


async def test_releasing_a_hand_out_gives_its_slots_back(migrated_engine, clock, tenants) -> None:
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 2})
    ids = occurrences(migrated_engine, clock, "job_rel", 2, job=job, every=0.001)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    handed = await server.claim()
    assert key_row(migrated_engine, "acme", "db").running == 2
    await server.store.requeues.release([(h.id, h.delivery) for h in handed])
    assert key_row(migrated_engine, "acme", "db").running == 0
    assert status(migrated_engine, *ids) == ["scheduled", "scheduled"]
    assert row_of(migrated_engine, ids[0]).held_keys is None


async def test_the_most_recent_job_write_sets_the_limit_and_a_raise_wakes_waiters(migrated_engine, clock, tenants) -> None:
    store = JobStore(migrated_engine, clock, partition_count=1)

    async def create(name: str, limit: int) -> str:
        job = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": limit})
        record, _ = await store.create(NewJob(
            id=f"job_{name}", tenant="acme", name=name, spec=job.SerializeToString(), time_zone="UTC",
            next_run_at=None, next_due_at=None, tzdata_version="x", payload_size=0), name)
        return record.id

    await create("one", 1)
    assert key_row(migrated_engine, "acme", "db").max_running == 1
    clock.advance(1)
    await create("two", 3)
    assert key_row(migrated_engine, "acme", "db").max_running == 3
    clock.advance(1)
    first = await create("three", 1)
    assert key_row(migrated_engine, "acme", "db").max_running == 1
    ids = occurrences(migrated_engine, clock, first, 3, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1}), every=0.001)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    assert len(await server.claim()) == 1
    assert status(migrated_engine, *ids) == ["running", "waiting", "waiting"]
    clock.advance(1)
    record = await store.get("acme", first)
    raised = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 3})
    await store.update("acme", first, record.version, name="three", spec=raised.SerializeToString(), time_zone="UTC",
                       tzdata_version="x", payload_size=0, reschedule=None)
    assert key_row(migrated_engine, "acme", "db").max_running == 3
    # The update leaves the job's waiting executions alone (it changes neither what nor
    # when they run); the raised limit wakes them into its two free slots.
    assert status(migrated_engine, *ids) == ["running", "scheduled", "scheduled"]


async def test_a_woken_execution_canceled_before_it_starts_hands_its_turn_on(migrated_engine, clock, tenants) -> None:
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1})
    ids = []
    for index in range(3):
        ids += occurrences(migrated_engine, clock, f"job_w{index}", 1, job=job, first_in=index * 0.001)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    [first] = await server.claim()
    await server.finish([first])
    assert status(migrated_engine, *ids) == ["succeeded", "scheduled", "waiting"]
    canceled = await HistoryStore(migrated_engine, clock).cancel_execution("acme", ids[1], "not needed")
    assert canceled.status == "canceled"
    assert status(migrated_engine, ids[2]) == ["scheduled"]
    assert [h.id for h in await server.claim()] == [ids[2]]


async def test_the_safety_net_wakes_waiters_beside_free_slots(migrated_engine, clock, tenants) -> None:
    job = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1})
    ids = occurrences(migrated_engine, clock, "job_n", 2, job=job, every=0.001)
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    [first] = await server.claim()
    with migrated_engine.begin() as conn:  # a slot freed by a path that forgot to wake (simulated)
        conn.execute(concurrency_keys.update().values(running=0))
    assert await server.store.requeues.wake_stalled() == 1
    assert status(migrated_engine, ids[1]) == ["scheduled"]
    assert await server.store.requeues.wake_stalled() == 0


async def test_the_safety_net_wakes_a_job_waiter_left_behind_by_a_concurrent_result(
    migrated_engine, clock, tenants
) -> None:
    # At READ COMMITTED a round can queue an occurrence behind a running one
    # whose result is being recorded at that moment; the result's wake-up
    # then does not see the waiter. Simulated: the running one ends without
    # waking anyone.
    ids = occurrences(migrated_engine, clock, "job_w", 3, job=spec(job_pb2.OVERLAP_POLICY_QUEUE_ONE))
    server = Server(migrated_engine, clock, "s1")
    [current] = await server.claim()
    clock.advance(MINUTE)
    assert await server.claim() == []
    assert status(migrated_engine, *ids[:2]) == ["running", "waiting"]
    assert await server.store.requeues.wake_stalled() == 0  # its job is busy: it waits rightly
    with migrated_engine.begin() as conn:
        conn.execute(executions.update().where(executions.c.id == current.id).values(status="succeeded"))
    assert await server.store.requeues.wake_stalled() == 1
    assert status(migrated_engine, *ids[:2]) == ["succeeded", "scheduled"]
    assert await server.store.requeues.wake_stalled() == 0  # woken and ready: nothing more to wake
    [buffered] = await server.claim()
    assert buffered.id == ids[1]


@pytest.mark.postgres
@pytest.mark.parametrize("overlap", [job_pb2.OVERLAP_POLICY_SKIP, job_pb2.OVERLAP_POLICY_QUEUE_ONE,
                                     job_pb2.OVERLAP_POLICY_REPLACE])
async def test_racing_rounds_on_two_servers_never_start_two_occurrences_of_one_job(
    postgres_url, overlap
) -> None:
    # Real concurrency: two servers' rounds run at once (READ COMMITTED on
    # PostgreSQL), one taking every job's first occurrence and the other
    # (SKIP LOCKED) the second ones; no job ever has two running at once.
    import asyncio

    from tickwheel.shared.clock import SystemClock
    from tickwheel_server.store import create_store_engine, migrate

    engine = create_store_engine(postgres_url, pool_size=4)
    try:
        migrate(engine)
        clock = SystemClock()
        await TenantStore(engine, clock).create(Tenant(name="acme"))
        job = spec(overlap)
        for n in range(60):  # every job's first occurrence is older than any second one
            occurrences(engine, clock, f"job_r{n:02}", 2, job=job, every=1.0, first_in=-2.0)
        s1, s2 = Server(engine, clock, "s1"), Server(engine, clock, "s2")
        handed = [h for round_ in await asyncio.gather(s1.claim(limit=60), s2.claim(limit=60)) for h in round_]
        with engine.connect() as conn:
            running = conn.execute(
                sa.select(executions.c.job_id, sa.func.count()).where(executions.c.status == "running")
                .group_by(executions.c.job_id)
            ).all()
        assert running and all(count == 1 for _, count in running), running
        assert len(handed) == sum(count for _, count in running)
    finally:
        engine.dispose()


@pytest.mark.postgres
async def test_a_result_recorded_while_a_round_queues_behind_it_leaves_no_waiter_behind(postgres_url) -> None:
    # Real concurrency: for 40 queue_one jobs, one server records the running
    # occurrence's result while another server's round decides about the next
    # occurrence. Whichever goes first, the next one ends running or woken,
    # never asleep behind an execution that already ended.
    import asyncio

    from tickwheel.shared.clock import SystemClock
    from tickwheel_server.store import create_store_engine, migrate

    engine = create_store_engine(postgres_url, pool_size=4)
    try:
        migrate(engine)
        clock = SystemClock()
        await TenantStore(engine, clock).create(Tenant(name="acme"))
        job = spec(job_pb2.OVERLAP_POLICY_QUEUE_ONE)
        for n in range(40):
            occurrences(engine, clock, f"job_q{n:02}", 1, job=job, first_in=-3.0)
        s1, s2 = Server(engine, clock, "s1"), Server(engine, clock, "s2")
        running = await s1.claim(limit=40)
        assert len(running) == 40
        for n in range(40):
            occurrences(engine, clock, f"job_q{n:02}", 1, job=job, first_in=-1.0, origin="trigger")
        await asyncio.gather(s1.finish(running), s2.claim(limit=40))
        with engine.connect() as conn:
            asleep = conn.execute(
                sa.select(executions.c.id).where(executions.c.status == "waiting")
            ).scalars().all()
        assert asleep == [], asleep
        assert await s1.store.requeues.wake_stalled() == 0
    finally:
        engine.dispose()


# ----------------------------------------------------------------------------- cancel


async def test_cancel_execution_of_a_running_one_is_a_request_its_owner_reads(migrated_engine, clock, tenants) -> None:
    [ident] = occurrences(migrated_engine, clock, "job_c", 1, job=spec())
    s1 = Server(migrated_engine, clock, "s1")
    [running] = await s1.claim()
    history = HistoryStore(migrated_engine, clock)
    still = await history.cancel_execution("acme", ident, "wrong data")
    assert still.status == "running"
    again = await history.cancel_execution("acme", ident, "second thoughts")  # the first reason stands
    assert again.status == "running"
    [request] = await s1.store.requeues.cancel_requests("s1")
    assert (request.execution_id, request.reason) == (ident, "canceled: wrong data")
    # A retryable failure after the request is not retried.
    await s1.finish([running], worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE)
    row = row_of(migrated_engine, ident)
    assert (row.status, row.dead_reason, row.attempt) == ("canceled", "canceled: wrong data", 1)
    assert await s1.store.requeues.cancel_requests("s1") == []
    with pytest.raises(FailedPrecondition):
        await history.cancel_execution("acme", ident)
