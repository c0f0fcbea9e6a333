"""Benchmark: burst accuracy. N one-off jobs all due in the same second, on
PostgreSQL + etcd, a real ``tickwheel server`` and no-op worker processes.

    .venv/bin/python loadtest/bench_burst.py [--sizes 10000,30000] [--workers 4] [--servers 1] [--lead 40] [--hold 0]
                                             [--history N] [--from-store]
                                             [--peer-settings 5x10,10x50] [--no-peer]
                                             [--pg URL] [--etcd HOST:PORT] [--profile DIR] [--logs DIR] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``) and deleted afterwards. For each size
N, in order:

1. the data tables are emptied; ``--servers`` ``tickwheel server``
   processes start (default 1; the first ``--migrate``s; 256 partitions
   split among them by their etcd leases, as a deployment's fleet, each its
   own etcd session) and ``--workers`` ``tickwheel worker`` processes
   connect, worker k to server k % N, running the built-in
   ``echo`` handler with ``ceil(N / workers)`` slots each, so every job has a
   slot; the run waits until every partition is owned, split evenly among
   the servers, and every worker is connected (ClusterStatus); with
   ``--history N``, N ended executions of other jobs are stored
   (``_harness.insert_history``, as ``bench_e2e.py --history``; timed in
   ``history``): every figure below is of the run's own jobs and their
   executions, and ``history.left_after_run`` says the history was still
   there at the end;
2. N one-off jobs due at the same whole second ``D`` (``--lead`` seconds
   ahead, inside the dispatcher's 60 s look-ahead) are stored in one
   transaction, as CreateJob stores them (see ``_harness.insert_once_jobs``):
   the dispatcher claims them ahead of time into its timer wheel, and at
   ``D`` the wheel wakes the gateway, which hands them out;
3. the run waits until every execution has ended (or ``D`` + the timeout),
   then the workers and the server stop gracefully.

Figures come from the store, not from the benchmark's clock: *start* is the
hand-out instant the server recorded in ``attempts.started_at`` (its clock,
read inside the hand-out claim's transaction), *lateness* = start − the
execution's ``due_at``, signed (``attempts.lateness_us`` is clamped at 0,
so an early start would hide there). Lateness is measured at the hand-out
(docs/architecture.md, Dispatch, step 5);
``worker_start_lateness_s`` is the same from when the worker reported it
began (``attempts.worker_started_at``: the worker's clock, on
this same machine), and ``hand_out_to_worker_start_s`` the difference, the
assignment's way through the server, the stream and the worker. ``early`` counts starts before ``due_at``
(must be 0), ``dropped`` the jobs without a succeeded execution when the run
ended (must be 0), ``redelivered`` executions handed out more than once.
``claimed_ahead`` counts executions created (claimed) before ``D`` (when it
is not N, the claim itself was late and the burst was not what is meant:
raise ``--lead``); the
hand-out span is the last start minus the first. ``claimed_by_server``
counts executions by the server owning their partition (the claimer),
``handed_out_by_server`` by the server their worker is connected to. CPU
seconds of the servers (together; each in ``cpu_by_server``),
PostgreSQL (all its processes), the workers and etcd, and etcd's requests,
are measured from 1 s before ``D`` to the end (so the claim and the arm,
done before, are not in them), or with ``--from-store`` from the jobs'
commit to the end (the claim, the arm, the start, the send and the result,
and whatever the processes spend idle in the lead: keep ``--lead`` short,
above the server's ``arm_ahead``; ``phases`` then splits each role's CPU
per execution at due − 1 s: ``ahead``, the claim, the arm and the idle,
and ``at_instant``, the start, the send and the result); ``measured_from`` says which;
``/proc/loadavg`` before and after each run (the machine is shared).

The headline is ``p99_at_worker_start_s`` (what a user sees), with the
hand-out's p99 beside it. ``peers`` (unless ``--no-peer``; they need the
``bench`` extra: ``bash scripts/install.sh --bench``) fires the same number
of jobs due in one second, after Tickwheel's run, on the same PostgreSQL
server, each in a database of its own (``peers.py``):

- ``pgqueuer``: once per ``--peer-settings`` item (worker processes ×
  dequeue batch), the workers connected and idle, the jobs enqueued in one
  transaction deferred to one whole second ``--peer-lead`` seconds on;
  lateness = when its job function started (the worker's clock) − the due
  second; ``best`` the setting with the lowest p99;
- ``apscheduler``: APScheduler 3's BackgroundScheduler with its SQLAlchemy
  job store on PostgreSQL (10 threads, misfire grace unlimited so that no
  late job is skipped), the jobs stored in its own row format in one
  transaction; lateness = when the job function started − the due second.

``ratio_to_pgqueuer`` = Tickwheel's p99 at the worker's start / pgqueuer's
best p99 (goal ≤ 0.25 at 10 000), ``ratio_to_apscheduler`` likewise.

For finding where the time goes: ``--hold S`` makes the no-op handler wait S
seconds before answering, so results do not compete with the hand-out;
``hand_out_batches`` groups the starts by hand-out instant (one gateway claim
stamps one instant); ``sql`` counts what reached PostgreSQL
(``pg_stat_statements``: statements per execution, commits, rollbacks, the
costliest shapes) and ``errors_logged`` its ERROR lines (serialization
failures the store retried), ``lock_waits`` the lock waits it logged
(``_harness.LockWaits``: statements a lock timeout cancelled; the waits
over 100 ms too under ``--pg-set`` of ``_harness.LOCK_WAIT_SETTINGS``),
``jit`` beside it what PostgreSQL spent compiling statements with JIT (``_harness.Statements.jit``); ``--profile DIR`` samples the server and one
worker with py-spy (from 1 s before ``D``, or with ``--from-store`` from
the jobs' commit, so the arm is in it); ``--logs DIR`` keeps the processes' logs; ``--pg-set``
changes a setting of the throwaway PostgreSQL.

``--smoke`` runs one tiny size in seconds so CI keeps the script working;
its figures mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


import _harness as h
import peers

REQUIRED = {"size": 10_000, "early": 0, "dropped": 0, "p99_s": 1.0, "at": "hand-out"}
GOAL = {"size": 30_000, "early": 0, "dropped": 0, "p99_s": 1.0, "at": "worker start"}
PEER_GOAL = {"size": 10_000, "ratio_to_pgqueuer": 0.25, "at": "worker start"}
POLL = 0.25


def outcome(url: str, due_us: int) -> dict:
    """Every job of the run with its execution and that execution's first attempt."""
    with h.observe(url) as pg:
        rows = pg.execute(
            f"""{h.OWN_QUERY}
            SELECT j.id, e.id, e.status, e.due_at, e.created_at, e.delivery,
                   min(a.started_at), count(a.execution_id), min(a.worker_id), min(a.worker_started_at)
            FROM jobs j
            LEFT JOIN executions e ON e.job_id = j.id
            LEFT JOIN {h.ATTEMPTS} a ON a.execution_id = e.id
            GROUP BY j.id, e.id, e.status, e.due_at, e.created_at, e.delivery
            """
        ).fetchall()
    lateness: list[float] = []
    early = redelivered = claimed_ahead = executions = 0
    succeeded_jobs: set[str] = set()
    statuses: dict[str, int] = {}
    per_worker: dict[str, int] = {}
    starts: list[int] = []
    worker_lateness: list[float] = []
    transit: list[float] = []
    for job_id, execution_id, status, due_at, created_at, delivery, started_at, attempt_rows, worker, worker_start in rows:
        if execution_id is None:
            statuses["not_claimed"] = statuses.get("not_claimed", 0) + 1
            continue
        executions += 1
        statuses[status] = statuses.get(status, 0) + 1
        if created_at < due_us:
            claimed_ahead += 1
        if delivery > 1 or attempt_rows > 1:
            redelivered += 1
        if status == "succeeded":
            succeeded_jobs.add(job_id)
        if started_at is not None:
            starts.append(started_at)
            lateness.append((started_at - due_at) / 1e6)
            if started_at < due_at:
                early += 1
            if worker_start is not None:
                worker_lateness.append((worker_start - due_at) / 1e6)
                transit.append((worker_start - started_at) / 1e6)
            per_worker[worker] = per_worker.get(worker, 0) + 1
    jobs = len({row[0] for row in rows})
    return {
        "jobs": jobs,
        "executions": executions,
        "started": len(lateness),
        "early": early,
        "dropped": jobs - len(succeeded_jobs),
        "redelivered": redelivered,
        "claimed_ahead": claimed_ahead,
        "statuses": statuses,
        "lateness_s": peers.distribution(lateness) or dict.fromkeys(("min", "p50", "p90", "p99", "max")),
        "worker_start_lateness_s": peers.distribution(worker_lateness),
        "hand_out_to_worker_start_s": peers.distribution(transit),
        "hand_out_span_s": round((max(starts) - min(starts)) / 1e6, 3) if starts else None,
        "hand_out_batches": batches(starts),
        "started_per_worker": dict(sorted(per_worker.items())),
    }


