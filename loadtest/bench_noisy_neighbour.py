"""Benchmark: a noisy neighbour. Tenant ``flood`` has 100 000 one-off jobs due
within one second, tenant ``quiet`` 1 000 due in the same second; a real
``tickwheel server`` hands them to no-op worker processes on PostgreSQL +
etcd. Does the flood delay the quiet tenant?

    .venv/bin/python loadtest/bench_noisy_neighbour.py [--flood 100000] [--quiet 1000] [--workers 4] [--slots 500]
                                                       [--instant] [--lead 55] [--pg URL] [--etcd HOST:PORT]
                                                       [--logs DIR] [--profile DIR] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL and
etcd are started (``tests/support``) and deleted afterwards. Two runs, each
from empty data tables, with one server process and ``--workers`` worker
processes running the built-in ``echo`` handler (``--slots`` each, so the
workers' credit, not the jobs, bounds what a hand-out round may claim):

1. ``alone``: only the quiet tenant's jobs: its baseline, measured in this run;
2. ``with_flood``: both tenants' jobs, due in the same second.

Both tenants have weight 1 and no cap: the quiet tenant is protected by the
hand-out's weighted fair share alone (each round splits the workers' credit
between the tenants with ready work), not by a cap on the flood.

The jobs are stored in one transaction per run, as CreateJob stores them
(the API's ``normalise_job``, ``new_job_id``, the engine's first fire), due
spread evenly over the second ``[D, D + 1 s)`` that starts ``--lead`` seconds
later (inside the dispatcher's 60 s look-ahead, so they are claimed into the
timer wheel ahead of time; ``claimed_ahead`` says whether they were). Start
lateness per tenant comes from the store: ``attempts.started_at`` (the
server's hand-out instant) minus the execution's ``due_at``, signed.

``--instant`` (issue 17's armed path): each tenant's jobs are all due at
the same instant ``D`` instead of spread over the second, and the workers
get ``ceil(jobs / workers)`` slots each unless ``--slots`` is given (their
credit bounds what a server arms ahead, so the whole burst is armed 10 s
ahead and started a second ahead, as ``bench_burst.py`` runs it), e.g.
``--instant --flood 30000 --quiet 10``: does the flood's burst push the
quiet tenant's runs into its last start batches? Per tenant,
``at_instant`` counts the executions handed out stamped with their due
instant itself and ``within_1ms`` those stamped less than 1 ms after it:
an armed batch started ahead is sent at, and stamped with, the instant
(each start's stamp is unique, so only the first start of an instant
has the instant itself, the next ones a microsecond apart: ``at_instant``
is that first start batch); a round's hand-out, or a start after the
instant, is stamped with its own clock, later.

The goal (issue 6): the quiet tenant's p99 with the flood within 1 s of its
p99 alone (``goal.met``). ``all_claimed_ahead`` says whether the dispatcher
had created every execution before the due second (when not, lateness
includes the claim's, not only the hand-out's: raise ``--lead``);
``while_quiet_had_work`` gives the hand-outs, their rate and the quiet
tenant's part of them from the due second to its last start (to the
microsecond): fair share holds that part
near one half, so the goal is met when the hand-out rate is at least about
twice the quiet tenant's arrival rate. ``early`` (starts before due, must be 0) and
``dropped`` (jobs without a succeeded execution, must be 0) per tenant.
``sql`` counts what reached PostgreSQL from the due second on
(``pg_stat_statements``: statements per execution, commits, rollbacks, the
costliest shapes) and ``errors_logged`` its ERROR lines (serialization
failures the store retried); ``--profile DIR`` samples the server with
py-spy. ``--smoke`` runs a tiny flood in seconds so CI
keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2

import _harness as h

FLOOD = "flood"
QUIET = "quiet"
GOAL = {"quiet_p99_within_s_of_alone": 1.0}
POLL = 0.25


async def create_tenants(server: h.ServerProcess, max_jobs: int) -> str:
    """Both tenants (weight 1, no cap; reused if they exist) and a worker
    credential for their ``echo`` handler; returns the credential's secret."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        for name in (FLOOD, QUIET):
            tenant = admin_pb2.Tenant(name=name, weight=1, quotas=admin_pb2.TenantQuotas(max_jobs=max_jobs))
            try:
                await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=tenant), metadata=h.admin_metadata(server))
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise
        issued = await admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=[FLOOD, QUIET], handlers=[h.HANDLER], http=False,
                                                   description="noisy neighbour benchmark"),
            metadata=h.admin_metadata(server),
        )
    return issued.credential.secret


