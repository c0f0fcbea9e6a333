"""Two `tickwheel server` processes on a three-member etcd cluster through a
member fault (docs/operations.md, "etcd"): the leader killed; the member
each server is connected to (the first in its ``--etcd`` list) killed; that
member frozen (SIGSTOP) past the session TTL, then resumed; all three
restarted one by one (a rolling upgrade).

Real servers on one real PostgreSQL, a `tickwheel worker` on each, HTTP jobs
against a recording target: one-offs due every few tenths of a second across
the fault, and cron jobs every minute when the window holds a minute
boundary (it is stretched by up to 12 s to hold one; cron's resolution is a
minute and a test must stay well under one). Afterwards:

* the audit (tests/support/audit.py): every expected occurrence has exactly
  one execution, in its terminal state, never handed out or started before
  due, and the target saw each call once;
* no partition was owned by two servers at once: sampling the store's
  fencing epochs all through, each partition's epoch only rises and each
  epoch belongs to one server;
* no server exited; a session lost is opened again (the log says so) and
  the log says each move to another member once, not a line per retry.

Every wait is bounded; every process is stopped at the end.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support import audit
from tests.support.etcd_cluster import EtcdCluster
from tests.support.faults import (
    PARTITIONS, SESSION_TTL, RecordingTarget, Tenant, count, create_jobs, eventually, migrated_store, now, settle,
    spaced, start_server, start_worker, tenant, wait_connected,
)

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

FAULTS = ("kill_leader", "kill_first", "freeze_first", "rolling_restart")
LOG_LINES = {"kill_leader": 4, "kill_first": 4, "freeze_first": 4, "rolling_restart": 8}
"""At most this many moves to another member per server's log."""
CRON_ROOM = timedelta(seconds=7)
"""A minute boundary at least this long before the window's end: the cron
jobs fire there, a 5 s jitter and a hand-out included."""
CRON_STRETCH = 12
"""Seconds the window is stretched, at most, to hold a minute boundary."""


class EpochSampler(threading.Thread):
    """Reads the ``partitions`` table every few milliseconds until stopped:
    ``owners[(partition, epoch)]`` is every server seen holding that epoch,
    ``falls`` every epoch seen lower than one seen before it."""

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.owners: dict[tuple[int, int], set[str]] = defaultdict(set)
        self.falls: list[str] = []
        self.samples = 0
        self._done = threading.Event()
        self.start()

    def run(self) -> None:
        highest: dict[int, int] = {}
        query = sa.text("SELECT partition, owner, epoch FROM partitions")
        while not self._done.is_set():
            try:
                with self.engine.connect() as conn:
                    rows = conn.execute(query).all()
            except sa.exc.OperationalError:
                rows = []
            for row in rows:
                self.owners[(row.partition, row.epoch)].add(row.owner)
                if row.epoch < highest.get(row.partition, 0):
                    self.falls.append(f"partition {row.partition}: epoch {row.epoch} after {highest[row.partition]}")
                highest[row.partition] = max(highest.get(row.partition, 0), row.epoch)
            self.samples += 1
            self._done.wait(0.01)  # sampling the store; nothing to await

    def finish(self) -> None:
        self._done.set()
        self.join(10)

    def shared(self) -> dict[tuple[int, int], set[str]]:
        return {key: owners for key, owners in self.owners.items() if len(owners) > 1}


def create_cron_jobs(address: str, owner: Tenant, url: str, end_at, tag: str) -> None:
    """Two cron jobs every minute (one exact, one with a 5 s jitter window), ending at ``end_at``."""
    meta = (("authorization", f"Bearer {owner.api_key}"),)
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for name, jitter in (("exact", 0), ("jittered", 5)):
            job = job_pb2.Job(name=f"{tag}-{name}", target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
            job.schedule.cron.expression = "* * * * *"
            job.end_at.FromDatetime(end_at)
            if jitter:
                job.jitter.window.FromSeconds(jitter)
            else:
                job.jitter.exact = True
            job.retry_policy.max_attempts = 3
            job.retry_policy.initial_backoff.FromMilliseconds(100)
            job.retry_policy.max_backoff.FromMilliseconds(300)
            stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=f"{tag}-{name}"), metadata=meta, timeout=10)


def member_orders(cluster: EtcdCluster, fault: str) -> tuple[list[int], list[int]]:
    """Each server's ``--etcd`` order. For the leader's death, one server is
    connected to the leader and the other to a follower; otherwise both to
    the same follower, the member the fault hits."""
    leader = cluster.leader()
    first, second = [i for i in range(len(cluster.members)) if i != leader]
    if fault == "kill_leader":
        return [first, second, leader], [leader, second, first]
    return [first, second, leader], [first, leader, second]


