"""Benchmark: how long a job made due now waits for a worker, per entry
point, across two servers (issue 17).

    .venv/bin/python loadtest/bench_wakeup.py [--rounds 100] [--batch 50] [--pause 0.3]
                                              [--pg URL] [--etcd HOST:PORT] [--logs DIR]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``) and deleted afterwards.

Two ``tickwheel server`` processes (``s1``, ``s2``: 256 partitions shared
between them) on one PostgreSQL and one etcd, one ``tickwheel worker``
(``echo``) connected to each. Every request goes to ``s2``, one at a time,
each after a random pause of 0 to ``--pause`` seconds (so the requests
fall at every phase of the dispatchers' 1 s tick; ``--pause 0``: back to
back, the most one client sends). The tenant's request rate quota is
lifted. Each round sends:

- ``create``: CreateJob of a one-off due now (the client's clock);
- ``create_past``: CreateJob of a one-off due 10 s ago;
- ``update``: UpdateJob moving a one-off from an hour ahead to now;
- ``trigger``: TriggerJob of that hour-ahead job (a manual run, ready now);
- every tenth round, ``batch``: BatchCreateJobs of ``--batch`` one-offs due now.

Then, from the store, for each execution: ``wait_ms`` = the worker's start
(its attempt's ``worker_started_at``) minus the later of its due instant
and the write's instant (``jobs.created_at`` for a create,
``jobs.updated_at`` for an update, the execution's ``created_at`` for a
trigger; each stamped just before its transaction commits), as p50, p99 and
max per entry point, apart for the jobs whose partition ``s2`` owns
(``local``) and those ``s1`` owns (``remote``: the creating server does not
own the partition). ``etcd_puts`` is etcd's Put calls over the request
phase (its ``/metrics``), per request and per job; ``cpu_ms_per_request`` the
CPU of both servers over the request phase per request
(``/proc/<pid>/stat``), which includes their idle ticks, so it is compared
between versions run alike, not read alone.

``--storm SECONDS`` (session 17) runs a trigger storm instead of the
rounds: ``--storm-lanes`` loops call TriggerJob of one job (``allow_overlap``)
back to back for that long, alternating the two servers (half the
triggers reach the job's holder directly, half through the other
server's wake puts). It prints ``triggers`` (and per second),
``handout_claims``: the hand-out claims both servers ran meanwhile (calls
of the round's ready-tenant probe in ``pg_stat_statements``: one per
claim of a round with workers' credit, whatever version runs; null where
the extension is not loaded), per second and per trigger; ``cpu_ms_per_trigger`` (both servers' CPU, idle ticks
and sweeps included) and the triggered runs' ``wait`` (one job: all
``local`` when ``s2`` holds its partition, all ``remote`` otherwise).
With ``--storm-hold S`` the workers (5 000 slots each) hold every run
until S seconds after the storm, so no result and no credit grant runs a
round during it: the claims counted are those of the rounds the ready
wakes (and the 1 s sweeps) ran.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
import psycopg
from google.protobuf import field_mask_pb2

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h  # noqa: E402
from tests.support.server import TICKWHEEL, start_server_process  # noqa: E402
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc  # noqa: E402

SERVERS = ("s1", "s2")


def once(name: str, at: datetime) -> job_pb2.Job:
    job = job_pb2.Job(name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=h.HANDLER)), payload=b"{}")
    job.schedule.once_at.FromDatetime(at)
    return job


async def api_key(server) -> tuple[str, str]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        created = await admin.CreateTenant(
            admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(
                name="wake", quotas=admin_pb2.TenantQuotas(requests_per_second=100_000))), metadata=h.admin_metadata(server)
        )
        issued = await admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=["wake"], handlers=[h.HANDLER]),
            metadata=h.admin_metadata(server),
        )
    return created.api_key.secret, issued.credential.secret


async def wait_shared(server, workers: int) -> dict[str, int]:
    """Until both servers are in ClusterStatus, every partition is owned and ``workers`` streams are connected."""
    deadline = time.monotonic() + h.READY_TIMEOUT
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        while True:
            status = await admin.ClusterStatus(admin_pb2.ClusterStatusRequest(), metadata=h.admin_metadata(server))
            owned = {s.server_id: s.partitions_owned for s in status.servers}
            if (set(owned) >= set(SERVERS) and sum(owned.values()) >= status.partition_count
                    and sum(s.workers for s in status.servers) >= workers):  # fmt: skip
                return owned
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not ready: {status}")
            await asyncio.sleep(0.1)  # another process's state; nothing to await


async def drive(server, key: str, rounds: int, batch: int, pause: float, rng: random.Random) -> dict[str, list[str]]:
    """The request phase; entry point -> job ids (trigger: execution ids)."""
    meta = (("authorization", f"Bearer {key}"),)
    made: dict[str, list[str]] = {"create": [], "create_past": [], "update": [], "trigger": [], "batch": []}
    async with grpc.aio.insecure_channel(server.address) as channel:
        api = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        later = datetime.now(timezone.utc) + timedelta(hours=1)
        ahead = await api.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
            scheduler_pb2.CreateJobRequest(job=once(f"ahead-{i}", later), request_id=f"ahead-{i}") for i in range(rounds)
        ]), metadata=meta)  # fmt: skip
        ahead_jobs = [result.job.job for result in ahead.results]

        async def nap() -> None:
            await asyncio.sleep(rng.uniform(0, pause))

        for r in range(rounds):
            await nap()
            reply = await api.CreateJob(scheduler_pb2.CreateJobRequest(
                job=once(f"now-{r}", datetime.now(timezone.utc)), request_id=f"now-{r}"), metadata=meta)
            made["create"].append(reply.job.id)
            await nap()
            reply = await api.CreateJob(scheduler_pb2.CreateJobRequest(
                job=once(f"past-{r}", datetime.now(timezone.utc) - timedelta(seconds=10)), request_id=f"past-{r}"),
                metadata=meta)
            made["create_past"].append(reply.job.id)
            await nap()
            job = ahead_jobs[r]
            moved = job_pb2.Job(id=job.id, version=job.version)
            moved.schedule.once_at.FromDatetime(datetime.now(timezone.utc))
            updated = await api.UpdateJob(scheduler_pb2.UpdateJobRequest(
                job=moved, update_mask=field_mask_pb2.FieldMask(paths=["schedule"])), metadata=meta)
            made["update"].append(updated.job.id)
            await nap()
            triggered = await api.TriggerJob(scheduler_pb2.TriggerJobRequest(
                id=job.id, request_id=f"trigger-{r}", allow_overlap=True), metadata=meta)
            made["trigger"].append(triggered.execution.id)
            if r % 10 == 9:
                await nap()
                replies = await api.BatchCreateJobs(scheduler_pb2.BatchCreateJobsRequest(items=[
                    scheduler_pb2.CreateJobRequest(job=once(f"batch-{r}-{i}", datetime.now(timezone.utc)),
                                                   request_id=f"batch-{r}-{i}") for i in range(batch)
                ]), metadata=meta)  # fmt: skip
                made["batch"].extend(result.job.job.id for result in replies.results)
    return made


async def storm(servers, key: str, seconds: float, lanes: int) -> list[str]:
    """The storm phase: ``lanes`` loops trigger one job back to back for
    ``seconds``, alternating the servers; the executions' ids."""
    meta = (("authorization", f"Bearer {key}"),)
    loop = asyncio.get_running_loop()
    made: list[str] = []
    channels = [grpc.aio.insecure_channel(server.address) for server in servers]
    try:
        apis = [scheduler_pb2_grpc.SchedulerServiceStub(channel) for channel in channels]
        later = datetime.now(timezone.utc) + timedelta(hours=1)
        created = await apis[1].CreateJob(scheduler_pb2.CreateJobRequest(job=once("storm", later), request_id="storm"),
                                          metadata=meta)
        stop_at = loop.time() + seconds

        async def lane(index: int) -> None:
            api, n = apis[index % len(apis)], 0
            while loop.time() < stop_at:
                reply = await api.TriggerJob(scheduler_pb2.TriggerJobRequest(
                    id=created.job.id, request_id=f"storm-{index}-{n}", allow_overlap=True), metadata=meta)
                made.append(reply.execution.id)
                n += 1

        await asyncio.gather(*(lane(index) for index in range(lanes)))
    finally:
        for channel in channels:
            await channel.close()
    return made


