"""Benchmark: how the arming pass and the hand-out round find the tenants with
work when a worker group may serve thousands of tenants and few have any
(issue 17, "fairness at scale"). Store level, on PostgreSQL: the stores'
own calls (``ArmStore.arm``, ``HandoutStore.hand_out_ready``), no server.

    .venv/bin/python loadtest/bench_tenant_probe.py [--tenants 1,100,1000,10000] [--passes 40]
                                                    [--flood 20000] [--steps N] [--ready-steps N] [--pg URL]
                                                    [--smoke]

Prints one JSON object. Without ``--pg`` a throwaway PostgreSQL is started
(``tests/support``) and deleted afterwards. For each tenant count ``N``, from
empty data tables, one worker group whose capability names all ``N`` tenants
(weight 1, no cap):

- ``idle``: no tenant has any execution: ``--passes`` arming passes (a
  10 s window, limit 2 000) and as many hand-out rounds (limit 2 000) that
  find nothing;
- ``parked``: every tenant has one execution ready an hour ahead (a retry
  backing off, say): outside both windows, so again nothing is found;
- ``flood``: with the parked rows, tenant ``t0`` has ``--flood`` one-offs
  ready at one instant 5 s ahead and the last tenant one at the same
  instant: arming passes of 2 000 until that quiet run is armed (its
  ``passes`` and the wall time they took), then, from fresh data, hand-out
  rounds of 2 000 at the instant until it is handed out;
- ``backlog``: the same, but the ``--flood`` runs of ``t0`` are each at an
  instant of their own, spread over the 10 s before :data:`AT` (more
  (instant, tenant) pairs in either window than the ready side's walk
  visits a pass: the worst case, where a pass also walks the tenants):
  ``--passes`` times what finding the tenants with work costs alone (the
  arm's and the round's walk, called as they call it, each in a
  transaction of its own; nothing is armed or handed out), then, as for
  ``flood``, the passes until the quiet run is armed / handed out.

Per pass: the statements (``pg_stat_statements``: calls per pass by shape,
the costliest shapes), the wall time (ms, mean) and PostgreSQL's CPU
(the postmaster's process tree, ms per pass): an idle server runs one arming
pass and one sweep round a second, so ``idle`` and ``parked`` give
PostgreSQL's CPU per idle second as ``arm + round``. The machine is shared:
``load`` carries ``/proc/loadavg`` before and after. ``--smoke`` runs tiny
counts so CI keeps the script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from tickwheel.v1 import job_pb2

import _harness as h
from tests.support.jobrows import insert_jobs
from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.queue import ExecutionQueue
from tickwheel_server.store.tables import executions, tenants

T = datetime(2027, 1, 4, tzinfo=timezone.utc)
WINDOW = timedelta(seconds=10)
LIMIT = 2000
AT = T + timedelta(seconds=5)
"""The instant of the flood and of the quiet tenant's run."""


def _tenant(name: str, now_us: int) -> dict:
    return dict(name=name, weight=1, max_concurrency=0, max_jobs=1_000_000, max_payload_bytes=65536,
                requests_per_second=100, state="active", pause_reason="", created_at=now_us, updated_at=now_us,
                version=1)


def _job(ident: str, tenant: str, spec: bytes, now_us: int) -> dict:
    return dict(id=ident, tenant=tenant, partition=0, name="j", state="active", spec=spec, time_zone="UTC",
                next_run_at=None, next_due_at=None, run_count=0, tzdata_version="x", pause_reason="", paused_at=None,
                version=1, created_at=now_us, updated_at=now_us)


def _execution(ident: str, job_id: str, tenant: str, ready_us: int, now_us: int) -> dict:
    return dict(id=ident, job_id=job_id, tenant=tenant, partition=0, origin="scheduled", nominal_at=ready_us,
                due_at=ready_us, ready_at=ready_us, attempt=1, delivery=0, status="scheduled", handler="echo",
                missed_count=1, reap_count=0, payload=b"", error="", dead_reason="", created_at=now_us)