SPREAD_STEPS = 1000
"""Distinct due instants per tenant within the second (1 ms apart)."""


def insert_jobs(url: str, counts: dict[str, int], due: datetime,
                steps: int = SPREAD_STEPS) -> dict:
    """For each tenant, ``counts[tenant]`` one-off ``echo`` jobs due spread
    evenly over ``[due, due + 1 s)`` (in ``steps`` steps: 1 ms apart, or one
    instant), stored as CreateJob
    stores them (see ``_harness.insert_once_jobs``) in one transaction, and
    the instant it committed. The definitions are built once per due
    instant (jobs sharing one are identical but for their id), so storing
    100 000 takes seconds, not the look-ahead the dispatcher needs."""
    now = datetime.now(timezone.utc)
    version = h.tzdata_version()
    began = time.perf_counter()
    with h.observe(url, autocommit=False) as pg:
        partitions = pg.execute("SELECT partition_count FROM cluster WHERE id = 1").fetchone()[0]
        now_us = h.to_us(now)
        jobs, requests = [], []
        for tenant, count in counts.items():
            built: dict[int, tuple] = {}
            for i in range(count):
                step = (i * steps) // count
                if step not in built:
                    template = job_pb2.Job(name=f"{tenant}-{step:04d}", payload=b"{}",
                                           target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=h.HANDLER)))
                    template.schedule.once_at.FromDatetime(due + timedelta(milliseconds=step))
                    job = h.normalise_job(template, now)
                    fire = h.validate_schedule(h.schedule_of(job, "job_template"), now)
                    built[step] = (job.name, job.SerializeToString(), h.zone_of(h.schedule_of(job, "job_template")),
                                   h.to_us(fire.nominal_at), h.to_us(fire.due_at))
                name, spec, zone, nominal_us, due_us = built[step]
                job_id = h.new_job_id(now)
                jobs.append((job_id, tenant, h.partition_of(job_id, partitions), name, "active", spec, zone, nominal_us,
                             due_us, 0, version, "", None, 1, now_us, now_us))
                requests.append((tenant, "job", f"{tenant}-{i}", job_id, now_us))
        built_at = time.perf_counter()
        with pg.cursor() as cur:
            h.copy_jobs(cur, jobs)
            with cur.copy("COPY request_ids (tenant, kind, request_id, target, created_at) FROM STDIN") as copy:
                for row in requests:
                    copy.write_row(row)
            for tenant, count in counts.items():
                h.count_jobs(cur, tenant, count)
        pg.commit()
        committed_at = time.time()
    return {"jobs": len(jobs), "build_s": round(built_at - began, 2),
            "store_s": round(time.perf_counter() - built_at, 2), "committed_at": committed_at}


def shares_while_ready(url: str, due_us: int) -> dict | None:
    """The hand-out window of :func:`hand_out_window`, read from the store
    (each execution's first start). None without the flood."""
    with h.observe(url) as pg:
        rows = pg.execute(
            f"""{h.OWN_QUERY}
            SELECT e.tenant, min(a.started_at) FROM executions e JOIN {h.ATTEMPTS} a ON a.execution_id = e.id
            GROUP BY e.id, e.tenant"""
        ).fetchall()
    return hand_out_window(rows, due_us)


def hand_out_window(starts: list[tuple[str, int]], due_us: int) -> dict | None:
    """From the due instant to the quiet tenant's last start (``starts``:
    each execution's tenant and first start, microseconds; ``due_us``
    likewise): the hand-outs in it (all tenants), their rate and the quiet
    tenant's part of them, which fair share with equal weights makes about
    half while both have ready work. None without both tenants' starts.

    The window is kept to the microsecond, as the stamps are: an armed
    batch's starts are stamped with the due instant and the next ones a
    microsecond apart (``--instant``), so the window may be a few
    microseconds long, not zero. The rate is None only for a window of no
    time (every quiet start stamped with the instant itself), and over any
    other it counts at least the quiet tenant's last start."""
    quiet = [started for tenant, started in starts if tenant == QUIET]
    if not quiet or not any(tenant == FLOOD for tenant, _ in starts):
        return None
    until = max(quiet)
    window = [tenant for tenant, started in starts if due_us <= started <= until]
    seconds = (until - due_us) / 1e6
    return {
        "window_s": round(seconds, 6),
        "hand_outs": len(window),
        "hand_outs_per_s": round(len(window) / seconds, 1) if seconds > 0 else None,
        "quiet_part": round(sum(1 for tenant in window if tenant == QUIET) / max(len(window), 1), 3),
    }


