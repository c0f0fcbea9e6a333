"""Benchmark: the server's own lock waits at the peak, against its
``lock_timeout``. N one-off jobs due at the same second, on PostgreSQL +
etcd, a real ``tickwheel server`` and no-op workers (as ``bench_burst.py``),
while the tenant's clients change those jobs as the dispatcher claims them.

    .venv/bin/python loadtest/bench_lockmix.py [--jobs 30000] [--clients 8] [--workers 4] [--lead 30]
                                               [--lock-timeout 1] [--pg URL] [--etcd HOST:PORT] [--logs DIR]
                                               [--pg-set NAME=VALUE] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``, with ``log_lock_waits`` on and a
``deadlock_timeout`` of 100 ms: ``_harness.LOCK_WAIT_SETTINGS``) and
deleted afterwards.

1. One server (``--store-lock-timeout`` ``--lock-timeout``, 1 s by
   default, as a deployment's) and ``--workers`` workers with a slot per
   job; the N jobs are stored in one transaction (as CreateJob stores
   them, ``_harness.insert_once_jobs``) due ``--lead`` seconds ahead,
   inside the dispatcher's look-ahead: its claims (1 000 jobs a batch,
   each locking its jobs' cursors) start at once.
2. From the commit until every job's run ended (or was skipped), ``--clients``
   clients (one channel and thread each) pick jobs at random and, in turn,
   PauseJob, ResumeJob, and GetJob then UpdateJob (a new name): each waits
   on the row locks of the claim, the hand-out or the result batch that
   holds the job's rows at that moment. A pause whose answer does not
   say nothing was written (a deadline passed, a commit of unknown
   outcome) is resumed as well: it may have paused the job.

Figures: ``calls`` by method and answer (``OK``, ``FAILED_PRECONDITION``
for an update that lost a race with the job's own change, and
``UNAVAILABLE`` — every one of them a call the lock timeout refused),
``refusing_locks`` (UNAVAILABLE answers saying "refusing locks", and the
server's log lines saying so), the client latency (p50, p99, max);
``lock_waits`` (``_harness.LockWaits``): the waits PostgreSQL logged,
granted after 100 ms or more (count, over 1 s and 2 s, the longest, by
what was waited on, the statements that waited over 1 s) and statements
cancelled by the lock timeout; ``sampled``: ``pg_stat_activity`` read every
50 ms during the run, the server's sessions waiting on a lock (samples,
the longest statement seen waiting); the load average before and after.

What became of each job's one occurrence, read once everything stopped
(:func:`outcomes`): ``ended`` (its one execution ended), ``skipped`` by
reason (no execution, a skip range: a pause that spanned its due instant
before the claim took it is skipped by design, Job changes, "Resume
releases"), ``twice`` (more than one execution, or one and a skip),
``unended`` (neither: a run still held, waiting or running, with its
executions; up to 20 listed), ``redelivered`` (an execution handed to a
worker more than once, though nothing failed) and ``dropped`` (jobs
without a succeeded execution); ``claimed_ahead_s``, how long before
their due instant the claim made the executions (least and most: below 0
claimed late). ``settled_after_due_s``: when the poll
first saw every job ended or skipped, from the due second (None: not
within ``--timeout``). A run waits for that, not for a time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import grpc
from google.protobuf import field_mask_pb2

import _harness as h
import peers
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

SAMPLE = 0.05


def api_key(server, max_jobs: int) -> str:
    """A key of the bench tenant (made by ``_harness.cluster``), its request
    rate unlimited (as ``bench_create.py``'s): the clients' calls all reach
    the store."""
    with grpc.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        quotas = admin_pb2.TenantQuotas(max_jobs=max_jobs, requests_per_second=1_000_000)
        admin.UpdateTenant(admin_pb2.UpdateTenantRequest(
            tenant=admin_pb2.Tenant(name=h.TENANT, quotas=quotas), update_mask=field_mask_pb2.FieldMask(paths=["quotas"])),
            metadata=h.admin_metadata(server), timeout=30)
        issued = admin.IssueApiKey(admin_pb2.IssueApiKeyRequest(tenant=h.TENANT, description="lockmix"),
                                   metadata=h.admin_metadata(server), timeout=30)
    return issued.api_key.secret


REFUSED_UNWRITTEN = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED,
})
"""Refusals the API answers before anything is written."""


def may_have_written(code: grpc.StatusCode, details: str) -> bool:
    """Whether a call refused with ``code`` and ``details`` may still have
    made its change: a refusal before any write (:data:`REFUSED_UNWRITTEN`,
    or UNAVAILABLE saying nothing was written) did not; a deadline that
    passed, a commit of unknown outcome or anything else may have."""
    if code in REFUSED_UNWRITTEN:
        return False
    return not (code is grpc.StatusCode.UNAVAILABLE and "nothing was written" in details)


class Clients:
    """``count`` threads changing random jobs of ``ids`` until stopped;
    every answer counted by method and code, with its latency."""

    def __init__(self, address: str, key: str, ids: list[str], count: int, deadline: float) -> None:
        self.calls: Counter = Counter()
        self.latency: list[float] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(address, key, ids, deadline, seed), daemon=True)
                         for seed in range(count)]
        for thread in self._threads:
            thread.start()

    def _call(self, method: str, call) -> tuple[object | None, bool]:
        """(the answer or None, whether the call may have written: it was
        answered OK, or refused without saying nothing was written)."""
        began = time.perf_counter()
        try:
            answer, written = call(), True
            code = "OK"
        except grpc.RpcError as error:
            answer, code = None, error.code().name
            written = may_have_written(error.code(), error.details() or "")
            if error.code() is grpc.StatusCode.UNAVAILABLE:
                with self._lock:
                    self.refused.append(error.details() or "")
        with self._lock:
            self.calls[f"{method} {code}"] += 1
            self.latency.append(time.perf_counter() - began)
        return answer, written

    def _run(self, address: str, key: str, ids: list[str], deadline: float, seed: int) -> None:
        meta = (("authorization", f"Bearer {key}"),)
        rng = random.Random(seed)
        with grpc.insecure_channel(address) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            while not self._stop.is_set():
                job_id = rng.choice(ids)
                _, paused = self._call("PauseJob", lambda: stub.PauseJob(
                    scheduler_pb2.PauseJobRequest(id=job_id, reason="lockmix"), metadata=meta, timeout=deadline))
                if paused:  # resumed, or the run would drop it (resuming a job not paused changes nothing)
                    while self._call("ResumeJob", lambda: stub.ResumeJob(
                            scheduler_pb2.ResumeJobRequest(id=job_id), metadata=meta, timeout=deadline))[0] is None:
                        if self._stop.wait(0.1):
                            break
                job_id = rng.choice(ids)
                got, _ = self._call("GetJob", lambda: stub.GetJob(
                    scheduler_pb2.GetJobRequest(id=job_id), metadata=meta, timeout=deadline))
                if got is not None:
                    patch = job_pb2.Job(id=job_id, version=got.job.version, name=f"lockmix-{rng.randrange(10**6)}")
                    self._call("UpdateJob", lambda: stub.UpdateJob(scheduler_pb2.UpdateJobRequest(
                        job=patch, update_mask=field_mask_pb2.FieldMask(paths=["name"])), metadata=meta,
                        timeout=deadline))

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


class Sampler:
    """``pg_stat_activity`` every :data:`SAMPLE` seconds: the sessions of
    other backends waiting on a lock, and how long their statement had run."""

    def __init__(self, url: str) -> None:
        self.samples = 0
        self.waiting = 0
        self.longest_s = 0.0
        self.by_event: Counter = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url,), daemon=True)
        self._thread.start()

    def _run(self, url: str) -> None:
        with h.observe(url) as pg:
            while not self._stop.is_set():
                rows = pg.execute(
                    f"{h.OWN_QUERY} SELECT wait_event, extract(epoch FROM clock_timestamp() - query_start) "
                    "FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                ).fetchall()
                self.samples += 1
                for event, seconds in rows:
                    self.waiting += 1
                    self.by_event[event] += 1
                    self.longest_s = max(self.longest_s, float(seconds or 0))
                self._stop.wait(SAMPLE)  # a sampling period, not a wait for another process

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(30)
        return {"samples": self.samples, "sessions_waiting": self.waiting, "by_wait_event": dict(self.by_event),
                "longest_statement_waiting_s": round(self.longest_s, 3)}


LISTED = 20
"""Jobs listed with their executions in ``unended`` and ``twice``, at most."""
ENDED = "('succeeded', 'dead', 'canceled')"


def outcomes(pg) -> dict:
    """What became of each job's one occurrence (read once the server and
    workers stopped): ``ended`` jobs whose one execution ended, ``skipped``
    (by reason) those with no execution and a skip range, ``twice`` those
    with more than one execution or one and a skip, ``unended`` those with
    neither an ended execution nor a skip (each listed with its state and
    executions: status, attempt, delivery, owner, ready_at, dead reason),
    ``redelivered`` executions handed out more than once, ``dropped`` jobs
    without a succeeded execution; ``claimed_ahead_s``: how long before its
    due instant the claim made each execution (least and most; below 0
    claimed late, when a pause could span its due instant first)."""
    rows = pg.execute(
        f"{h.OWN_QUERY} SELECT j.id, j.state, count(e.id), count(e.id) FILTER (WHERE e.status IN {ENDED}), "
        "count(e.id) FILTER (WHERE e.status = 'succeeded'), count(e.id) FILTER (WHERE e.delivery > 1), "
        "(SELECT min(s.reason) FROM skips s WHERE s.job_id = j.id), "
        "(SELECT count(*) FROM skips s WHERE s.job_id = j.id), "
        "json_agg(json_build_array(e.status, e.attempt, e.delivery, e.owner, e.ready_at, e.dead_reason)) "
        "FILTER (WHERE e.id IS NOT NULL) "
        "FROM jobs j LEFT JOIN executions e ON e.job_id = j.id GROUP BY j.id, j.state ORDER BY j.id"
    ).fetchall()
    ahead = pg.execute(f"{h.OWN_QUERY} SELECT min(due_at - created_at), max(due_at - created_at) FROM executions"
                       ).fetchone()
    return {**classify(rows), "claimed_ahead_s": None if ahead[0] is None else
            {"min": round(ahead[0] / 1e6, 3), "max": round(ahead[1] / 1e6, 3)}}


def classify(rows) -> dict:
    """:func:`outcomes`' figures from its rows, one a job: (id, state,
    executions, ended ones, succeeded ones, ones delivered more than once,
    a skip range's reason or None, skip ranges, the executions listed).
    Pure."""
    ended = dropped = redelivered = 0
    skipped: Counter = Counter()
    unended: list[dict] = []
    twice: list[dict] = []
    for job, state, runs, ended_runs, succeeded, again, reason, skips, listed in rows:
        redelivered += again
        dropped += not succeeded
        if runs + skips > 1:
            twice.append({"job": job, "state": state, "skips": skips, "executions": listed})
        elif ended_runs:
            ended += 1
        elif skips:
            skipped[reason] += 1
        else:
            unended.append({"job": job, "state": state, "executions": listed})
    return {"ended": ended, "skipped": dict(skipped), "twice": twice[:LISTED], "unended": unended[:LISTED],
            "redelivered": redelivered, "dropped": dropped}


def run(args: argparse.Namespace, url: str, etcd_endpoint: str, folder: Path) -> dict:
    h.reset_data(url)
    since_us = h.to_us(datetime.now(timezone.utc))
    slots = math.ceil(args.jobs / args.workers)
    load_before = h.load_average()
    os.environ["TICKWHEEL_STORE_LOCK_TIMEOUT"] = str(args.lock_timeout)  # the server's, through its environment
    with h.cluster(folder, url, etcd_endpoint, workers=args.workers, slots=slots, max_jobs=max(args.jobs, 100_000),
                   server_id="bench-lockmix") as (fleet, pool):
        key = api_key(fleet.first, max(args.jobs, 100_000))
        waits = h.LockWaits()
        due = datetime.fromtimestamp(math.ceil(time.time() + args.lead), timezone.utc)
        sampler = Sampler(url)
        created = h.insert_once_jobs(url, args.jobs, due, name="lockmix")
        with h.observe(url) as pg:
            ids = [row[0] for row in pg.execute(f"{h.OWN_QUERY} SELECT id FROM jobs").fetchall()]
        clients = Clients(fleet.first.address, key, ids, args.clients, args.deadline)
        deadline = due.timestamp() + args.timeout
        settled_after = None
        with h.observe(url) as poll:
            while time.time() < deadline:
                pool.check_alive()
                ended, jobs = h.ended_and_jobs(poll, since_us)
                skipped = poll.execute(f"{h.OWN_QUERY} SELECT count(DISTINCT job_id) FROM skips").fetchone()[0]
                if ended + skipped >= jobs and time.time() > due.timestamp():
                    settled_after = round(time.time() - due.timestamp(), 3)
                    break
                time.sleep(0.25)  # polling the store; no event to await from other processes
        clients.stop()
        sampled = sampler.stop()
        logged = waits.counts()
        server_log = fleet.first.log()
        pool.stop()
        exits = fleet.terminate(30)
    with h.observe(url) as pg:
        ended_by_job = outcomes(pg)
    refusing = [m for m in clients.refused if "refusing locks" in m]
    return {
        "benchmark": "lockmix",
        "smoke": args.smoke,
        "jobs": args.jobs,
        "workers": args.workers,
        "clients": args.clients,
        "lock_timeout_s": args.lock_timeout,
        "stored_s": created["store_s"],
        **ended_by_job,
        "settled_after_due_s": settled_after,
        "calls": dict(sorted(clients.calls.items())),
        "unavailable": len(clients.refused),
        "refusing_locks": {"answers": len(refusing),
                           "server_log_lines": server_log.count("refusing locks")},
        "call_latency_s": peers.distribution(clients.latency),
        "lock_waits": logged,
        "sampled": sampled,
        "server_exit": exits,
        "load_average_before": load_before,
        "load_average_after": h.load_average(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30_000, help="one-off jobs due at the same second (default 30 000)")
    parser.add_argument("--clients", type=int, default=8, help="clients changing jobs at once (default 8)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--lead", type=float, default=30.0, help="seconds from storing to the due second (default 30)")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds after the due second to wait for every job to end (a bound, not a figure)")
    parser.add_argument("--deadline", type=float, default=30.0, help="each call's deadline (default 30 s)")
    parser.add_argument("--lock-timeout", type=float, default=1.0, help="the server's --store-lock-timeout (default 1)")
    parser.add_argument("--pg", help="a PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd")
    parser.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the throwaway PostgreSQL (repeatable)")
    parser.add_argument("--logs", metavar="DIR", help="keep the server's and workers' logs in DIR")
    parser.add_argument("--smoke", action="store_true", help="one tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.clients, args.workers, args.lead, args.timeout = 200, 2, 1, 8.0, 240.0
    settings = {**h.LOCK_WAIT_SETTINGS, **h.parse_settings(args.pg_set)}
    with h.postgres(args.pg, settings) as url, h.etcd(args.etcd) as etcd_endpoint, \
            h.workdir(args.logs, "tickwheel-bench-lockmix-") as folder:
        result = run(args, url, etcd_endpoint, folder)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
