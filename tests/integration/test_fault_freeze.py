"""Fault injection: a server frozen past its session TTL, then resumed
(issue 15, item 10, "A fault-injection suite").

A long GC pause, a frozen VM or SIGSTOP: the process is alive but silent.
Its etcd session expires, its partitions move to the other server and the
reaper requeues the executions it had handed out (their worker, connected
only to it, cannot re-attach elsewhere: those run again, under the same key,
which the target recognises). When the process resumes it still believes in
its old session until it notices otherwise; docs/architecture.md (Semantics:
Delivery): a server whose session is in doubt hands nothing out until it
holds a new one. Anything it handed
out under the dead session would be reaped and run a second time.

Real `tickwheel server` processes (two) on one real PostgreSQL and one real
etcd, a worker on each (a `tickwheel worker` process on the other server;
on the frozen one the worker runtime in this process, which keeps its stream
open through the freeze); a burst of one-off HTTP jobs runs across it. Afterwards the audit (tests/support/audit.py)
accounts for every occurrence, and nothing handed out after the resume was
requeued or reached its target twice.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support import audit
from tests.support.faults import (
    LOOPBACK, PARTITIONS, RecordingTarget, count, create_jobs, eventually, migrated_store, now, settle, spaced, start_server,
    start_worker, tenant, wait_connected,
)
from tickwheel.shared.ids import to_us
from tickwheel.shared.targets import TargetPolicy
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

STEP_WAIT = 60.0
"""Seconds each step of the story (partitions owned, executions running,
the resumed server re-stamped) may take. Each wait
ends as soon as its state is seen, so the bound only ends a test that would
otherwise wait forever; it is sized for a loaded machine, where each step
is several processes starved of CPU."""

FROZEN_LOCKS_WAIT = 60.0 + STEP_WAIT
"""Seconds the frozen server's partitions may take to move, and what it had
handed out to be requeued. A server frozen inside a transaction keeps its
locks until PostgreSQL ends the frozen session: a claim's shared locks on
its partitions' rows (store/partitions.py, check_epochs), for which the
successor's epoch raise waits, after one session TTL idle (the claim's own
limit: "A frozen holder" there; test_frozen_claim.py); a hand-out's or
result batch's row locks, which the requeue waits for, after the same
session TTL, the server's idle limit (test_frozen_locks.py). It happens
only when the freeze lands between a transaction's statements; not what
this test is about."""


class PatientWorker:
    """The real worker runtime (``tickwheel_worker.Worker``, HTTP targets on
    loopback) in a thread of its own, presuming its server dead only after 60
    heartbeat intervals of silence: it keeps its stream through the freeze, as
    workers with the default settings do through a freeze shorter than 15 s
    (3 intervals of 5 s), and is there the moment its server resumes."""

    def __init__(self, address: str, credential: str, worker_id: str, slots: int = 8) -> None:
        self.worker = Worker(WorkerConfig(
            address=address, credential=credential, handlers=HandlerRegistry(), worker_id=worker_id, slots=slots,
            server_silence_intervals=60, address_policy=TargetPolicy.allowing([LOOPBACK]),
        ))  # fmt: skip
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._running = asyncio.run_coroutine_threadsafe(self.worker.run(), self.loop)
        connected = asyncio.run_coroutine_threadsafe(asyncio.wait_for(self.worker.connected.wait(), 20), self.loop)
        connected.result(25)

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.worker.stop(1.0), self.loop).result(15)
            self._running.result(15)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(15)
            self.loop.close()


class DeadSessionWatch(threading.Thread):
    """Reads the store every few milliseconds: executions handed out at or
    after ``since`` under the session ``owner`` (``seen``), until
    ``settled()`` has held for ``margin`` seconds (``settled`` is then True),
    or for ``timeout`` seconds in all."""

    def __init__(self, engine: sa.Engine, owner: str, since: datetime, settled: Callable[[], bool],
                 margin: float, timeout: float) -> None:
        super().__init__(daemon=True)
        self.seen: set[str] = set()
        self.settled = False
        self._args = (engine, owner, to_us(since), settled, margin, timeout)
        self.start()

    def run(self) -> None:
        engine, owner, since_us, settled, margin, timeout = self._args
        query = sa.text("SELECT id FROM executions WHERE owner = :o AND handed_out_at >= :t")
        end = time.monotonic() + timeout
        next_look = 0.0
        with engine.connect() as conn:
            while time.monotonic() < end:
                self.seen.update(conn.execute(query, {"o": owner, "t": since_us}).scalars())
                conn.rollback()
                if not self.settled and time.monotonic() >= next_look:
                    next_look = time.monotonic() + 0.1
                    if settled():
                        self.settled = True
                        end = min(end, time.monotonic() + margin)
                time.sleep(0.002)  # sampling the store; nothing to await


def test_a_server_frozen_past_its_ttl_hands_out_nothing_under_its_dead_session_when_it_resumes(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget(hold=2.0)
    ids = {name: f"freeze-{name}-{os.getpid()}" for name in ("a", "b")}
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        a = start_server(stack, tmp_path, postgres_url, etcd_endpoint, ids["a"])
        b = start_server(stack, tmp_path, postgres_url, etcd_endpoint, ids["b"])
        # Never leave the frozen one stopped, whatever happens below.
        stack.callback(lambda: a.process.poll() is None and a.process.send_signal(signal.SIGCONT))
        acme = tenant(a, "acme")
        wa = PatientWorker(a.address, acme.credential, "wa")  # connected to a only
        stack.callback(wa.stop)
        # Two slots: while a is frozen, work due piles up ready, and is there when a resumes.
        start_worker(stack, tmp_path, b.address, acme.credential, "wb", slots=2)
        wait_connected(b, "wb")
        eventually(lambda: count(engine, "SELECT count(DISTINCT owner) FROM partitions") == 2, STEP_WAIT,
                   "both servers own partitions")
        first = now() + timedelta(seconds=1.5)
        create_jobs(a.address, acme, target.url("/hold"), spaced(first, 6, 0.05), "held")
        burst = spaced(first + timedelta(seconds=0.5), 60, 0.1)
        create_jobs(a.address, acme, target.url("/brief"), burst, "burst")
        until = burst[-1] + timedelta(milliseconds=1)

        # Hand-outs are stamped with the server's etcd session, which its log names.
        [session] = re.findall(r"etcd session ([0-9a-f]+) open", a.log())
        running_under = "SELECT count(*) FROM executions WHERE status = 'running' AND owner = :s"
        eventually(lambda: count(engine, running_under, s=session) >= 2, STEP_WAIT, "server a holds running executions")
        a.process.send_signal(signal.SIGSTOP)
        eventually(
            lambda: count(engine, "SELECT count(*) FROM partitions WHERE owner = :b", b=ids["b"]) == PARTITIONS,
            FROZEN_LOCKS_WAIT, "the frozen server's partitions move to the other",
        )  # fmt: skip
        eventually(lambda: count(engine, running_under, s=session) == 0, FROZEN_LOCKS_WAIT,
                   "the reaper requeues what the frozen server had handed out")
        assert count(engine, "SELECT count(*) FROM executions WHERE status = 'scheduled' AND ready_at <= :n",
                     n=to_us(now())) > 0, "no work is ready for the resumed server to hand out"
        resuming = now()  # before the signal: the resumed server cannot read its clock earlier
        # Rows it hands out under its dead session are re-stamped within milliseconds
        # once it has a new one: watch the store closely meanwhile, until it has
        # re-stamped what it ran onto its new session (after which its gateway
        # hands out under the new one) and 3 s more, however long that takes.
        watch = DeadSessionWatch(engine, session, resuming, lambda: f"from session {session} to " in a.log(),
                                 margin=3.0, timeout=STEP_WAIT)
        a.process.send_signal(signal.SIGCONT)
        watch.join()
        assert watch.settled, f"the resumed server did not re-stamp from its dead session {session}:\n{a.log()}"

        left = settle(engine, ["acme"], until, timeout=30)
        snapshot = audit.assert_clean(engine, ["acme"], until, deliveries=target.deliveries)
        assert not left
        assert a.process.poll() is None and b.process.poll() is None
        assert not watch.seen, f"handed out under the dead session {session} after the resume: {sorted(watch.seen)}"
        after = [x for x in snapshot.attempts if x.started_at >= to_us(resuming)]
        assert after, "nothing was handed out after the resume: the test proved nothing"
        requeued = [(x.execution_id, x.delivery, x.worker_id, x.error) for x in after if x.status == "lost"]
        assert not requeued, f"handed out after the resume, then requeued (ran twice): {requeued}"
        twice = {x.execution_id: target.deliveries.calls[x.execution_id] for x in after
                 if target.deliveries.count(x.execution_id) > 1 and x.delivery == 1}  # fmt: skip
        assert not twice, f"handed out after the resume and called twice: {twice}"