def populate(engine: sa.Engine, url: str, names: list[str], *, parked: bool, flood: int, spread: bool = False) -> None:
    """``names`` as tenants; with ``parked`` one run each an hour ahead; with
    ``flood`` that many one-offs of the first tenant at :data:`AT` (with
    ``spread``, each at its own instant over the 10 s before it) and one of the last at :data:`AT`."""
    h.reset_data(url)
    now_us = to_us(T)
    once = job_pb2.Job(name="once", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    once.schedule.once_at.FromDatetime(AT)
    spec = once.SerializeToString()
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenants"))
        conn.execute(tenants.insert(), [_tenant(name, now_us) for name in names])
        job_rows, rows = [], []
        if parked:
            later = to_us(T + timedelta(hours=1))
            job_rows += [_job(f"park_{i}", name, spec, now_us) for i, name in enumerate(names)]
            rows += [_execution(f"park_{i}:1", f"park_{i}", name, later, now_us) for i, name in enumerate(names)]
        if flood:
            at = to_us(AT)
            for i in range(flood):
                job_rows.append(_job(f"flood_{i}", names[0], spec, now_us))
                ready = at - 10_000_000 + i * (10_000_000 // flood) if spread else at
                rows.append(_execution(f"flood_{i}:1", f"flood_{i}", names[0], ready, now_us))
            job_rows.append(_job("quiet", names[-1], spec, now_us))
            rows.append(_execution("quiet:1", "quiet", names[-1], at, now_us))
        for start in range(0, len(job_rows), 5000):
            insert_jobs(conn, job_rows[start:start + 5000])
        for start in range(0, len(rows), 5000):
            conn.execute(executions.insert(), rows[start:start + 5000])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


async def measure(url: str, postmaster: int | None, passes: int, call) -> dict:
    """``passes`` calls of ``call``: wall ms and PostgreSQL CPU ms per pass, statements per pass."""
    statements = h.Statements(url)
    statements.reset()
    cpu0 = h.tree_cpu_s(postmaster) if postmaster else None
    began, own = time.perf_counter(), time.process_time()
    for _ in range(passes):
        await call()
    wall = time.perf_counter() - began
    own = time.process_time() - own
    cpu = (h.tree_cpu_s(postmaster) - cpu0) if postmaster else None
    report = statements.report(passes, top=4)
    shapes = None
    if report is not None:
        shapes = [{"query": top["query"][:160], "per_pass": top["calls_per_execution"], "mean_ms": top["mean_ms"]}
                  for top in report["top"] if not top["query"].upper().startswith(("BEGIN", "COMMIT", "ROLLBACK"))]
    return {
        "passes": passes,
        "wall_ms_per_pass": round(wall * 1000 / passes, 3),
        "python_cpu_ms_per_pass": round(own * 1000 / passes, 3),
        "postgres_cpu_ms_per_pass": None if cpu is None else round(cpu * 1000 / passes, 3),
        "statements_per_pass": None if report is None else report["statements_per_execution"],
        "shapes": shapes,
    }


async def until_found(queue: ExecutionQueue, capability: Capability, quiet: str, arm: bool, most: int) -> dict:
    """Passes (arming) or rounds (hand-out, at the instant) of :data:`LIMIT`
    until ``quiet``'s run is armed or handed out."""
    began = time.perf_counter()
    for n in range(1, most + 1):
        if arm:
            got = await queue.arming.arm("s1", T, T + WINDOW, capability, LIMIT)
            tenants_seen = {a.handed.tenant for a in got}
        else:
            got = await queue.handout.hand_out_ready("s1", AT, capability, LIMIT)
            tenants_seen = {x.tenant for x in got}
        if quiet in tenants_seen:
            return {"passes": n, "wall_s": round(time.perf_counter() - began, 3)}
    return {"passes": None, "wall_s": round(time.perf_counter() - began, 3)}


async def finding(engine: sa.Engine, walk, capability: Capability, until: datetime, since: datetime | None) -> None:
    """One pass's finding of the tenants with work alone (the store's walk, as the arm or the round calls it)."""
    with engine.begin() as conn:
        walk.visit(conn, capability, to_us(until), None if since is None else to_us(since))


def _queue(engine: sa.Engine, clock: FakeClock, steps: int | None, ready_steps: int | None = None) -> ExecutionQueue:
    queue = ExecutionQueue(engine, clock)
    if steps is not None:  # the tenant walk's bound (branch tenantprobe on)
        queue.handout.walk.steps = queue.arming.walk.steps = steps
    if ready_steps is not None:  # the ready side's bound (branch quietwalk on)
        queue.handout.walk.ready_steps = queue.arming.walk.ready_steps = ready_steps
    return queue


async def run(url: str, counts: list[int], passes: int, flood: int, steps: int | None,
              ready_steps: int | None = None) -> dict:
    engine = create_store_engine(url)
    migrate(engine)
    postmaster = h.postmaster_pid(url)
    results = {}
    try:
        for n in counts:
            names = [f"t{i}" for i in range(n)]
            capability = Capability(tuple(names), ("echo",), False)
            figures: dict = {}
            for scenario in ("idle", "parked"):
                populate(engine, url, names, parked=scenario == "parked", flood=0)
                queue = _queue(engine, FakeClock(T), steps, ready_steps)
                arm = await measure(url, postmaster, passes,
                                    lambda: queue.arming.arm("s1", T, T + WINDOW, capability, LIMIT))
                rounds = await measure(url, postmaster, passes,
                                       lambda: queue.handout.hand_out_ready("s1", T, capability, LIMIT))
                idle_cpu = None
                if arm["postgres_cpu_ms_per_pass"] is not None:
                    idle_cpu = round(arm["postgres_cpu_ms_per_pass"] + rounds["postgres_cpu_ms_per_pass"], 3)
                figures[scenario] = {"arm": arm, "round": rounds, "postgres_cpu_ms_per_idle_second": idle_cpu}
            most = flood // LIMIT + n + 2
            populate(engine, url, names, parked=True, flood=flood)
            fresh = lambda at: _queue(engine, FakeClock(at), steps, ready_steps)  # noqa: E731
            armed = await until_found(fresh(T), capability, names[-1], True, most)
            populate(engine, url, names, parked=True, flood=flood)
            handed = await until_found(fresh(AT), capability, names[-1], False, most)
            figures["flood"] = {"flood": flood, "quiet_armed_after": armed, "quiet_handed_out_after": handed}
            populate(engine, url, names, parked=True, flood=flood, spread=True)
            queue = _queue(engine, FakeClock(T), steps, ready_steps)
            arm = await measure(url, postmaster, passes,
                                lambda: finding(engine, queue.arming.walk, capability, T + WINDOW, T))
            rounds = await measure(url, postmaster, passes,
                                   lambda: finding(engine, queue.handout.walk, capability, AT, None))
            armed = await until_found(fresh(T), capability, names[-1], True, most)
            populate(engine, url, names, parked=True, flood=flood, spread=True)
            handed = await until_found(fresh(AT), capability, names[-1], False, most)
            figures["backlog"] = {"arm": arm, "round": rounds, "quiet_armed_after": armed,
                                  "quiet_handed_out_after": handed}
            results[str(n)] = figures
    finally:
        engine.dispose()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", default="1,100,1000,10000")
    parser.add_argument("--passes", type=int, default=40)
    parser.add_argument("--flood", type=int, default=20000)
    parser.add_argument("--steps", type=int, help="the tenant walk's bound per pass (default: the store's)")
    parser.add_argument("--ready-steps", type=int, help="the ready side's bound per pass (default: the store's)")
    parser.add_argument("--pg")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.tenants.split(",")]
    if args.smoke:
        counts, args.passes, args.flood = [1, 70], 3, 50
    load_before = h.load_average()
    with h.postgres(args.pg) as url:
        results = asyncio.run(run(url, counts, args.passes, args.flood, args.steps, args.ready_steps))
        settings = h.server_settings(url)
    print(json.dumps({
        "benchmark": "tenant_probe",
        "smoke": args.smoke,
        "limit": LIMIT,
        "window_s": WINDOW.total_seconds(),
        "walk_steps": args.steps,
        "ready_steps": args.ready_steps,
        "tenants": results,
        "postgres": settings,
        "machine": {"python": platform.python_version(), "cpus": h.os.cpu_count(),
                    "load_before": load_before, "load_after": h.load_average()},
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
