"""Fault injection: the store and the lease service go away during a burst
(issue 15, "A fault-injection suite").

Real `tickwheel server` and `tickwheel worker` processes on one real
PostgreSQL and one real etcd, two tenants, HTTP targets that record every
call. During a burst of one-off jobs:

- PostgreSQL stops (sessions aborted) and comes back on the same data;
- etcd is killed, stays away past the servers' session TTL, and comes back
  on the same data folder.

After each, the audit (tests/support/audit.py) accounts for every occurrence
the schedule engine says the window had: one terminal state each, under its
one idempotency key, never early, and the target saw no key it could not
recognise. Late is allowed; lost, doubled or early is not.
"""

from __future__ import annotations

import os
import re
import signal
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support import audit
from tests.support.etcd import EtcdServer
from tests.support.faults import (
    SESSION_TTL, RecordingTarget, count, create_jobs, eventually, migrated_store, now, settle, spaced, start_server,
    start_worker, tenant, wait_connected,
)
from tests.support.postgres import PostgresServer
from tickwheel.shared.ids import to_us

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

SUCCEEDED = "SELECT count(*) FROM executions WHERE status = 'succeeded'"


def test_postgres_restarting_during_a_burst_loses_doubles_and_hastens_nothing(
    tmp_path: Path, postgres_url: str, postgres_server: PostgresServer, etcd_endpoint: str
) -> None:
    target = RecordingTarget(hold=0.5)
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"pg-{os.getpid()}")
        acme, globex = tenant(server, "acme"), tenant(server, "globex")
        start_worker(stack, tmp_path, server.address, acme.credential, "acme-w")
        start_worker(stack, tmp_path, server.address, globex.credential, "globex-w")
        wait_connected(server, "acme-w")
        wait_connected(server, "globex-w")
        first = now() + timedelta(seconds=1.5)
        # The burst, then a sparse tail a second apart, well past the latest
        # the burst may be found under way (15 s after its first instant):
        # however slow the machine, instants fall due after the store goes down.
        tail = spaced(first + timedelta(seconds=5), 21, 1.0)
        create_jobs(server.address, acme, target.url("/hold"), spaced(first, 24, 0.2), "acme")
        create_jobs(server.address, globex, target.url("/ok"),
                    spaced(first + timedelta(seconds=0.1), 24, 0.2) + tail, "globex")
        dues = sorted(spaced(first, 24, 0.2) + spaced(first + timedelta(seconds=0.1), 24, 0.2) + tail)
        until = dues[-1] + timedelta(seconds=0.5)

        eventually(lambda: count(engine, SUCCEEDED) >= 6, max(0.0, (first - now()).total_seconds()) + 15,
                   "the burst is under way")
        # Stopped with calls in flight, results queued and hand-outs due. A
        # fast shutdown: the fixture's server runs with synchronous_commit and
        # fsync off, so a crash (immediate) would lose commits it had
        # acknowledged, which no production PostgreSQL does.
        postgres_server.stop(mode="fast")
        down = now()
        # Down for 1.5 s, and until four due instants have passed: a loaded
        # machine may have reached the outage after the burst's last ones.
        ahead = [due for due in dues if due >= down]
        assert len(ahead) >= 4, f"the store went down at {down}, after the last due instants: nothing to test"
        fourth = ahead[3]
        back = max(down + timedelta(seconds=1.5), fourth + timedelta(milliseconds=1))
        eventually(lambda: now() >= back, 30, "jobs fall due while the store is down")
        postgres_server.start()
        engine.dispose()  # the pool's connections died with the server

        left = settle(engine, ["acme", "globex"], until, timeout=30)
        assert server.process.poll() is None, "the server died with PostgreSQL:\n" + server.log()
        audit.assert_clean(engine, ["acme", "globex"], until, deliveries=target.deliveries)
        assert not left  # the audit names them if not
        # The outage covered due instants (otherwise this tested nothing).
        assert count(engine, "SELECT count(*) FROM executions WHERE due_at >= :d AND due_at < :u",
                     d=to_us(down), u=to_us(back)) >= 4


def test_etcd_down_past_the_session_ttl_during_a_burst_loses_doubles_and_hastens_nothing(
    tmp_path: Path, postgres_url: str, etcd_server: EtcdServer
) -> None:
    target = RecordingTarget(hold=1.5)
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        one = start_server(stack, tmp_path, postgres_url, etcd_server.endpoint, f"etcd-a-{os.getpid()}")
        two = start_server(stack, tmp_path, postgres_url, etcd_server.endpoint, f"etcd-b-{os.getpid()}")
        acme, globex = tenant(one, "acme"), tenant(one, "globex")
        start_worker(stack, tmp_path, one.address, acme.credential, "acme-w")
        start_worker(stack, tmp_path, two.address, globex.credential, "globex-w")
        wait_connected(one, "acme-w")
        wait_connected(two, "globex-w")
        eventually(lambda: count(engine, "SELECT count(DISTINCT owner) FROM partitions") == 2, 15,
                   "both servers own partitions")
        first = now() + timedelta(seconds=1.5)
        create_jobs(one.address, acme, target.url("/hold"), spaced(first, 20, 0.25), "acme")
        create_jobs(two.address, globex, target.url("/hold"), spaced(first + timedelta(seconds=0.1), 20, 0.25), "globex")
        until = first + timedelta(seconds=5)

        eventually(lambda: count(engine, "SELECT count(*) FROM executions WHERE status = 'running'") >= 4, 15,
                   "calls are in progress")
        etcd_server.stop(signal.SIGKILL)
        for server in (one, two):
            eventually(lambda: re.search(r"etcd session [0-9a-f]+ lost", server.log()), SESSION_TTL + 5,
                       "the servers' sessions expire")
        etcd_server.start()  # the same data folder: leases and keys come back, expired

        left = settle(engine, ["acme", "globex"], until, timeout=40)
        assert one.process.poll() is None and two.process.poll() is None
        audit.assert_clean(engine, ["acme", "globex"], until, deliveries=target.deliveries)
        assert not left
