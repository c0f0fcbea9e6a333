"""Benchmark: end-to-end no-op throughput. Jobs due now → dispatcher → Pull
stream → worker processes → results → history rows, on PostgreSQL + etcd,
beside pgqueuer draining the same number of no-op jobs on the same PostgreSQL
in the same run.

    .venv/bin/python loadtest/bench_e2e.py [--jobs 50000] [--workers 4] [--slots 1000] [--servers 1]
                                           [--history N] [--peer-settings 5x10,10x50] [--no-peer]
                                           [--no-wake] [--idle-seconds 3]
                                           [--pg URL] [--etcd HOST:PORT] [--profile DIR] [--timeline] [--logs DIR] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``) and deleted afterwards.

- ``server``: ``--servers`` ``tickwheel server`` processes (default 1; the
  first ``--migrate``s; 256 partitions split among them by their etcd
  leases, as a deployment's fleet) and ``--workers`` ``tickwheel worker``
  processes with ``--slots`` each, worker k connected to server k % N,
  running the built-in ``echo`` handler, all connected and every partition
  owned (evenly split) before anything is due. With ``--history N``,
  N ended executions of other jobs (``_harness.insert_history``: one
  set-based statement, then ``VACUUM ANALYZE`` and a ``CHECKPOINT``,
  timed apart in ``history``, before the CPU is read; instants over the
  day before the run, inside retention) are stored first: a store that
  has been running, not an empty one.
  Every figure below counts the run's own executions only (those of
  instants from the run's start on); ``history.left_after_run`` says the
  history was still there at the end. Then ``--jobs`` one-off jobs
  due now are stored in one transaction, as CreateJob stores them (see
  ``_harness.insert_once_jobs``), so they all become due at the same
  instant, and once committed each server's claim is woken as the API
  wakes it after a write of due-now jobs (``_harness.wake_claims``: a put
  on the server's wake key; docs/architecture.md, Dispatch, "Wake-ups"):
  plain SQL wakes nothing, and the first claim would otherwise wait for
  the dispatcher's next tick, 0 to 1 s, which no user creating jobs
  through the API waits for (``--no-wake``: without it, as before);
  the run ends when every execution has ended. From the store:
  ``executions_per_s`` = executions succeeded, each with its attempt
  recorded (history: a plain success's on its execution row, any other in
  ``attempts``; ``_harness.ATTEMPTS`` reads both), over the window from the first claim (``min(executions.
  created_at)``) to the last attempt's ``finished_at``; ``from_commit``
  counts from the instant the jobs were committed instead (it adds the
  wait for the first claim, woken, or with ``--no-wake`` the next tick's
  0 to 1 s: latency, not throughput; ``first_claim_s``: the first
  claim's instant after the commit). ``worker_start_lateness_s`` (the headline lateness, also at the
  report's top): when the worker began each execution (its clock) minus
  the due instant, mean, p50, p99 and max, and ``from_commit`` the same
  from the jobs' commit (the due instant precedes it by the rows' building
  and copying, ``due_before_commit_s``); ``start_lateness_s`` is the
  hand-out's (server clock). ``idle``: over ``--idle-seconds`` (default 3)
  right before the jobs are stored, with nothing to do, the statements a
  second that reached PostgreSQL (by kind and shape: the dispatcher's
  tick, the gateway's sweep, the leases' upkeep) and each role's CPU as a
  fraction of a core: the price of how often the servers look for work.
  ``claimed_by_server``: executions by the server owning
  their partition (the one that claimed them); ``executed_by_server``: by
  the server their worker is connected to (the one that handed them out).
  CPU seconds of the server processes (together; each in
  ``cpu_by_server``),
  of PostgreSQL (every process of the server: backends, and what exited
  backends left in the postmaster's ``cutime``), of the workers and of etcd,
  from ``/proc/<pid>/stat`` (all processes read in one pass: a reading is
  one instant), and etcd's gRPC messages received (its
  ``/metrics``), from the jobs' commit to the end, per execution; what
  storing them cost is ``storing_cpu_s``, apart; before it, the processes
  are let settle (``settled_s``: until near idle, as pgqueuer's are).
  ``cpu_cores`` is all that
  CPU over the wall time between the two readings (a check: it cannot
  exceed the machine's cores). ``sql`` counts what
  reached PostgreSQL (``pg_stat_statements``: statements and rows written
  per execution, commits, rollbacks, the costliest shapes) and
  ``errors_logged`` the ERROR lines it logged (serialization failures the
  store retried), ``lock_waits`` its lock waits (as ``bench_burst.py``'s);
  ``sql.phases`` the same summed by phase of an execution's life (claim,
  hand-out, start, outcome: ``_harness.phase_of``), ``sql.wal`` the WAL's
  records and full-page images (``pg_stat_wal``); ``tables``, for ``executions``, ``jobs`` and
  ``job_cursors``, the updates per execution, how many of them were HOT (no
  index entry written), and the bytes their heap and their indexes grew by
  per execution; ``indexes``, per index of those tables written or read, the
  bytes it grew by (the entries written: PostgreSQL counts no index inserts)
  and the scans that used it (``pg_stat_user_indexes``), per execution. ``jit``
  beside it: what PostgreSQL spent compiling statements with JIT, per
  execution and by statement (``_harness.Statements.jit``).
- ``peer``: pgqueuer (the ``bench`` extra: ``bash scripts/install.sh
  --bench``) in a database of its own on the same server, draining the same
  number of no-op jobs once per ``--peer-settings`` item (worker processes ×
  dequeue batch): the workers connected and idle, then the jobs enqueued in
  one transaction, in batches of 1 000 (``peers.run_pgqueuer``).
  ``executions_per_s`` over the window from its first pick to its last
  completion as its log recorded them, CPU of its workers and of PostgreSQL
  per execution from the jobs' commit to the end (the enqueue's apart, as
  the server's storing is), its statements and rows written; ``best`` is the setting
  with the most executions/s. ``ratio`` = server / pgqueuer's best (goal
  ≥ 1.5), both over the same kind of window: from the first take (claim,
  pick) to the last completion recorded; ``from_commit`` sets the two side
  by side from the jobs' commit instead (pgqueuer's workers are woken by
  its NOTIFY at the commit, the dispatcher by the wake put after it);
  ``cpu_cores`` sets the two checks side by side, and
  ``cpu_cores_during_run`` the same CPU over each run's own window, from
  the jobs' commit to the last completion recorded, rather than to the
  reading after the poll that saw it (up to ``POLL`` later, plus the last
  outcome's transaction, whose ``finished_at`` is read at its start): on
  a run of a second or two that tail is a large part of ``cpu_cores``'s
  wall time, so ``cpu_cores`` says less of how busy the cores were while
  the executions ran (an upper bound: the CPU read after the last
  completion is in it); ``cpu_ms_per_execution``, ``statements_per_execution`` and
  ``rows_written_per_execution`` set the two side by side (pgqueuer's rows
  from its tables' counters: it writes in ``WITH`` clauses, which
  ``pg_stat_statements``' rows leave out). ``--no-peer`` leaves the peer
  out (``peer``, ``ratio`` null).
- ``replay``: where Tickwheel's own time goes, not a peer: the hot path's
  batched statements (claim+enqueue, hand-out, outcome+history:
  docs/architecture.md, Dispatch) issued directly on one psycopg
  connection with nothing in between, over the same number of jobs stored
  the same way, values that do not depend on the database computed before
  timing: claim+enqueue in transactions of 1 000 jobs (the epoch check, the
  claim's ``SELECT … LIMIT … FOR UPDATE SKIP LOCKED``, one ``INSERT …
  SELECT FROM unnest`` of the executions, one ``UPDATE … FROM unnest`` of
  the cursors); hand-out in transactions of 500 (one ``UPDATE … WHERE id
  IN (SELECT … FOR UPDATE SKIP LOCKED) … RETURNING`` with the job's
  definition joined); outcome+history in transactions of 100 (one fenced
  ``UPDATE … FROM unnest … RETURNING`` writing each attempt's record on
  its row, as a plain success is recorded) -
  the batch sizes the dispatcher, gateway and worker use. SERIALIZABLE, as
  the store. ``ratio_to_replay`` = server / replay. The replay starts
  from an empty store (no ``--history``).

``/proc/loadavg`` is recorded before and after each part (the machine is
shared: compare figures of the same run). ``--profile DIR`` samples the
server and one worker with py-spy, ``--timeline`` adds ``server.timeline``:
executions claimed, started and finished per 100 ms (from the store's
instants) and how many of the server's PostgreSQL backends were running a
statement at once, sampled every 10 ms (its queries cost PostgreSQL some
CPU: compare CPU figures without it; ``loadtest/tracehook`` times the
server's transactions and statements from inside), ``--logs DIR`` keeps the processes' logs,
``--pg-set`` changes a setting of the throwaway PostgreSQL. ``--smoke`` runs
tiny sizes in seconds so CI keeps the script working; its figures mean
nothing.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import platform
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psycopg
from tickwheel.v1 import job_pb2

import _harness as h
import peers
from tickwheel.shared.ids import execution_id, from_us

GOAL = {"ratio": 1.5, "postgres_cpu_ms_per_execution": 0.1}
"""Executions/s at least 1.5 × pgqueuer's best in the same run, and
PostgreSQL's CPU per execution at most 0.1 ms (issue 17); etcd requests per
execution near 0 (reported, not judged)."""
POLL = 0.25
CLAIM_BATCH = 1000  # the server's claim_batch default
HANDOUT_BATCH = 500
RESULT_BATCH = 100


OWN_ATTEMPTS = (
    f"(SELECT a.* FROM {h.ATTEMPTS} a JOIN executions o ON o.id = a.execution_id WHERE o.nominal_at >= %(since)s)"
)
"""The run's own recorded attempts (``_harness.ATTEMPTS`` of its own
executions): a run's executions are those of instants from the run's start
on (``since``), ``--history``'s all before it."""