def lateness_by_tenant(url: str, due_us: int) -> dict[str, dict]:
    """Per tenant: its jobs, executions, the start lateness of each (signed,
    seconds) as a distribution, early starts, dropped jobs, claims made ahead."""
    with h.observe(url) as pg:
        rows = pg.execute(
            f"""{h.OWN_QUERY}
            SELECT j.tenant, j.id, e.id, e.status, e.due_at, e.created_at, min(a.started_at)
            FROM jobs j
            LEFT JOIN executions e ON e.job_id = j.id
            LEFT JOIN {h.ATTEMPTS} a ON a.execution_id = e.id
            GROUP BY j.tenant, j.id, e.id, e.status, e.due_at, e.created_at
            """
        ).fetchall()
    out: dict[str, dict] = {}
    per: dict[str, dict] = {}
    for tenant, job_id, execution_id, status, due_at, created_at, started_at in rows:
        t = per.setdefault(tenant, {"jobs": set(), "succeeded": set(), "lateness": [], "early": 0, "executions": 0,
                                    "claimed_ahead": 0, "statuses": {}, "at_instant": 0, "within_1ms": 0})
        t["jobs"].add(job_id)
        if execution_id is None:
            continue
        t["executions"] += 1
        t["statuses"][status] = t["statuses"].get(status, 0) + 1
        if created_at < due_us:
            t["claimed_ahead"] += 1
        if status == "succeeded":
            t["succeeded"].add(job_id)
        if started_at is not None:
            t["lateness"].append((started_at - due_at) / 1e6)
            if started_at < due_at:
                t["early"] += 1
            else:
                t["at_instant"] += started_at == due_at
                t["within_1ms"] += started_at - due_at < 1000
    for tenant, t in sorted(per.items()):
        values = sorted(t["lateness"])
        out[tenant] = {
            "jobs": len(t["jobs"]),
            "executions": t["executions"],
            "started": len(values),
            "early": t["early"],
            "dropped": len(t["jobs"]) - len(t["succeeded"]),
            "claimed_ahead": t["claimed_ahead"],
            "at_instant": t["at_instant"],
            "within_1ms": t["within_1ms"],
            "statuses": t["statuses"],
            "lateness_s": {
                name: (round(h.percentile(values, q), 4) if values else None)
                for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
            } | {"min": round(values[0], 4) if values else None},
        }
    return out