def batches(starts: list[int]) -> dict | None:
    """The hand-outs grouped by instant: one gateway claim stamps every
    execution it hands out with the same instant, so each distinct start is
    one hand-out batch. Their count, sizes, and the gaps between them."""
    if not starts:
        return None
    sizes: dict[int, int] = {}
    for start in starts:
        sizes[start] = sizes.get(start, 0) + 1
    instants = sorted(sizes)
    gaps = sorted((b - a) / 1000 for a, b in zip(instants, instants[1:]))
    counts = sorted(sizes.values())
    return {
        "count": len(instants),
        "size_median": h.percentile(counts, 0.5),
        "size_max": counts[-1],
        "gap_ms_median": round(h.percentile(gaps, 0.5), 1) if gaps else None,
        "gap_ms_max": round(gaps[-1], 1) if gaps else None,
    }


def phases(ahead: dict, at_instant: dict) -> dict:
    """CPU per execution (ms) by role, split at the instant's start window
    (due - 1 s): ``ahead`` = from the jobs' commit (the claim, the arm and
    the lead's idle), ``at_instant`` = the start, the send and the result."""
    def roles(costs: dict) -> dict:
        return {role: figures["cpu_ms_per_execution"] for role, figures in costs["cpu"].items()}

    return {"ahead": roles(ahead), "at_instant": roles(at_instant)}