def finished(pg: psycopg.Connection, since_us: int) -> int:
    """The run's executions ended right now (a range of the partial index
    of ended rows, ``(tenant, nominal_at, id)``, past any ``--history``:
    the poll's own cost in PostgreSQL's CPU stays small and does not grow
    with it)."""
    return pg.execute(f"{h.OWN_QUERY} SELECT count(*) FROM executions WHERE {h.ENDED_SINCE}", (since_us,)).fetchone()[0]


def wait_until_ended(pg: psycopg.Connection, jobs: int, pool: h.WorkerProcesses, stall: float, since_us: int) -> int:
    """Poll the store on ``pg`` until ``jobs`` executions (of instants from
    ``since_us`` on) have ended; give up
    after ``stall`` seconds without progress. Returns how many ended. One
    connection (autocommit: it holds no snapshot) for every poll, opened
    before the CPU is read: a new one each time costs PostgreSQL a
    backend's start, several ms of CPU that would count as the server's."""
    ended, last, progress_at = 0, -1, time.monotonic()
    while ended < jobs:
        pool.check_alive()
        ended = finished(pg, since_us)
        if ended != last:
            last, progress_at = ended, time.monotonic()
        elif time.monotonic() - progress_at > stall:
            break
        time.sleep(POLL)  # polling the store; there is no event to await from other processes
    return ended


