"""Executions armed ahead of their instant under a server's death: real
`tickwheel server` and `tickwheel worker` processes on one real PostgreSQL
and one real etcd (docs/architecture.md, "Hand-outs decided ahead").

The only worker is connected to server b, so b arms the one-off jobs a few
seconds before their instant; b is SIGKILLed holding them armed. Its
session expires, the reaper puts its armed rows back to scheduled, the
worker moves to server a, and an audit of the store finds every job run
exactly once (one execution, one attempt, delivery 1: the armed delivery
was taken back), never early.

Then b is SIGKILLed after it started some (written ``running`` up to a
second before their instant) and before it sent them (the store shows
which: those still running under b and due after it died; on a loaded
machine b may have sent the first ones before the kill): read through server
a's API before their instant they are SCHEDULED, and a RUNNING filter does
not find them (docs/architecture.md, "Never seen early"); the reaper requeues
those after the grace and disarms the rest, and every job still ends
succeeded exactly once, never early, none lost.
"""

from __future__ import annotations

import os
import re
import signal
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.shared.ids import to_us
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.attempts import ALL_ATTEMPTS
from tests.support.faults import eventually
from tests.support.server import start_worker_process

from .test_server_api import bearer

from .test_dispatch_faults import (  # noqa: F401 (engine is a fixture)
    HANDLERS, TICK, audit, create_once_jobs, engine, now, scheduler, spaced, start_server, succeeded,
    tenant_and_credential, wait_worker_connected,
)

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

JOBS = 12


def by_owner(engine: sa.Engine, job_ids: list[str], status: str, due_after: datetime | None = None) -> dict[str, int]:
    """owner -> how many of the jobs' executions it holds in ``status`` (due after ``due_after``, if given)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT owner, count(*) FROM executions WHERE status = :status AND job_id = ANY(:ids) "
                    "AND due_at > :after GROUP BY owner"),
            {"ids": job_ids, "status": status, "after": to_us(due_after) if due_after else -1},
        ).all()
    return {owner: count for owner, count in rows}


def armed(engine: sa.Engine, job_ids: list[str]) -> dict[str, int]:
    """owner -> how many of the jobs' executions it holds armed."""
    return by_owner(engine, job_ids, "armed")


def worker_on_b(stack: ExitStack, tmp_path: Path, postgres_url: str, etcd_endpoint: str, tag: str):
    """Servers a and b, a tenant, and its one worker connected to b (pick
    first: it moves to a when b dies): (a, b, api key, worker)."""
    ids = {name: f"{tag}-{name}-{os.getpid()}" for name in "ab"}
    a = start_server(stack, tmp_path, postgres_url, etcd_endpoint, ids["a"])
    b = start_server(stack, tmp_path, postgres_url, etcd_endpoint, ids["b"])
    api_key, credential = tenant_and_credential(a)
    worker = start_worker_process(stack, tmp_path, f"ipv4:{b.address},{a.address}", credential, "w1",
                                  "--handlers", HANDLERS, "--no-http", "--slots", str(2 * JOBS))  # fmt: skip
    wait_worker_connected(b, "w1")
    return a, b, api_key, worker


def jobs_in_six_seconds(a, api_key: str, step: float, tag: str) -> dict[str, datetime]:
    """JOBS one-off jobs created through a, the first due in 6 s, then every ``step`` s."""
    with scheduler(a.address) as stub:
        return create_once_jobs([stub], api_key, spaced(now() + timedelta(seconds=6), JOBS, step), tag)


def all_succeed_through_a(a, engine: sa.Engine, jobs: dict[str, datetime], margin: float) -> None:
    """The worker moves to a and every job succeeds within ``margin`` s of
    the last instant; then one more sweep, so nothing runs a second time."""
    wait_worker_connected(a, "w1", timeout=30)
    wait = (max(jobs.values()) - now()).total_seconds() + margin
    eventually(lambda: succeeded(engine, list(jobs)) == JOBS, wait, "every job succeeds")
    time.sleep(TICK + 0.2)