def run(name: str, counts: dict[str, int], args: argparse.Namespace, url: str, etcd_endpoint: str,
        folder: Path) -> dict:
    h.reset_data(url)
    total = sum(counts.values())
    load_before = h.load_average()
    server = h.start_server_process(folder, "--store", url, "--etcd", etcd_endpoint, "--migrate",
                                    "--server-id", f"bench-noisy-{name}")
    pool = None
    try:
        credential = asyncio.run(create_tenants(server, max_jobs=max(total, 200_000)))
        pool = h.start_workers(folder, server.address, credential, args.workers, args.slots)
        asyncio.run(h.wait_ready(server, f"bench-noisy-{name}", args.workers))
        h.wait_started(url, server)
        due = datetime.fromtimestamp(int(time.time() + args.lead) + 1, timezone.utc)
        stored = insert_jobs(url, counts, due, 1 if args.instant else SPREAD_STEPS)
        lead_left = due.timestamp() - stored["committed_at"]
        if lead_left < 2:
            raise SystemExit(f"storing {total} jobs left {lead_left:.1f} s before the due second: raise --lead")
        meter = h.Meter(
            {"server": [server.process.pid], "workers": pool.pids,
             **({"postgres": [pg]} if (pg := h.postmaster_pid(url)) else {})},
        )
        time.sleep(max(0.0, due.timestamp() - 1 - time.time()))  # waiting for the due second itself
        statements = h.Statements(url)
        statements.reset()
        errors = h.PostgresErrors()
        poll = h.observe(url)  # opened before the CPU is read: its backend's start is not the server's
        before = meter.read()
        deadline = due.timestamp() + args.timeout
        ended = 0
        profile = Path(args.profile) / name if args.profile else None
        with poll, h.profiled({"server": server.process.pid}, profile):
            while time.time() < deadline:
                pool.check_alive()
                ended, jobs = h.ended_and_jobs(poll)
                if ended >= jobs:
                    break
                time.sleep(POLL)  # polling the store; the benchmark has no event to await from other processes
        after = meter.read()
        costs = h.Meter.difference(before, after, total)
        sql = statements.report(total)
        if sql is not None:
            sql["errors_logged"] = errors.counts()
        stopped_workers = pool.stop()
        pool = None
        server_exit = server.terminate(30)
    finally:
        if pool is not None:
            pool.stop()
        if server.process.poll() is None:
            try:
                server.terminate(30)
            except subprocess.TimeoutExpired:
                server.kill()
    tenants = lateness_by_tenant(url, h.to_us(due))
    return {
        "tenants": tenants,
        "all_claimed_ahead": all(t["claimed_ahead"] == t["jobs"] for t in tenants.values()),
        "while_quiet_had_work": shares_while_ready(url, h.to_us(due)),
        "due_at": due.isoformat(),
        "stored": {k: v for k, v in stored.items() if k != "committed_at"},
        "stored_before_due_s": round(lead_left, 2),
        "ended_within_timeout": ended >= total,
        "cpu": costs["cpu"],
        "sql": sql,
        "exit_codes": {"workers": stopped_workers, "server": server_exit},
        "load_average_before": load_before,
        "load_average_after": h.load_average(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=100_000, help="the flood tenant's jobs due in the second (default 100000)")
    parser.add_argument("--quiet", type=int, default=1_000, help="the quiet tenant's jobs due in the second (default 1000)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--slots", type=int, help="slots per worker (default 500; with --instant, ceil(jobs / workers))")
    parser.add_argument("--instant", action="store_true",
                        help="each tenant's jobs all due at one instant (the armed path), not spread over the second")
    parser.add_argument("--lead", type=float, default=55.0,
                        help="seconds between storing the jobs and their due second (default 55, under the "
                             "dispatcher's 60 s look-ahead; see claimed_ahead)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds after the due second to wait for every execution")
    parser.add_argument("--pg", help="a PostgreSQL database (postgresql://…); default: a throwaway server")
    parser.add_argument("--etcd", help="etcd HOST:PORT; default: a throwaway etcd")
    parser.add_argument("--logs", metavar="DIR", help="keep the server's and workers' logs in DIR")
    parser.add_argument("--profile", metavar="DIR", help="sample the server with py-spy during each run into DIR")
    parser.add_argument("--smoke", action="store_true", help="one tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.flood, args.quiet, args.workers, args.timeout = 2_000, 50, 2, 120.0
        args.lead = 14.0 if args.instant else 8.0  # instant: claimed, then armed 10 s ahead
        args.slots = args.slots or (None if args.instant else 100)
    if args.slots is None:
        args.slots = -(-(args.flood + args.quiet) // args.workers) if args.instant else 500
    if min(args.flood, args.quiet, args.workers, args.slots) < 1:
        parser.error("--flood, --quiet, --workers and --slots must be positive")
    if not 2 <= args.lead < 60:
        parser.error("--lead must be at least 2 s and under the dispatcher's 60 s look-ahead")
    began = time.perf_counter()
    with h.postgres(args.pg) as url, h.etcd(args.etcd) as etcd_endpoint, \
            h.workdir(args.logs, "tickwheel-bench-noisy-") as folder:
        alone = run("alone", {QUIET: args.quiet}, args, url, etcd_endpoint, folder)
        flooded = run("with-flood", {FLOOD: args.flood, QUIET: args.quiet}, args, url, etcd_endpoint, folder)
        settings = h.server_settings(url)
    quiet_alone = alone["tenants"][QUIET]["lateness_s"]["p99"]
    quiet_flooded = flooded["tenants"][QUIET]["lateness_s"]["p99"]
    difference = None if quiet_alone is None or quiet_flooded is None else round(quiet_flooded - quiet_alone, 4)
    clean = all(t["early"] == 0 and t["dropped"] == 0 for r in (alone, flooded) for t in r["tenants"].values())
    report = {
        "benchmark": "noisy_neighbour",
        "smoke": args.smoke,
        "flood": args.flood,
        "quiet": args.quiet,
        "workers": args.workers,
        "slots_per_worker": args.slots,
        "instant": args.instant,
        "runs": {"alone": alone, "with_flood": flooded},
        "goal": {
            **GOAL,
            "quiet_p99_alone_s": quiet_alone,
            "quiet_p99_with_flood_s": quiet_flooded,
            "difference_s": difference,
            "met": clean and difference is not None and difference <= GOAL["quiet_p99_within_s_of_alone"],
        },
        "baseline": "runs.alone: the quiet tenant without the flood, measured in this run",
        "postgres": {**settings, "throwaway": not args.pg},
        "etcd_throwaway": not args.etcd,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "total_s": round(time.perf_counter() - began, 1),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