def server_outcome(url: str, committed_at: float, since_us: int) -> dict:
    """What the store recorded of the run's executions (of instants from
    ``since_us`` on; ``--history``'s left out): by status, history rows,
    early starts, and the window."""
    own = {"since": since_us}
    with h.observe(url) as pg:
        statuses = dict(pg.execute(f"{h.OWN_QUERY} SELECT status, count(*) FROM executions "
                                   "WHERE nominal_at >= %(since)s GROUP BY status", own).fetchall())
        history, first_claim, last_finished, early, late_max, late_avg = pg.execute(
            f"{h.OWN_QUERY} SELECT count(*), "
            "(SELECT min(created_at) FROM executions WHERE nominal_at >= %(since)s), max(a.finished_at), "
            "count(*) FILTER (WHERE a.started_at < e.due_at), max(a.started_at - e.due_at), "
            f"avg(a.started_at - e.due_at) FROM {h.ATTEMPTS} a JOIN executions e ON e.id = a.execution_id "
            "WHERE e.nominal_at >= %(since)s", own
        ).fetchone()
        worker_late = pg.execute(
            f"{h.OWN_QUERY} SELECT avg(s.late), percentile_cont(0.5) WITHIN GROUP (ORDER BY s.late), "
            "percentile_cont(0.99) WITHIN GROUP (ORDER BY s.late), max(s.late), min(s.due) FROM "
            f"(SELECT a.worker_started_at - e.due_at AS late, e.due_at AS due FROM {h.ATTEMPTS} a "
            "JOIN executions e ON e.id = a.execution_id WHERE e.nominal_at >= %(since)s) s", own
        ).fetchone()
        succeeded_with_history = pg.execute(
            f"{h.OWN_QUERY} SELECT count(*) FROM executions e "
            "WHERE e.status = 'succeeded' AND e.nominal_at >= %(since)s "
            f"AND EXISTS (SELECT 1 FROM {h.ATTEMPTS} a WHERE a.execution_id = e.id AND a.status = 'succeeded')", own
        ).fetchone()[0]
        by_worker = dict(pg.execute(
            f"{h.OWN_QUERY} SELECT worker_id, count(*) FROM {OWN_ATTEMPTS} a GROUP BY worker_id", own).fetchall())
    window = (last_finished - first_claim) / 1e6 if history else None
    return {
        "executed_by_worker": by_worker,
        "statuses": statuses,
        "history_rows": history,
        "succeeded_with_history": succeeded_with_history,
        "early": early,
        "seconds": round(window, 3) if window else None,
        "executions_per_s": round(succeeded_with_history / window) if window else 0,
        "from_commit": {
            "first_claim_s": round(first_claim / 1e6 - committed_at, 3) if history else None,
            "seconds": round(last_finished / 1e6 - committed_at, 3) if history else None,
            "executions_per_s": round(succeeded_with_history / (last_finished / 1e6 - committed_at)) if history else 0,
        },
        "start_lateness_s": {"mean": round(float(late_avg) / 1e6, 3) if history else None,
                             "max": round(late_max / 1e6, 3) if history else None},
        "worker_start_lateness_s": lateness(worker_late, committed_at) if history else None,
    }