def run_size(size: int, args: argparse.Namespace, url: str, etcd_endpoint: str, folder: Path) -> dict:
    h.reset_data(url)
    since_us = h.to_us(datetime.now(timezone.utc))  # the run's executions are of instants from here on
    slots = math.ceil(size / args.workers)
    if slots > 10_000:
        raise SystemExit(f"{size} jobs over {args.workers} workers is more than 10 000 slots each: add --workers")
    load_before = h.load_average()
    with h.cluster(folder, url, etcd_endpoint, workers=args.workers, slots=slots, max_jobs=max(size, 100_000),
                   server_id=f"bench-burst-{size}", hold=args.hold, servers=args.servers) as (fleet, pool):
        meter = h.Meter(
            {"server": fleet.pids, "workers": pool.pids,
             **({"postgres": [pg]} if (pg := h.postmaster_pid(url)) else {}),
             **({"etcd": [pid]} if (pid := h.etcd_pid(etcd_endpoint)) else {})},
            etcd_endpoint, fleet.members(),
        )
        history = h.insert_history(url, args.history, since_us)
        statements = h.Statements(url)
        due = datetime.fromtimestamp(math.ceil(time.time() + args.lead), timezone.utc)
        due_us = h.to_us(due)
        if args.from_store:  # opened before the CPU is read: its backend's start is not the server's
            poll = h.observe(url)
        created = h.insert_once_jobs(url, size, due, name=f"burst-{size}")
        if args.from_store:  # the claim, the arm, the start, the send and the result, and the lead's idle
            statements.reset()
            errors = h.PostgresErrors()
            locks = h.LockWaits()
            before = meter.read()
        lead_left = due.timestamp() - created["committed_at"]
        if lead_left < 2:
            raise SystemExit(f"storing {size} jobs left {lead_left:.1f} s before the due second: raise --lead")
        profile = Path(args.profile) / f"burst-{size}" if args.profile else None
        # With --from-store the profile covers the claim and the arm too.
        sampling = contextlib.ExitStack()  # closed with the poll below
        sampling.enter_context(h.profiled({**fleet.profiled(), "worker-0": pool.pids[0]},
                                          profile if args.from_store else None))
        time.sleep(max(0.0, due.timestamp() - 1 - time.time()))  # waiting for the due second itself
        instant = meter.read() if args.from_store else None  # the phases' split: ahead / at the instant
        if not args.from_store:
            statements.reset()
            errors = h.PostgresErrors()
            locks = h.LockWaits()
            poll = h.observe(url)  # opened before the CPU is read: its backend's start is not the server's
            before = meter.read()
        deadline = due.timestamp() + args.timeout
        ended = 0
        with poll, sampling, h.profiled({**fleet.profiled(), "worker-0": pool.pids[0]},
                                        None if args.from_store else profile):
            while time.time() < deadline:
                pool.check_alive()
                ended, jobs = h.ended_and_jobs(poll, since_us)
                if ended >= jobs:
                    break
                time.sleep(POLL)  # polling the store; the benchmark has no event to await from other processes
        after = meter.read()
        costs = h.Meter.difference(before, after, size)
        if instant is not None:
            costs["phases"] = phases(h.Meter.difference(before, instant, size), h.Meter.difference(instant, after, size))
        sql = statements.report(size)
        jit = statements.jit(size)
        if sql is not None:
            sql["errors_logged"] = errors.counts()
            sql["lock_waits"] = locks.counts()
        stopped_workers = pool.stop()
        server_exits = fleet.terminate(30)
    figures = outcome(url, due_us)
    claimed = h.claimed_by_owner(url, since_us)
    if args.history:
        with h.observe(url) as pg:  # still there: the retention pass left them, nothing else touched them
            history["left_after_run"] = pg.execute(
                f"{h.OWN_QUERY} SELECT count(*) FROM executions WHERE nominal_at < %s", (since_us,)).fetchone()[0]
    handed_out = h.by_server(figures["started_per_worker"], args.workers, fleet.server_ids)
    lateness = figures["lateness_s"]
    at_worker = (figures["worker_start_lateness_s"] or {}).get("p99")
    found = {}
    if not args.no_peer:
        found["pgqueuer"] = peers.run_pgqueuer(url, size, args.peer_settings, folder, due_in=args.peer_lead,
                                               stall=args.timeout)
        found["apscheduler"] = peers.run_apscheduler(url, size, folder, lead=args.aps_lead, timeout=args.timeout)
    pgqueuer_best = (found["pgqueuer"]["best"] or {}).get("p99_s") if found else None
    return {
        "size": size,
        "history": history,
        "p99_at_worker_start_s": {"tickwheel": at_worker, "tickwheel_hand_out": lateness["p99"],
                                  "pgqueuer_best": pgqueuer_best,
                                  "apscheduler": found["apscheduler"]["p99_s"] if found else None},
        "ratio_to_pgqueuer": peers.ratio(at_worker, pgqueuer_best),
        "ratio_to_apscheduler": peers.ratio(at_worker, found["apscheduler"]["p99_s"] if found else None),
        "servers": args.servers,
        "workers": args.workers,
        "slots_per_worker": slots,
        "due_at": due.isoformat(),
        "lead_s": args.lead,
        "hold_s": args.hold,
        "measured_from": "store" if args.from_store else "due - 1 s",
        "stored": {k: v for k, v in created.items() if k != "committed_at"},
        "stored_before_due_s": round(lead_left, 2),
        **figures,
        "claimed_by_server": claimed,
        "handed_out_by_server": handed_out,
        "ended_within_timeout": ended >= size,
        "all_claimed_ahead": figures["claimed_ahead"] == size,
        "met": figures["early"] == 0 and figures["dropped"] == 0 and lateness["p99"] is not None
        and lateness["p99"] <= REQUIRED["p99_s"],
        "met_at_worker_start": figures["early"] == 0 and figures["dropped"] == 0 and at_worker is not None
        and at_worker <= GOAL["p99_s"],
        **costs,
        "sql": sql,
        "jit": jit,
        "exit_codes": {"workers": stopped_workers, "server": server_exits[0], "servers": server_exits},
        "load_average_before": load_before,
        "load_average_after": h.load_average(),
        "peers": found or None,
    }


