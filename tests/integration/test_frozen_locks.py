"""A server frozen in the middle of a transaction that holds row locks does
not keep another server from recovering its runs for longer than its
session: its sessions may sit idle inside a transaction no longer than the
session TTL (docs/architecture.md, "Data", the server's idle limit), however
large the configured ``store_idle_in_transaction_timeout``.

Real `tickwheel server` processes (two) on one real PostgreSQL and one real
etcd, a `tickwheel worker` on each, both servers configured with an idle
limit of 600 s. Server a stops its own process (SIGSTOP:
tests/support/freezehook) inside its first result batch, right after the
read that locks the batch's executions ``FOR UPDATE`` and before its writes:
those runs are ``running`` under a's session and locked by a session that
nothing will wake. Its etcd session expires; the reaper (b's, elected)
requeues a dead session's running rows, taking them ``SKIP LOCKED``, so the
locked ones only once the database has ended a's frozen session.

Invariants: the frozen batch's runs are requeued (a ``lost`` attempt each)
while a is still stopped; once a resumes, its batch writes nothing (its
session is gone; retried, it meets the requeued deliveries); every occurrence
ends in exactly one terminal state (tests/support/audit.py), and no two calls
of one run overlap at the target.
"""

from __future__ import annotations

import json
import os
import signal
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support import audit
from tests.support.faults import (
    HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, LOOPBACK, PARTITIONS, SESSION_TTL, RecordingTarget, count, create_jobs,
    eventually, migrated_store, now, settle, spaced, start_worker, tenant, wait_connected,
)
from tests.support.server import REPO, ServerProcess, start_server_process, stop_process

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

CONFIGURED_IDLE = 600
"""Both servers' ``store_idle_in_transaction_timeout``: what held a frozen
transaction's row locks before the session TTL bounded it."""
STEP_WAIT = 60.0
"""Seconds each step of the story may take on a loaded machine (a backstop:
each wait ends as soon as its state is seen)."""
RECOVERY_WAIT = 2 * STEP_WAIT
"""Seconds the frozen batch's runs may take to be requeued. By design the
database ends the frozen session one session TTL (2 s here) after its last
statement, and the reaper requeues a dead session's runs one grace (the
TTL) after it died, at its next 2 s pass: the wait is a backstop for a
loaded machine. Five times shorter than :data:`CONFIGURED_IDLE`, which is
what the frozen locks were held for before (the test fails on that code)."""
FREEZE = Path(__file__).resolve().parents[1] / "support" / "freezehook"


def start(stack: ExitStack, tmp_path: Path, store: str, etcd: str, server_id: str,
          env: dict[str, str] | None = None) -> ServerProcess:
    """`tickwheel server` as tests/support/faults.py starts one, with the
    generous idle limit, its sessions named ``server_id`` in PostgreSQL."""
    config = tmp_path / f"{server_id}.toml"
    config.write_text(f"heartbeat_interval = {HEARTBEAT_INTERVAL}\nheartbeat_timeout = {HEARTBEAT_TIMEOUT}\n"
                      f"store_idle_in_transaction_timeout = {CONFIGURED_IDLE}\n")
    named = store + ("&" if "?" in store else "?") + f"application_name={server_id}"
    server = start_server_process(
        tmp_path, "--store", named, "--etcd", etcd, "--server-id", server_id, "--session-ttl", str(SESSION_TTL),
        "--partition-count", str(PARTITIONS), "--config", str(config), "--allow-target-network", LOOPBACK, env=env,
    )  # fmt: skip
    stack.callback(stop_process, server.process)
    return server


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (``T`` in its stat)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_server_frozen_holding_row_locks_keeps_its_runs_from_recovery_no_longer_than_its_session(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget()
    ids = {name: f"frozenlocks-{name}-{os.getpid()}" for name in ("a", "b")}
    mark = tmp_path / "frozen.json"
    freeze = {"TICKWHEEL_TEST_FREEZE_MARK": str(mark),
              "PYTHONPATH": os.pathsep.join([str(FREEZE), str(REPO), os.environ.get("PYTHONPATH", "")])}
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        a = start(stack, tmp_path, postgres_url, etcd_endpoint, ids["a"], env=freeze)
        b = start(stack, tmp_path, postgres_url, etcd_endpoint, ids["b"])
        # Never leave the frozen one stopped, whatever happens below.
        stack.callback(lambda: a.process.poll() is None and a.process.send_signal(signal.SIGCONT))
        acme = tenant(b, "acme")
        start_worker(stack, tmp_path, a.address, acme.credential, "wa")
        start_worker(stack, tmp_path, b.address, acme.credential, "wb")
        wait_connected(a, "wa")
        wait_connected(b, "wb")
        eventually(lambda: count(engine, "SELECT count(DISTINCT owner) FROM partitions") == 2, STEP_WAIT,
                   "both servers own partitions")
        instants = spaced(now() + timedelta(seconds=1.5), 40, 0.05)
        create_jobs(b.address, acme, target.url("/ok"), instants, "quick")
        until = instants[-1] + timedelta(milliseconds=1)

        eventually(mark.exists, STEP_WAIT, "server a froze in a result batch")
        # What the frozen batch locked, as its own read saw it: read from the store now, the runs may
        # already be requeued (one session TTL on), as a loaded machine showed (load 25: found none running).
        locked = json.loads(mark.read_text())
        assert locked and stopped(a.process.pid)
        assert all(status == "running" for _, _, status in locked), f"the frozen batch locked running runs: {locked}"
        frozen = [ident for ident, _, _ in locked]
        held = {ident: delivery for ident, delivery, _ in locked}

        requeued = "SELECT count(DISTINCT execution_id) FROM attempts WHERE execution_id = ANY(:ids) AND status = 'lost'"
        eventually(lambda: count(engine, requeued, ids=frozen) == len(frozen), RECOVERY_WAIT,
                   "the runs the frozen server's batch locked are requeued")
        assert stopped(a.process.pid), "they were requeued while the server that locked them was still frozen"
        a.process.send_signal(signal.SIGCONT)

        left = settle(engine, ["acme"], until, timeout=STEP_WAIT)
        snapshot = audit.assert_clean(engine, ["acme"], until, deliveries=target.deliveries)
        assert not left
        assert a.process.poll() is None and b.process.poll() is None, "both servers live on"
        finished = {x.id: x for x in snapshot.executions if x.id in frozen}
        assert all(x.status == "succeeded" and x.delivery > held[x.id] for x in finished.values()), (
            f"the frozen batch's runs ended on a later delivery, not the frozen one: {finished}"
        )
        woken = [(x.execution_id, x.delivery, x.status) for x in snapshot.attempts
                 if x.execution_id in held and x.delivery == held[x.execution_id] and x.status != "lost"]
        assert not woken, f"the woken server's batch wrote the frozen deliveries' outcomes: {woken}"
        calls: dict[str, list[tuple[float, float]]] = {}
        for call in list(target.calls):
            calls.setdefault(call.key, []).append((call.began, call.ended))
        overlapping = {key: spans for key, spans in calls.items()
                       if any(later[0] < earlier[1] for earlier, later in zip(sorted(spans), sorted(spans)[1:]))}
        assert not overlapping, f"calls of one run overlapped at the target: {overlapping}"