def lateness(row: tuple, committed_at: float) -> dict:
    """The worker's start minus the due instant (mean, p50, p99, max), and
    the same from the jobs' commit: the due instant precedes the commit by
    the benchmark's building and copying of the rows (``stored``), as a
    BatchCreateJobs caller's due-now jobs precede its call's end."""
    mean, p50, p99, worst, due_us = row
    after_commit = due_us / 1e6 - committed_at
    return {"mean": round(float(mean) / 1e6, 3), "p50": round(p50 / 1e6, 3), "p99": round(p99 / 1e6, 3),
            "max": round(worst / 1e6, 3), "due_before_commit_s": round(-after_commit, 3),
            "from_commit": {"mean": round(float(mean) / 1e6 + after_commit, 3),
                            "p99": round(p99 / 1e6 + after_commit, 3),
                            "max": round(worst / 1e6 + after_commit, 3)}}


TIMELINE_BIN_US = 100_000


def timeline(url: str, since_us: int) -> dict:
    """Per 100 ms from the first claim: the run's executions (of instants
    from ``since_us`` on) claimed (their rows' ``created_at``), started by
    a worker and finished (their attempts' ``started_at``,
    ``finished_at``): where the pipeline's stages overlap and where one
    waits for another."""
    own = {"since": since_us}
    with h.observe(url) as pg:
        first = pg.execute(f"{h.OWN_QUERY} SELECT min(created_at) FROM executions WHERE nominal_at >= %(since)s",
                           own).fetchone()[0]
        if first is None:
            return {}
        def binned(sql: str) -> dict[int, int]:
            return dict(pg.execute(f"{h.OWN_QUERY} SELECT (t - %(first)s) / %(bin)s AS b, count(*) FROM ({sql}) s(t) "
                                   "GROUP BY b ORDER BY b", {**own, "first": first, "bin": TIMELINE_BIN_US}).fetchall())
        claimed = binned("SELECT created_at FROM executions WHERE nominal_at >= %(since)s")
        started = binned(f"SELECT started_at FROM {OWN_ATTEMPTS} a")
        ended = binned(f"SELECT finished_at FROM {OWN_ATTEMPTS} a")
    bins = range(int(max([*claimed, *started, *ended])) + 1)
    return {"bin_ms": TIMELINE_BIN_US // 1000,
            "claimed": [claimed.get(b, 0) for b in bins],
            "started": [started.get(b, 0) for b in bins],
            "finished": [ended.get(b, 0) for b in bins]}