def test_sigkill_of_the_server_holding_armed_executions_runs_each_exactly_once_elsewhere(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        a, b, api_key, worker = worker_on_b(stack, tmp_path, postgres_url, etcd_endpoint, "armed")
        jobs = jobs_in_six_seconds(a, api_key, 0.05, "armed")
        job_ids = list(jobs)
        # b arms them (a has no worker to arm for) a few seconds before their instant.
        holders = eventually(lambda: (lambda found: found if sum(found.values()) == JOBS else None)(armed(engine, job_ids)),
                             8, "server b arms every job")
        assert len(holders) == 1
        assert succeeded(engine, job_ids) == 0
        b.process.send_signal(signal.SIGKILL)
        b.process.wait(10)
        all_succeed_through_a(a, engine, jobs, 30)
        assert armed(engine, job_ids) == {}
        audit(engine, jobs, "w1")
        assert a.process.poll() is None and worker.poll() is None


def started_unsent(engine: sa.Engine, job_ids: list[str], due_after: datetime | None = None) -> dict[str, int]:
    """owner -> how many of the jobs' executions it started (running; due after ``due_after``, if given)."""
    return by_owner(engine, job_ids, "running", due_after)


def never_read_running_before_its_instant(a, api_key: str, engine: sa.Engine, jobs: dict[str, datetime]) -> None:
    """Read the runs b started (running, ``handed_out_at`` their send
    instant, never sent: b is dead) through a's GetExecution,
    ListExecutions and SearchExecutions with and without a status filter:
    an answer received before a run's instant shows it SCHEDULED (delivery
    0, no owner) and never in a RUNNING filter; RUNNING only in an answer
    received after its instant (a's clock is read between the two: the
    same host's)."""
    with engine.connect() as conn:
        started = dict(conn.execute(sa.text(
            "SELECT id, job_id FROM executions WHERE status = 'running' AND job_id = ANY(:ids)"), {"ids": list(jobs)}
        ).all())
    assert started
    meta, admin_meta = bearer(api_key), bearer(a.admin_token)
    early = 0
    with grpc.insecure_channel(a.address) as channel:
        stub, admin = scheduler_pb2_grpc.SchedulerServiceStub(channel), admin_pb2_grpc.AdminServiceStub(channel)
        for ident, job_id in sorted(started.items()):
            due = jobs[job_id]
            for read in (
                lambda: [stub.GetExecution(scheduler_pb2.GetExecutionRequest(id=ident), metadata=meta).execution],
                lambda: stub.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job_id), metadata=meta)
                .executions,
                lambda: admin.SearchExecutions(admin_pb2.SearchExecutionsRequest(job_id=job_id), metadata=admin_meta)
                .executions,
            ):
                [seen] = read()
                received = now()
                if received < due:  # after it, a may have requeued, handed out or finished it
                    early += 1
                    assert (seen.status, seen.delivery, seen.owner) == (job_pb2.EXECUTION_STATUS_SCHEDULED, 0, ""), seen
            for status in (job_pb2.EXECUTION_STATUS_RUNNING, job_pb2.EXECUTION_STATUS_SCHEDULED):
                listed = stub.ListExecutions(scheduler_pb2.ListExecutionsRequest(job_id=job_id, statuses=[status]),
                                             metadata=meta).executions
                searched = admin.SearchExecutions(admin_pb2.SearchExecutionsRequest(
                    tenant="acme", job_id=job_id, statuses=[status]), metadata=admin_meta).executions
                received = now()
                for found in (listed, searched):
                    assert [e.status for e in found] in ([], [status]), found
                    if received < due:
                        assert [e.id for e in found] == ([ident] if status == job_pb2.EXECUTION_STATUS_SCHEDULED
                                                         else []), (status, found)
    assert early, "every read came after its run's instant: the test did not test the window"


