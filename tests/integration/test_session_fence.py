"""A server frozen past its session TTL hands nothing out under the dead
session (issue 15, item 10): real `tickwheel server` and `tickwheel worker`
processes on one real PostgreSQL and one real etcd.

Server A reaches etcd through a TCP proxy the test can cut; server B reaches
it directly. The only worker is connected to A, so every execution goes
through A's gateway. A is frozen with SIGSTOP (and, as a frozen VM's
network would be, cut off from etcd) for longer than its TTL plus the
reaper's grace: its session expires, B takes its partitions and becomes the
reaper. Then A is resumed with SIGCONT while still cut off from etcd, so it
cannot open a new session for a while: executions that came due during the
freeze wait (late, not lost) until it has one. Before the fence, A handed
them out at once under the dead session; B's reaper requeued them while the
worker ran them, and A handed them out again: each ran two or three times.

Every wait is bounded; every process started here is stopped in a ``finally``.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, scheduler_pb2

from tests.integration.test_dispatch_faults import cli, engine, now, scheduler, spaced, succeeded
from tests.support.faults import eventually
from tests.support.attempts import ALL_ATTEMPTS
from tests.support.etcd_proxy import EtcdProxy
from tests.support.server import start_cluster_server, start_worker_process, stop_process
from tickwheel.shared.ids import to_us

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]
__all__ = ["engine"]  # the fixture, imported for the test below

SESSION_TTL = 2
REAPER = 2 * SESSION_TTL + 2  # the reaper's grace (one TTL) and pass interval (2 s), after the expiry
RUN_SECONDS = 5  # each execution runs this long: longer than the reaper takes to requeue it


def create_sleep_jobs(address: str, api_key: str, instants: list[datetime], tag: str) -> dict[str, datetime]:
    """One `sleep` one-off job (``RUN_SECONDS``) per instant; job id -> due instant."""
    meta = (("authorization", f"Bearer {api_key}"),)
    created: dict[str, datetime] = {}
    with scheduler(address) as stub:
        for index, at in enumerate(instants):
            job = job_pb2.Job(name=f"{tag}-{index}", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="sleep")),
                              payload=f'{{"seconds": {RUN_SECONDS}}}'.encode())
            job.schedule.once_at.FromDatetime(at)
            reply = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"{tag}-{index}"),
                                   metadata=meta, timeout=10)
            created[reply.job.id] = at
    return created


def attempts_of(engine: sa.Engine, job_ids: list[str]) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(
            sa.text(
                f"""
                SELECT e.job_id, e.id, e.status AS execution_status, e.due_at, a.delivery, a.attempt,
                       a.status, a.started_at, a.worker_id
                FROM executions e LEFT JOIN {ALL_ATTEMPTS} a ON a.execution_id = e.id
                WHERE e.job_id = ANY(:ids) ORDER BY e.job_id, a.delivery
                """
            ),
            {"ids": job_ids},
        ).all()


def test_a_server_frozen_past_its_ttl_hands_nothing_out_under_the_dead_session(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    proxy = EtcdProxy(etcd_endpoint)
    suffix = os.getpid()
    with ExitStack() as stack:
        stack.callback(proxy.close)
        a = start_cluster_server(stack, tmp_path, postgres_url, proxy.endpoint, f"fence-a-{suffix}",
                                 "--partition-count", "8", session_ttl=SESSION_TTL)
        b = start_cluster_server(stack, tmp_path, postgres_url, etcd_endpoint, f"fence-b-{suffix}",
                                 "--partition-count", "8", session_ttl=SESSION_TTL)
        stack.callback(lambda: a.process.send_signal(signal.SIGCONT))  # never leave it stopped
        admin = ("--address", b.address, "--admin-token", b.admin_token)
        api_key = cli("admin", "tenant", "create", "acme", *admin)
        credential = cli("admin", "worker-credential", "create", "--tenant", "acme", "--handler", "sleep",
                         "--handler", "echo", "--handler", "kill-worker", *admin)
        start_worker_process(stack, tmp_path, a.address, credential, "w1",
                             "--handlers", "tests.support.handlers:register", "--no-http", "--slots", "100")
        eventually(lambda: "worker w1 connected" in a.log(), 20, "the worker connects to A")

        before = create_sleep_jobs(b.address, api_key, spaced(now() + timedelta(seconds=2), 5, 0.2), "before")
        eventually(lambda: succeeded(engine, list(before)) == len(before), 20, "the first jobs ran")

        # Nothing in flight: freeze A and cut it off from etcd.
        a.process.send_signal(signal.SIGSTOP)
        proxy.cut()
        stopped_at = now()
        during = create_sleep_jobs(b.address, api_key, spaced(stopped_at + timedelta(seconds=1), 20, 0.1), "during")
        time.sleep(max(0.0, (stopped_at - now()).total_seconds() + SESSION_TTL + REAPER + 1))
        a.process.send_signal(signal.SIGCONT)
        resumed_at = now()
        # A is awake but cannot open a new session: long enough for the reaper
        # to requeue anything it handed out now, and for runs to be seen.
        time.sleep(RUN_SECONDS + 1)
        restored_at = now()
        proxy.restore()
        after = create_sleep_jobs(b.address, api_key, spaced(now() + timedelta(seconds=1), 5, 0.2), "after")

        expected = {**before, **during, **after}
        eventually(lambda: succeeded(engine, list(expected)) == len(expected), 40, "every job succeeds")
        time.sleep(3)  # a reaper pass and a sweep more: nothing runs a second time

        rows = attempts_of(engine, list(expected))
        under_the_dead_session = [
            (r.job_id, r.delivery, r.status) for r in rows
            if r.started_at is not None and to_us(resumed_at) <= r.started_at < to_us(restored_at)
        ]
        assert not under_the_dead_session, f"handed out while A had no live session: {under_the_dead_session}"
        by_job: dict[str, list[sa.Row]] = {}
        for row in rows:
            by_job.setdefault(row.job_id, []).append(row)
        assert sorted(by_job) == sorted(expected), "jobs without an execution"
        not_once = {
            job: [(r.delivery, r.attempt, r.status, r.worker_id) for r in found]
            for job, found in by_job.items()
            if [(r.execution_status, r.delivery, r.attempt, r.status, r.worker_id) for r in found]
            != [("succeeded", 1, 1, "succeeded", "w1")]
        }
        assert not not_once, f"not run exactly once: {not_once}"
        early = [(r.job_id, r.started_at, r.due_at) for r in rows if r.started_at < r.due_at]
        assert not early, f"handed out before due: {early}"
        late = [r.job_id for r in rows if r.job_id in during and r.started_at < to_us(restored_at)]
        assert not late, f"due during the freeze, handed out before A had a new session: {late}"
        assert "handing out stops" in a.log() and "re-stamped" in a.log()
        assert stop_process(b.process) == 0, b.log()
        assert stop_process(a.process) == 0, a.log()