class Activity:
    """Samples ``pg_stat_activity`` every ``every`` seconds on a connection
    of its own while the block runs: how many of the server's backends
    (the benchmark's own left out) were running a statement at once, and
    which statements. Its queries cost PostgreSQL CPU: only with
    ``--timeline``, whose figures are then not the plain run's."""

    def __init__(self, url: str, every: float = 0.01) -> None:
        self.url, self.every = url, every
        self.samples: list[tuple[float, list[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with h.observe(self.url) as pg:
            while not self._stop.is_set():
                rows = pg.execute(
                    f"{h.OWN_QUERY} SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 60) FROM pg_stat_activity "
                    "WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                    f"AND query NOT LIKE '{h.OWN_QUERY}%%'").fetchall()
                self.samples.append((time.monotonic(), [r[0] for r in rows]))
                self._stop.wait(self.every)

    def __enter__(self) -> "Activity":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict:
        counts = collections.Counter(len(active) for _, active in self.samples)
        kinds = collections.Counter(q for _, active in self.samples for q in active)
        n = len(self.samples) or 1
        return {"samples": len(self.samples),
                "active_at_once": {k: round(v / n, 3) for k, v in sorted(counts.items())},
                "mean_active": round(sum(k * v for k, v in counts.items()) / n, 2),
                "statements": {q: round(v / n, 3) for q, v in kinds.most_common(12)}}


def idle_cost(statements: h.Statements, meter: h.Meter, seconds: float) -> dict | None:
    """What the processes cost with no work at all, over ``seconds`` right
    before the jobs are stored: statements a second that reached PostgreSQL
    (the dispatcher's tick, the gateway's sweep, the leases' upkeep), by
    kind, and each role's CPU as a fraction of a core: the price of how
    often the servers look for work (a shorter tick would raise both)."""
    if seconds <= 0:
        return None
    statements.reset()
    before = meter.read()
    time.sleep(seconds)  # measuring what nothing costs: there is nothing to await
    after = meter.read()
    sql = statements.report(1)
    wall = after.at - before.at
    return {
        "seconds": round(wall, 2),
        "statements_per_s": round(sql["statements"] / wall, 1) if sql else None,
        "by_kind_per_s": {k: round(v / wall, 1) for k, v in sql["by_kind"].items()} if sql else None,
        "top_per_s": {t["query"][:90]: round(t["calls"] / wall, 1) for t in sql["top"][:8]} if sql else None,
        "cpu_cores": {role: round((after.cpu[role] - before.cpu[role]) / wall, 4) for role in after.cpu},
    }


def run_server(args: argparse.Namespace, url: str, etcd_endpoint: str, folder: Path) -> dict:
    h.reset_data(url)
    since_us = h.to_us(datetime.now(timezone.utc))  # the run's executions are of instants from here on
    load_before = h.load_average()
    with h.cluster(folder, url, etcd_endpoint, workers=args.workers, slots=args.slots,
                   max_jobs=max(args.jobs, 100_000), server_id="bench-e2e", servers=args.servers) as (fleet, pool):
        meter = h.Meter(
            {"server": fleet.pids, "workers": pool.pids,
             **({"postgres": [pg]} if (pg := h.postmaster_pid(url)) else {}),
             **({"etcd": [pid]} if (pid := h.etcd_pid(etcd_endpoint)) else {})},
            etcd_endpoint, fleet.members(),
        )
        history = h.insert_history(url, args.history, since_us)  # before the CPU is read and settled
        statements = h.Statements(url)
        poll = h.observe(url)  # opened before the CPU is read: its backend's start is not the server's
        settled = meter.settle()
        idle = idle_cost(statements, meter, args.idle_seconds)
        readings = [meter.read()]
        def committed() -> None:
            readings.append(meter.read())
            if not args.no_wake:  # what the API sends once a write of due-now jobs committed
                h.wake_claims(etcd_endpoint, fleet.server_ids)

        created = h.insert_once_jobs(url, args.jobs, datetime.now(timezone.utc), name="e2e", on_commit=committed)
        stored, before = readings
        tables_before = h.table_updates(url, settle=0)  # at once: the server is claiming already
        indexes_before = h.index_sizes(url)
        statements.reset()
        errors = h.PostgresErrors()
        locks = h.LockWaits()
        profile = Path(args.profile) / "e2e" if args.profile else None
        activity = Activity(url) if args.timeline else contextlib.nullcontext()
        with poll, h.profiled({**fleet.profiled(), "worker-0": pool.pids[0]}, profile), activity:
            ended = wait_until_ended(poll, args.jobs, pool, args.stall, since_us)
        after = meter.read()
        sql = statements.report(args.jobs)
        jit = statements.jit(args.jobs)
        if sql is not None:
            sql["errors_logged"] = errors.counts()
            sql["lock_waits"] = locks.counts()
            sql["tables"] = h.updates_between(tables_before, h.table_updates(url), args.jobs)
            sql["indexes"] = h.indexes_between(indexes_before, h.index_sizes(url), args.jobs)
        stopped_workers = pool.stop()
        server_exits = fleet.terminate(30)
    outcome = server_outcome(url, created["committed_at"], since_us)
    if args.timeline:
        outcome["timeline"] = {**timeline(url, since_us), "activity": activity.report()}
    if args.history:
        with h.observe(url) as pg:  # still there: the retention pass left them, nothing else touched them
            history["left_after_run"] = pg.execute(
                f"{h.OWN_QUERY} SELECT count(*) FROM executions WHERE nominal_at < %s", (since_us,)).fetchone()[0]
    executed = h.by_server(outcome.pop("executed_by_worker"), args.workers, fleet.server_ids)
    return {
        "jobs": args.jobs,
        "history": history,
        "servers": args.servers,
        "workers": args.workers,
        "slots_per_worker": args.slots,
        "stored": {k: v for k, v in created.items() if k != "committed_at"},
        "ended": ended,
        **outcome,
        "claimed_by_server": h.claimed_by_owner(url, since_us),
        "executed_by_server": executed,
        **h.Meter.difference(before, after, args.jobs),
        "settled_s": settled,
        "idle": idle,
        "storing_cpu_s": {role: figures["cpu_s"] for role, figures in
                          h.Meter.difference(stored, before, args.jobs)["cpu"].items()},
        "sql": sql,
        "jit": jit,
        "exit_codes": {"workers": stopped_workers, "server": server_exits[0], "servers": server_exits},
        "load_average_before": load_before,
        "load_average_after": h.load_average(),
    }


# ------------------------------------------------------------------ replay

_EXECUTION_COLUMNS = (
    ("id", "text"), ("job_id", "text"), ("tenant", "text"), ("partition", "int"), ("origin", "text"),
    ("nominal_at", "bigint"), ("due_at", "bigint"), ("ready_at", "bigint"), ("attempt", "int"),
    ("delivery", "int"), ("status", "text"), ("handler", "text"), ("missed_count", "int"), ("reap_count", "int"),
    ("payload", "bytea"), ("error", "text"), ("dead_reason", "text"), ("created_at", "bigint"),
)
CHECK_EPOCHS = "SELECT partition, epoch FROM partitions WHERE partition = ANY(%s) ORDER BY partition FOR SHARE"
CLAIM = (
    "SELECT c.job_id, c.tenant, c.partition, (SELECT j.spec FROM jobs AS j WHERE j.id = c.job_id "
    "AND j.version = c.version), c.next_run_at, c.next_due_at, c.run_count FROM job_cursors AS c "
    "WHERE c.state = 'active' AND c.partition = ANY(%s) AND c.next_run_at <= %s LIMIT %s FOR UPDATE SKIP LOCKED"
)
ENQUEUE = (
    f"INSERT INTO executions ({', '.join(c for c, _ in _EXECUTION_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"%b::{kind}[]" for _, kind in _EXECUTION_COLUMNS)
    + ") ON CONFLICT (id) DO NOTHING"
)
ADVANCE = (
    "UPDATE job_cursors SET next_run_at = NULL, next_due_at = NULL, run_count = job_cursors.run_count + 1, "
    "state = 'completed' FROM unnest(%b::text[]) AS v(id) WHERE job_cursors.job_id = v.id"
)
HAND_OUT = (
    "UPDATE executions e SET status = 'running', owner = %s, delivery = e.delivery + 1, handed_out_at = %s "
    "FROM jobs j WHERE e.id IN (SELECT id FROM executions WHERE status = 'scheduled' AND ready_at <= %s "
    "AND tenant = ANY(%s) AND handler = ANY(%s) ORDER BY ready_at LIMIT %s FOR UPDATE SKIP LOCKED) "
    "AND j.id = e.job_id "
    "RETURNING e.id, e.job_id, e.tenant, e.origin, e.nominal_at, e.due_at, e.ready_at, e.attempt, e.delivery, "
    "e.payload, e.missed_count, j.spec"
)
# A plain success keeps its attempt's record on its row: no attempt row.
OUTCOME = (
    "UPDATE executions SET status = 'succeeded', finished_at = %s, owner = NULL, worker_id = NULL, error = '', "
    "handed_out_at = NULL, attempt_started_at = v.started_at, attempt_worker_id = v.worker_id, "
    "attempt_waited_us = 0, attempt_output = v.output "
    "FROM unnest(%b::text[], %b::int[], %b::bigint[], %b::text[], %b::bytea[]) "
    "AS v(id, delivery, started_at, worker_id, output) "
    "WHERE executions.id = v.id AND executions.delivery = v.delivery AND executions.status = 'running' "
    "RETURNING executions.id"
)


def precompute(url: str) -> dict[str, tuple]:
    """Per stored job, the execution row the claim inserts (everything but
    ``created_at``), computed before timing as a server computes it."""
    with h.observe(url) as pg:
        rows = pg.execute(
            f"{h.OWN_QUERY} SELECT j.id, j.tenant, j.partition, j.spec, c.next_run_at, c.next_due_at "
            "FROM jobs AS j JOIN job_cursors AS c ON c.job_id = j.id"
        ).fetchall()
    out = {}
    for job_id, tenant, partition, spec, nominal, due in rows:
        job = job_pb2.Job.FromString(spec)
        out[job_id] = (execution_id(job_id, from_us(nominal)), job_id, tenant, partition, "scheduled", nominal, due,
                       due, 1, 0, "scheduled", job.target.handler.name, 1, 0, job.payload, "", "")
    return out


def run_replay(url: str, jobs: int) -> dict:
    h.reset_data(url)
    load_before = h.load_average()
    created = h.insert_once_jobs(url, jobs, datetime.now(timezone.utc), name="replay")
    pre = precompute(url)
    with h.observe(url) as pg:
        partitions = [r[0] for r in pg.execute(f"{h.OWN_QUERY} SELECT partition FROM partitions ORDER BY partition")]
        if not partitions:  # a store no server has run on yet
            partitions = list(range(h.PARTITIONS))
    phases = {}
    with psycopg.connect(h.conninfo(url)) as pg:
        pg.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        cur = pg.cursor()
        began = time.perf_counter()
        # claim + enqueue
        claimed = 0
        while True:
            now_us = h.to_us(datetime.now(timezone.utc))
            cur.execute(CHECK_EPOCHS, (partitions,))
            cur.fetchall()
            cur.execute(CLAIM, (partitions, now_us + 60_000_000, CLAIM_BATCH))
            rows = cur.fetchall()
            if rows:
                values = [pre[row[0]] + (now_us,) for row in rows]
                cur.execute(ENQUEUE, [list(column) for column in zip(*values)])
                cur.execute(ADVANCE, [[row[0] for row in rows]])
            pg.commit()
            claimed += len(rows)
            if len(rows) < CLAIM_BATCH:
                break
        phases["claim_enqueue"] = time.perf_counter() - began
        # hand-out
        mark = time.perf_counter()
        handed: list[tuple] = []
        while True:
            now_us = h.to_us(datetime.now(timezone.utc))
            cur.execute(HAND_OUT, ("bench-session", now_us, now_us, [h.TENANT], [h.HANDLER], HANDOUT_BATCH))
            rows = cur.fetchall()
            pg.commit()
            handed.extend((row[0], row[8], now_us) for row in rows)
            if len(rows) < HANDOUT_BATCH:
                break
        phases["hand_out"] = time.perf_counter() - mark
        # outcome + history
        mark = time.perf_counter()
        recorded = 0
        for start in range(0, len(handed), RESULT_BATCH):
            batch = handed[start:start + RESULT_BATCH]
            started = {ident: at for ident, _, at in batch}
            now_us = h.to_us(datetime.now(timezone.utc))
            cur.execute(OUTCOME, (now_us, [b[0] for b in batch], [b[1] for b in batch],
                                  [started[b[0]] for b in batch], ["bench-w0"] * len(batch), [b"{}"] * len(batch)))
            done = cur.fetchall()
            pg.commit()
            recorded += len(done)
        phases["outcome_history"] = time.perf_counter() - mark
        total = time.perf_counter() - began
    if not claimed == len(handed) == recorded == jobs:
        raise AssertionError(f"replay: {jobs} jobs, {claimed} claimed, {len(handed)} handed out, {recorded} recorded")
    with h.observe(url) as pg:
        history = pg.execute(f"{h.OWN_QUERY} SELECT count(*) FROM {h.ATTEMPTS} a").fetchone()[0]
    return {
        "jobs": jobs,
        "stored": {k: v for k, v in created.items() if k != "committed_at"},
        "history_rows": history,
        "batches": {"claim_enqueue": CLAIM_BATCH, "hand_out": HANDOUT_BATCH, "outcome_history": RESULT_BATCH},
        "seconds": round(total, 3),
        "executions_per_s": round(recorded / total),
        "phases_s": {name: round(seconds, 3) for name, seconds in phases.items()},
        "phases_rows_per_s": {name: round(jobs / seconds) for name, seconds in phases.items()},
        "load_average_before": load_before,
        "load_average_after": h.load_average(),
    }


def cores_during_run(cpu: dict | None, jobs: int, seconds: float | None) -> float | None:
    """All the CPU a run's processes used (a ``Meter.difference`` ``cpu``
    figure) over ``seconds``, the run's window from the jobs' commit to the
    last completion recorded: see ``cpu_cores_during_run``."""
    figures = peers.cpu_ms_per_execution(cpu)
    if not figures or not seconds:
        return None
    return round(figures["total"] * jobs / 1000 / seconds, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000, help="one-off jobs due now (default 50 000)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--slots", type=int, default=1000, help="slots per worker (default 1000)")
    parser.add_argument("--servers", type=int, default=1,
                        help="tickwheel server processes sharing the store and etcd (default 1); worker k "
                             "connects to server k %% N")
    parser.add_argument("--history", type=int, default=0, metavar="N",
                        help="ended executions of other jobs in the store before the run (default 0: an empty "
                             "store; at most 10 000 000)")
    parser.add_argument("--stall", type=float, default=60.0, help="give up after this many seconds without progress")
    parser.add_argument("--peer-settings", default=peers.PGQUEUER_SETTINGS, metavar="WxB,…",
                        help=f"pgqueuer worker processes x dequeue batch, each run (default {peers.PGQUEUER_SETTINGS})")
    parser.add_argument("--no-peer", action="store_true", help="leave pgqueuer out (no bench extra needed)")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="measure the idle servers' statements and CPU for this long before storing (default 3; "
                             "0: not measured)")
    parser.add_argument("--no-wake", action="store_true",
                        help="do not wake the servers' claims after the jobs' commit (their first claim then "
                             "waits for the next tick, as before session 25)")
    parser.add_argument("--pg", help="a PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd")
    parser.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the throwaway PostgreSQL (repeatable), for experiments")
    parser.add_argument("--profile", metavar="DIR", help="sample the server and one worker with py-spy into DIR")
    parser.add_argument("--timeline", action="store_true",
                        help="report executions claimed, started and finished per 100 ms, and PostgreSQL's "
                             "active backends sampled every 10 ms (the sampling costs PostgreSQL CPU)")
    parser.add_argument("--logs", metavar="DIR", help="keep the server's and workers' logs in DIR")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.workers, args.slots, args.stall, args.peer_settings = 300, 2, 100, 30.0, "2x10"
        args.idle_seconds = min(args.idle_seconds, 0.5)
    if args.jobs < 1 or args.workers < 1 or not 1 <= args.slots <= 10_000 or not 1 <= args.servers <= 16:
        parser.error("--jobs and --workers must be positive, --slots between 1 and 10 000, --servers 1 to 16")
    if not 0 <= args.history <= h.MAX_HISTORY:
        parser.error("--history between 0 and 10 000 000")
    try:
        pg_settings = h.parse_settings(args.pg_set)
        peer_settings = peers.parse_pgqueuer_settings(args.peer_settings)
    except ValueError as error:
        parser.error(str(error))
    if not args.no_peer:  # before anything runs: a missing extra is said at once
        peers.require("pgqueuer")
        peers.require("asyncpg")
    began = time.perf_counter()
    with h.postgres(args.pg, pg_settings) as url, h.etcd(args.etcd) as etcd_endpoint, \
            h.workdir(args.logs, "tickwheel-bench-e2e-") as folder:
        server = run_server(args, url, etcd_endpoint, folder)
        replay = run_replay(url, args.jobs)
        peer = None if args.no_peer else peers.run_pgqueuer(url, args.jobs, peer_settings, folder, stall=args.stall)
        settings = h.server_settings(url)
    best = peer["best"] if peer else None
    ratio = peers.ratio(server["executions_per_s"], best["executions_per_s"] if best else None)
    postgres_ms = server["cpu"].get("postgres", {}).get("cpu_ms_per_execution")
    report = {
        "benchmark": "e2e",
        "smoke": args.smoke,
        "servers": args.servers,
        "history": args.history,
        "executions_per_s": {"tickwheel": server["executions_per_s"],
                             "pgqueuer_best": best["executions_per_s"] if best else None},
        "ratio": ratio,
        "from_commit": {
            "executions_per_s": {"tickwheel": server["from_commit"]["executions_per_s"],
                                 "pgqueuer_best": best["from_commit_executions_per_s"] if best else None},
            "ratio": peers.ratio(server["from_commit"]["executions_per_s"],
                                 best["from_commit_executions_per_s"] if best else None),
        },
        "worker_start_lateness_s": server["worker_start_lateness_s"],
        "cpu_cores": {"tickwheel": server["cpu_cores"], "pgqueuer_best": best["cpu_cores"] if best else None},
        "cpu_cores_during_run": {
            "tickwheel": cores_during_run(server["cpu"], args.jobs, server["from_commit"]["seconds"]),
            "pgqueuer_best": cores_during_run(best["cpu"], args.jobs, args.jobs / best["from_commit_executions_per_s"])
            if best and best.get("from_commit_executions_per_s") else None,
        },
        "cpu_ms_per_execution": {"tickwheel": peers.cpu_ms_per_execution(server["cpu"]),
                                 "pgqueuer_best": peers.cpu_ms_per_execution(best["cpu"]) if best else None},
        "statements_per_execution": {"tickwheel": (server["sql"] or {}).get("statements_per_execution"),
                                     "pgqueuer_best": best["statements_per_execution"] if best else None},
        "rows_written_per_execution": {"tickwheel": (server["sql"] or {}).get("rows_written_per_execution"),
                                       "pgqueuer_best": best["rows_written_per_execution"] if best else None},
        "server": server,
        "peer": peer,
        "replay": replay,
        "ratio_to_replay": peers.ratio(server["executions_per_s"], replay["executions_per_s"]),
        "goal": {
            **GOAL,
            "met": None if ratio is None else ratio >= GOAL["ratio"] and postgres_ms is not None
            and postgres_ms <= GOAL["postgres_cpu_ms_per_execution"],
        },
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