def verdict(runs: list[dict], size: int, key: str = "met") -> bool | None:
    """Whether the run of ``size`` jobs met the bar (None: no such run)."""
    found = [run[key] for run in runs if run["size"] == size]
    return all(found) if found else None


def peer_verdict(runs: list[dict]) -> bool | None:
    """Whether the run of ``PEER_GOAL``'s size was within its ratio of
    pgqueuer's p99 (None: no such run, or no peer)."""
    found = [run["ratio_to_pgqueuer"] for run in runs if run["size"] == PEER_GOAL["size"]]
    if not found or any(r is None for r in found):
        return None
    return all(r <= PEER_GOAL["ratio_to_pgqueuer"] for r in found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,30000", help="jobs due in the same second, per run (default 10000,30000)")
    parser.add_argument("--servers", type=int, default=1,
                        help="tickwheel server processes sharing the store and etcd (default 1); worker k "
                             "connects to server k %% N")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4); slots = ceil(N / workers) each")
    parser.add_argument("--lead", type=float, default=40.0,
                        help="seconds between storing the jobs and their due second (default 40, under the dispatcher's "
                             "60 s look-ahead; the claim must be done before the due second: see claimed_ahead)")
    parser.add_argument("--history", type=int, default=0, metavar="N",
                        help="ended executions of other jobs in the store before each run (default 0: an empty "
                             "store; at most 10 000 000)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds after the due second to wait for every execution")
    parser.add_argument("--hold", type=float, default=0.0,
                        help="seconds the no-op handler waits before answering (default 0); with a hold longer than "
                             "the hand-out, results do not compete with it: the hand-out measured alone")
    parser.add_argument("--from-store", action="store_true",
                        help="measure CPU, statements and WAL from the jobs' commit, not from 1 s before the due "
                             "second: the claim and the arm (up to arm_ahead before the instant) counted too, "
                             "and the lead's idle with them (keep --lead short)")
    parser.add_argument("--peer-settings", default=peers.PGQUEUER_SETTINGS, metavar="WxB,…",
                        help=f"pgqueuer worker processes x dequeue batch, each run (default {peers.PGQUEUER_SETTINGS})")
    parser.add_argument("--peer-lead", type=float, default=5.0,
                        help="seconds between enqueueing pgqueuer's jobs and their due second (default 5)")
    parser.add_argument("--aps-lead", type=float, default=15.0,
                        help="seconds between starting the APScheduler peer and its jobs' due second (default 15)")
    parser.add_argument("--no-peer", action="store_true", help="leave the peers out (no bench extra needed)")
    parser.add_argument("--pg", help="a PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd")
    parser.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the throwaway PostgreSQL (repeatable), for experiments")
    parser.add_argument("--profile", metavar="DIR",
                        help="sample the server and one worker with py-spy during the burst into DIR")
    parser.add_argument("--logs", metavar="DIR", help="keep the server's and workers' logs in DIR")
    parser.add_argument("--smoke", action="store_true", help="one tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.workers, args.lead, args.timeout = "200", 2, 4.0, 60.0
        args.peer_settings, args.peer_lead, args.aps_lead = "2x10", 3.0, 5.0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1 or args.workers < 1:
        parser.error("--sizes and --workers must be positive")
    if not 1 <= args.servers <= 16:
        parser.error("--servers must be 1 to 16")
    if not 0 <= args.history <= h.MAX_HISTORY:
        parser.error("--history between 0 and 10 000 000")
    if not 2 <= args.lead < 60:
        parser.error("--lead must be at least 2 s and under the dispatcher's 60 s look-ahead")
    try:
        pg_settings = h.parse_settings(args.pg_set)
        args.peer_settings = peers.parse_pgqueuer_settings(args.peer_settings)
    except ValueError as error:
        parser.error(str(error))
    if not args.no_peer:  # before anything runs: a missing extra is said at once
        for module in ("pgqueuer", "asyncpg", "apscheduler"):
            peers.require(module)
    began = time.perf_counter()
    runs = []
    with h.postgres(args.pg, pg_settings) as url, h.etcd(args.etcd) as etcd_endpoint, \
            h.workdir(args.logs, "tickwheel-bench-burst-") as folder:
        for size in sizes:
            runs.append(run_size(size, args, url, etcd_endpoint, folder))
        settings = h.server_settings(url)
    report = {
        "benchmark": "burst",
        "smoke": args.smoke,
        "servers": args.servers,
        "history": args.history,
        "runs": runs,
        "required": {**REQUIRED, "met": verdict(runs, REQUIRED["size"])},
        "goal": {**GOAL, "met": verdict(runs, GOAL["size"], "met_at_worker_start")},
        "goal_vs_pgqueuer": {**PEER_GOAL, "met": peer_verdict(runs)},
        "postgres": {**settings, "throwaway": not args.pg, "set": pg_settings},
        "etcd_throwaway": not args.etcd,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "total_s": round(time.perf_counter() - began, 1),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