def test_sigkill_between_the_start_and_the_send_runs_each_exactly_once_elsewhere(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        a, b, api_key, worker = worker_on_b(stack, tmp_path, postgres_url, etcd_endpoint, "started")
        jobs = jobs_in_six_seconds(a, api_key, 0.25, "started")  # over 3 s: the last still armed when b dies
        job_ids = list(jobs)
        found = eventually(lambda: started_unsent(engine, job_ids) or None, 10, "server b starts the first jobs",
                           interval=0.01)
        b.process.send_signal(signal.SIGKILL)
        b.process.wait(10)
        dead_by = now()
        # What b left started and unsent, by the store and the instants
        # rather than by how soon this process got to the kill: b sends a
        # started run at its instant (by the same host's clock), so a run
        # still running under b and due after b was dead was never sent.
        # Read before b's session can expire, let alone its grace end.
        unsent = started_unsent(engine, job_ids, dead_by)
        assert unsent, "b died after sending every run it had started: the test did not test the window"
        assert len(found) == 1 and set(unsent) == set(found), (found, unsent)
        assert succeeded(engine, [job for job, due in jobs.items() if due > dead_by]) == 0
        never_read_running_before_its_instant(a, api_key, engine, jobs)
        all_succeed_through_a(a, engine, jobs, 40)
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                f"SELECT e.job_id, e.status, e.due_at, count(a.*) FILTER (WHERE a.status = 'succeeded') AS ok, "
                f"min(a.started_at) AS started FROM executions e LEFT JOIN {ALL_ATTEMPTS} a ON a.execution_id = e.id "
                "WHERE e.job_id = ANY(:ids) GROUP BY e.id"), {"ids": job_ids}).all()
        assert sorted(r.job_id for r in rows) == sorted(job_ids)  # one execution per job, none lost
        assert all(r.status == "succeeded" and r.ok == 1 for r in rows), rows
        assert all(r.started is None or r.started >= r.due_at for r in rows), "started early"
        assert armed(engine, job_ids) == {} and started_unsent(engine, job_ids) == {}
        assert a.process.poll() is None and worker.poll() is None


# --------------------------------------------------------------------------- without the reaper's grace

LONG_GRACE = "600"
"""The reaper's grace in the tests below (--reaper-grace): never reached
while they wait, so what ends, ended without it."""


def sleepers_on_b(stack: ExitStack, tmp_path: Path, postgres_url: str, etcd_endpoint: str, tag: str):
    """As :func:`worker_on_b`, the servers' reaper grace :data:`LONG_GRACE`
    and the worker running the test handlers (``sleep``)."""
    from tests.support.server import start_cluster_server

    from .test_dispatch_faults import PARTITIONS, SESSION_TTL, cli

    ids = {name: f"{tag}-{name}-{os.getpid()}" for name in "ab"}
    a, b = (start_cluster_server(stack, tmp_path, postgres_url, etcd_endpoint, ids[name], "--partition-count",
                                 str(PARTITIONS), "--reaper-grace", LONG_GRACE, session_ttl=SESSION_TTL)
            for name in "ab")  # fmt: skip
    admin = ("--address", a.address, "--admin-token", a.admin_token)
    api_key = cli("admin", "tenant", "create", "acme", *admin)
    credential = cli("admin", "worker-credential", "create", "--tenant", "acme", *admin)
    worker = start_worker_process(stack, tmp_path, f"ipv4:{b.address},{a.address}", credential, "w1",
                                  "--handlers", "tests.support.handlers:register", "--no-http",
                                  "--slots", str(2 * JOBS))  # fmt: skip
    try:
        wait_worker_connected(b, "w1")
    except AssertionError:
        raise AssertionError((tmp_path / "worker-w1.log").read_text()[-3000:]) from None
    return a, b, api_key, worker


def sleeping_jobs(a, api_key: str, first: datetime, step: float, seconds: float, tag: str) -> dict[str, datetime]:
    """JOBS one-off ``sleep`` jobs of ``seconds``, the first due at ``first``, then every ``step`` s."""
    meta = bearer(api_key)
    created: dict[str, datetime] = {}
    with scheduler(a.address) as stub:
        for index, at in enumerate(spaced(first, JOBS, step)):
            job = job_pb2.Job(name=f"{tag}-{index}", payload=f'{{"seconds": {seconds}}}'.encode(),
                              target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="sleep")))
            job.schedule.once_at.FromDatetime(at)
            reply = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"{tag}-{index}"),
                                   metadata=meta, timeout=10)
            created[reply.job.id] = at
    return created