def inflict(cluster: EtcdCluster, fault: str, orders: tuple[list[int], list[int]]) -> None:
    if fault == "kill_leader":
        cluster.kill(cluster.leader())
    elif fault == "kill_first":
        cluster.kill(orders[0][0])
    elif fault == "freeze_first":
        cluster.freeze(orders[0][0])
        try:
            time.sleep(SESSION_TTL + 2.0)  # the fault's length: past the session TTL
        finally:
            cluster.thaw(orders[0][0])
    else:
        for index in (*orders[0][:2], orders[0][2]):  # followers first, the leader last
            cluster.restart(index)
            time.sleep(1.0)  # a rolling upgrade's pause between members


@pytest.mark.parametrize("fault", FAULTS)
def test_servers_ride_out_an_etcd_member_fault(fault: str, tmp_path: Path, postgres_url: str,
                                               etcd_cluster: EtcdCluster) -> None:  # fmt: skip
    target = RecordingTarget(hold=1.0)
    orders = member_orders(etcd_cluster, fault)
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        a = start_server(stack, tmp_path, postgres_url, etcd_cluster.spec(orders[0]), "qa")
        b = start_server(stack, tmp_path, postgres_url, etcd_cluster.spec(orders[1]), "qb")
        acme = tenant(a, "acme")
        start_worker(stack, tmp_path, f"ipv4:{a.address},{b.address}", acme.credential, "wa")
        start_worker(stack, tmp_path, f"ipv4:{b.address},{a.address}", acme.credential, "wb")
        wait_connected(a, "wa")
        wait_connected(b, "wb")
        eventually(lambda: count(engine, "SELECT count(DISTINCT owner) FROM partitions") == 2, 15,
                   "both servers own partitions")  # fmt: skip
        sampler = EpochSampler(engine)
        stack.callback(sampler.finish)

        first = now() + timedelta(seconds=1.5)
        instants = spaced(first, 40, 0.25)
        # A quarter fail their first attempt: retries run through the fault,
        # and the tenant's circuit breaker (open at half the calls failing,
        # pausing retries for 30 s) stays closed.
        flaky = instants[3::4]
        create_jobs(a.address, acme, target.url("/ok"), [at for at in instants if at not in flaky], "ok")
        create_jobs(b.address, acme, target.url("/flaky"), flaky, "flaky")
        until = instants[-1] + timedelta(seconds=1)
        boundary = (now() + timedelta(seconds=2)).replace(second=0, microsecond=0) + timedelta(minutes=1)
        if boundary + CRON_ROOM <= until + timedelta(seconds=CRON_STRETCH):
            # a minute boundary in (or near) the window: the cron jobs fire there
            until = max(until, boundary + CRON_ROOM)
            create_cron_jobs(b.address, acme, target.url("/ok"), until, "cron")
        time.sleep(2.0)  # work is running on both servers when the fault comes
        inflict(etcd_cluster, fault, orders)

        stack.callback(lambda: print("\n".join(f"--- {s.log_path.name}\n{s.log()}" for s in (a, b))))  # shown on failure
        left = settle(engine, ["acme"], until, timeout=40)
        assert "circuit open" not in a.log() + b.log(), "the tenant's circuit opened: retries paused, the audit is moot"
        sampler.finish()
        etcd_cluster.start()  # the members killed come back; the servers go on
        assert a.process.poll() is None and b.process.poll() is None, "a server exited"
        audit.assert_clean(engine, ["acme"], until, deliveries=target.deliveries)
        assert not left
        assert sampler.samples > 10
        assert not sampler.falls, sampler.falls
        assert not sampler.shared(), f"an epoch held by two servers: {sampler.shared()}"
        for server in (a, b):
            log = server.log()
            lost = re.findall(r"etcd session ([0-9a-f]+) lost", log)
            opened = re.findall(r"etcd session ([0-9a-f]+) open", log)
            assert len(opened) == len(lost) + 1, f"a lost session not opened again:\n{log}"
            # A move per member that failed it (a follower's keep-alive
            # waits out an election too), not a line per retry: retries come
            # every 0.05 to 0.5 s for seconds.
            switches = re.findall(r".*etcd endpoint \S+ failed.*", log)
            assert len(switches) <= LOG_LINES[fault], "\n".join(switches)
        assert count(engine, "SELECT count(*) FROM partitions") == PARTITIONS