READY_PROBE = ("SELECT t.name, t.weight, t.max_concurrency, (SELECT e.ready_at FROM executions AS e "
               "WHERE e.tenant = t.name%")
"""The start of the hand-out round's ready-tenant probe (store/handout.py), one call per claim."""


def handout_claims(url: str) -> int:
    with h.observe(url) as pg:
        return int(pg.execute(h.OWN_QUERY + " SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                              "WHERE query LIKE %s", (READY_PROBE,)).fetchone()[0])


def storm_phase(url: str, servers, key: str, owners: dict[int, str], args) -> dict:
    """Run :func:`storm` and measure it (see the module docstring)."""
    pids = [s.process.pid for s in servers]
    counted = h.Statements(url).available  # creates the extension where the server has it loaded
    claims_before = handout_claims(url) if counted else 0
    cpu_before = sum(h.tree_cpu_s(pid) for pid in pids)
    load_before = h.load_average()
    began = time.monotonic()
    made = asyncio.run(storm(servers, key, args.storm, args.storm_lanes))
    wall = time.monotonic() - began
    cpu = sum(h.tree_cpu_s(pid) for pid in pids) - cpu_before
    claims = handout_claims(url) - claims_before if counted else None
    triggers = len(made)
    return {
        "storm_s": round(wall, 2), "lanes": args.storm_lanes, "triggers": triggers,
        "triggers_per_s": round(triggers / wall, 1), "handout_claims": claims,
        "handout_claims_per_s": None if claims is None else round(claims / wall, 1),
        "handout_claims_per_trigger": None if claims is None else round(claims / max(triggers, 1), 3),
        "cpu_ms_per_trigger": round(cpu * 1000 / max(triggers, 1), 3), "cpu_cores": round(cpu / wall, 2),
        "wait": waits(url, {"trigger": made}, owners, triggers),
        "loadavg_before": load_before, "loadavg_after": h.load_average(),
    }


WAITS = (
    f"SELECT e.id, e.job_id, e.partition, e.origin, e.due_at, e.created_at, j.created_at, j.updated_at, "
    f"a.worker_started_at FROM executions AS e JOIN jobs AS j ON j.id = e.job_id "
    f"JOIN {h.ATTEMPTS} AS a ON a.execution_id = e.id AND a.attempt = 1 AND a.delivery = 1"
)


def waits(url: str, made: dict[str, list[str]], owners: dict[int, str], expected: int) -> dict:
    deadline = time.monotonic() + 120
    with h.observe(url) as pg:
        while True:
            rows = pg.execute(f"{h.OWN_QUERY} {WAITS}").fetchall()
            if len(rows) >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # the workers' progress, in another process
    by_job = {row[1]: row for row in rows if row[3] == "scheduled"}
    by_execution = {row[0]: row for row in rows}
    out: dict = {}
    for point, ids in made.items():
        series: dict[str, list[float]] = {"local": [], "remote": []}
        missing = 0
        for key in ids:
            row = by_execution.get(key) if point == "trigger" else by_job.get(key)
            if row is None:
                missing += 1
                continue
            _id, _job, partition, _origin, due, e_created, j_created, j_updated, started = row
            written = {"trigger": e_created, "update": j_updated}.get(point, j_created)
            side = "local" if owners.get(partition) == "s2" else "remote"
            series[side].append((started - max(due, written)) / 1000)
        out[point] = {side: summary(values) for side, values in series.items()}
        if missing:
            out[point]["not_started"] = missing
    return out


def summary(values: list[float]) -> dict:
    """n, p50, p99 and max of ``values`` (ms); None for each figure of an
    empty group (JSON has no NaN)."""
    values = sorted(values)
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"n": len(values), "p50_ms": round(h.percentile(values, 0.5), 1),
            "p99_ms": round(h.percentile(values, 0.99), 1), "max_ms": round(values[-1], 1)}


def start_worker(folder: Path, address: str, credential: str, worker_id: str, hold: float = 0.0) -> subprocess.Popen:
    """A worker of ``echo``, 200 slots; with ``hold`` > 0, 5 000 slots of an
    ``echo`` that waits that long first (:func:`_harness.register_held_echo`)."""
    log = (folder / f"{worker_id}.log").open("w")
    handlers, slots, env = h.BUILTINS, 200, os.environ
    if hold > 0:
        handlers, slots = "_harness:register_held_echo", 5000
        env = {**os.environ, h.HOLD_ENV: str(hold),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [TICKWHEEL, "worker", "--address", address, "--handlers", handlers, "--no-http", "--slots", str(slots),
         "--worker-id", worker_id, "--grace", str(5 + hold), "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
        env={**env, "TICKWHEEL_WORKER_CREDENTIAL": credential},
    )


def rounds_phase(url: str, endpoint: str, servers, key: str, owned: dict[str, int], owners: dict[int, str], args) -> dict:
    """The request phase of ``--rounds`` and its measures (see the module docstring)."""
    pids = [s.process.pid for s in servers]
    etcd_before = h.etcd_counters(endpoint)
    cpu_before = sum(h.tree_cpu_s(pid) for pid in pids)
    load_before = h.load_average()
    began = time.monotonic()
    made = asyncio.run(drive(servers[1], key, args.rounds, args.batch, args.pause, random.Random(args.seed)))
    wall = time.monotonic() - began
    cpu = sum(h.tree_cpu_s(pid) for pid in pids) - cpu_before
    etcd_after = h.etcd_counters(endpoint)
    requests = 4 * args.rounds + args.rounds // 10 + 1
    jobs = sum(len(ids) for ids in made.values()) + args.rounds
    puts = etcd_after.get("grpc_server_started_total:Put", 0) - etcd_before.get("grpc_server_started_total:Put", 0)
    expected = sum(len(ids) for ids in made.values())
    return {
        "rounds": args.rounds, "batch": args.batch, "pause_s": args.pause, "partitions_owned": owned,
        "wait": waits(url, made, owners, expected),
        "etcd_puts": puts, "etcd_puts_per_request": round(puts / requests, 3),
        "etcd_puts_per_job": round(puts / jobs, 4),
        "cpu_ms_per_request": round(cpu * 1000 / requests, 2), "request_phase_s": round(wall, 1),
        "loadavg_before": load_before, "loadavg_after": h.load_average(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--pause", type=float, default=0.3, help="longest random pause before each request (s)")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--pg")
    parser.add_argument("--etcd")
    parser.add_argument("--logs")
    parser.add_argument("--storm", type=float, default=0.0, help="seconds of a trigger storm instead of the rounds")
    parser.add_argument("--storm-lanes", type=int, default=4)
    parser.add_argument("--storm-hold", type=float, default=0.0,
                        help="> 0: the workers hold each run for the storm and this many seconds more")
    args = parser.parse_args()
    with h.postgres(args.pg) as url, h.etcd(args.etcd) as endpoint, h.workdir(args.logs, "tickwheel-wake-") as folder:
        servers, workers = [], []
        try:
            for name in SERVERS:
                servers.append(start_server_process(folder, "--store", url, "--etcd", endpoint, "--migrate",
                                                    "--server-id", name))
            s1, s2 = servers
            key, credential = asyncio.run(api_key(s2))
            hold = args.storm + args.storm_hold if args.storm > 0 and args.storm_hold > 0 else 0.0
            workers = [start_worker(folder, s.address, credential, f"wake-w{i}", hold) for i, s in enumerate(servers)]
            owned = asyncio.run(wait_shared(s2, len(workers)))
            h.wait_started(url, s1)
            time.sleep(2)
            with psycopg.connect(h.conninfo(url)) as pg:
                owners = dict(pg.execute("SELECT partition, owner FROM partitions").fetchall())
            if args.storm > 0:
                result = {"partitions_owned": owned, **storm_phase(url, servers, key, owners, args)}
            else:
                result = rounds_phase(url, endpoint, servers, key, owned, owners, args)
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(10)
                except subprocess.TimeoutExpired:
                    worker.kill()
            for server in servers:
                try:
                    server.terminate(20)
                except subprocess.TimeoutExpired:
                    server.kill()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