def sent_and_started(engine: sa.Engine, job_ids: list[str]) -> tuple[int, int] | None:
    """(rows running under one owner sent half a second ago or more, rows it
    started and will send in 0.3 s or later), when both are some."""
    at = to_us(now())
    with engine.connect() as conn:
        found = conn.execute(sa.text(
            "SELECT count(*) FILTER (WHERE handed_out_at <= :sent), count(*) FILTER (WHERE handed_out_at >= :ahead) "
            "FROM executions WHERE status = 'running' AND job_id = ANY(:ids)"),
            {"ids": job_ids, "sent": at - 500_000, "ahead": at + 300_000}).one()
    return tuple(found) if found[0] and found[1] else None


def test_sigkill_between_start_and_send_gives_the_unsent_back_without_the_grace_and_the_sent_run_once(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    """b sent the first runs (the worker runs them, 4 s each) and started
    the next ones, to be sent within its next second, when it is
    SIGKILLed. The worker moves to a and lists what it runs: re-attached,
    their results count, delivery 1, one attempt. The started runs it
    never received are not in its hello: a marks them, and as soon as b's
    session is gone the reaper gives them back (delivery back, no
    attempt); a hands them out as delivery 1. The reaper's grace is ten
    minutes: every job ends succeeded exactly once well within the wait,
    none early, no attempt lost."""
    with ExitStack() as stack:
        a, b, api_key, worker = sleepers_on_b(stack, tmp_path, postgres_url, etcd_endpoint, "unsent")
        jobs = sleeping_jobs(a, api_key, now() + timedelta(seconds=6), 0.25, 4, "unsent")
        job_ids = list(jobs)
        eventually(lambda: sent_and_started(engine, job_ids), 12, "b sent some runs and started the next",
                   interval=0.01)
        b.process.send_signal(signal.SIGKILL)
        b.process.wait(10)
        dead_by = now()
        unsent = started_unsent(engine, job_ids, dead_by + timedelta(seconds=0.05))
        assert unsent, "b died after sending every run it had started: the test did not test the window"
        wait_worker_connected(a, "w1", timeout=30)
        # Nothing waits the grace: ten minutes would fail this wait.
        wait = (max(jobs.values()) - now()).total_seconds() + 40
        eventually(lambda: succeeded(engine, job_ids) == JOBS, wait, "every job succeeds")
        time.sleep(TICK + 0.2)
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                f"SELECT e.job_id, e.status, e.delivery, e.due_at, count(a.*) AS attempts, "
                f"count(a.*) FILTER (WHERE a.status = 'succeeded') AS ok, "
                f"count(a.*) FILTER (WHERE a.status = 'lost') AS lost, min(a.started_at) AS started "
                f"FROM executions e LEFT JOIN {ALL_ATTEMPTS} a ON a.execution_id = e.id "
                "WHERE e.job_id = ANY(:ids) GROUP BY e.id"), {"ids": job_ids}).all()
        assert sorted(r.job_id for r in rows) == sorted(job_ids)  # one execution per job, none lost
        assert all(r.status == "succeeded" and r.attempts == 1 and r.ok == 1 and r.lost == 0 for r in rows), rows
        assert all(r.delivery == 1 for r in rows), rows  # re-attached, or given back and handed out again
        assert all(r.started >= r.due_at for r in rows), "started early"
        assert started_unsent(engine, job_ids) == {} and armed(engine, job_ids) == {}
        reattached = [int(n) for n in re.findall(r"worker w1 connected \(.*?; (\d+) executions re-attached", a.log())]
        assert reattached and reattached[0] >= 1, "the worker held nothing when b died: the sent side was not tested"
        assert "unsent executions of expired session" in a.log()
        assert a.process.poll() is None and worker.poll() is None
