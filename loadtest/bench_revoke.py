"""Benchmark: how soon an API key revoked through one server is refused by
another, and what telling the others costs (hardening, branch ``revoke``).

    .venv/bin/python loadtest/bench_revoke.py [--probed 20] [--keys 200] [--idle 10]
                                              [--pg URL] [--etcd HOST:PORT] [--logs DIR] [--smoke]

Prints one JSON object. Without ``--pg``/``--etcd`` a throwaway PostgreSQL
and etcd are started (``tests/support``) and deleted afterwards.

Two ``tickwheel server`` processes (``s1``, ``s2``) on one PostgreSQL and
one etcd, no worker. One tenant (request rate lifted) gets ``--probed`` +
``--keys`` API keys through ``s1``; each is used once on ``s2`` (so ``s2``
has it cached). Then:

- ``idle``: nothing for ``--idle`` seconds: the CPU of each server as a
  fraction of one core (``/proc/<pid>/stat``), and etcd's calls.
- ``refusal``: ``--probed`` keys, one at a time: a call on ``s2`` with the
  key (cached there from now), revoke through ``s1``, then call ``s2``
  with the key every 5 ms until it is refused;
  ``refused_ms`` is from the revoke's answer to the first refused call's
  answer (p50, max). Before the change this is up to the cache time (5 s).
- ``cost``: ``--keys`` keys revoked back to back through ``s1`` (one call
  at a time), no probe: etcd's Put calls (its ``/metrics``) and both
  servers' CPU over the phase per revocation (their idle ticks included:
  compare versions run alike, not alone).

The script only speaks gRPC, so it measures any version of the server:
run it with ``PYTHONPATH`` naming another tree's ``server`` directory to
measure that one (the servers are child processes inheriting it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h  # noqa: E402
from tests.support.server import start_server_process  # noqa: E402
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc  # noqa: E402

SERVERS = ("s1", "s2")
TENANT = "revoke"
PROBE_EVERY = 0.005


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def issue_keys(server, count: int) -> list[str]:
    """The tenant (its first key) and ``count - 1`` more keys, through ``server``."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        meta = h.admin_metadata(server)
        created = await admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(
            name=TENANT, quotas=admin_pb2.TenantQuotas(requests_per_second=100_000))), metadata=meta)
        keys = [created.api_key.secret]
        for _ in range(count - 1):
            issued = await admin.IssueApiKey(admin_pb2.IssueApiKeyRequest(tenant=TENANT), metadata=meta)
            keys.append(issued.api_key.secret)
    return keys


async def works(api: scheduler_pb2_grpc.SchedulerServiceStub, key: str) -> bool:
    try:
        await api.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1), metadata=bearer(key))
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.UNAUTHENTICATED:
            raise
        return False
    return True


async def phases(s1, s2, keys: list[str], probed: int) -> dict:
    async with grpc.aio.insecure_channel(s1.address) as c1, grpc.aio.insecure_channel(s2.address) as c2:
        admin, api = admin_pb2_grpc.AdminServiceStub(c1), scheduler_pb2_grpc.SchedulerServiceStub(c2)
        for key in keys:
            assert await works(api, key), "a fresh key works on s2"
        refused_ms = []
        for key in keys[:probed]:
            assert await works(api, key), "cached on s2 for the whole cache time from now"
            await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=key.split("_")[1]), metadata=h.admin_metadata(s1))
            answered = time.monotonic()
            while await works(api, key):
                await asyncio.sleep(PROBE_EVERY)
            refused_ms.append((time.monotonic() - answered) * 1000)
        return {"refused_ms": refused_ms, "rest": keys[probed:]}


async def revoke_all(s1, keys: list[str]) -> None:
    async with grpc.aio.insecure_channel(s1.address) as c1:
        admin = admin_pb2_grpc.AdminServiceStub(c1)
        for key in keys:
            await admin.RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=key.split("_")[1]), metadata=h.admin_metadata(s1))


def cpu(pids: list[int]) -> list[float]:
    return [h.tree_cpu_s(pid) for pid in pids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probed", type=int, default=20)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle window")
    parser.add_argument("--pg")
    parser.add_argument("--etcd")
    parser.add_argument("--logs")
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args()
    if args.smoke:
        args.probed, args.keys, args.idle = 2, 3, 0.5
    with h.postgres(args.pg) as url, h.etcd(args.etcd) as endpoint, h.workdir(args.logs, "tickwheel-revoke-") as folder:
        servers = []
        try:
            for name in SERVERS:
                servers.append(start_server_process(folder, "--store", url, "--etcd", endpoint, "--migrate",
                                                    "--server-id", name))
            s1, s2 = servers
            h.wait_started(url, s1)
            keys = asyncio.run(issue_keys(s1, args.probed + args.keys))
            pids = [s.process.pid for s in servers]
            time.sleep(2)  # start-up work (tzdata fingerprints) out of the idle window

            load_idle = h.load_average()
            etcd_idle_before, cpu_before, began = h.etcd_counters(endpoint), cpu(pids), time.monotonic()
            time.sleep(args.idle)
            idle_s = time.monotonic() - began
            idle_cpu = [(after - before) / idle_s for before, after in zip(cpu_before, cpu(pids))]
            etcd_idle = h.etcd_counters(endpoint)

            probed = asyncio.run(phases(s1, s2, keys, args.probed))
            refused = sorted(probed["refused_ms"])

            load_cost = h.load_average()
            etcd_before, cpu_before, began = h.etcd_counters(endpoint), cpu(pids), time.monotonic()
            asyncio.run(revoke_all(s1, probed["rest"]))
            cost_s = time.monotonic() - began
            cpu_after, etcd_after = cpu(pids), h.etcd_counters(endpoint)
        finally:
            for server in servers:
                server.terminate()

    def puts(before: dict, after: dict) -> float:
        key = "grpc_server_started_total:Put"
        return after.get(key, 0.0) - before.get(key, 0.0)

    count = max(1, len(probed["rest"]))
    print(json.dumps({
        "probed": args.probed, "keys": args.keys, "load_idle": load_idle, "load_cost": load_cost,
        "idle": {
            "seconds": round(idle_s, 1),
            "server_cpu_cores": [round(c, 4) for c in idle_cpu],
            "etcd_puts": puts(etcd_idle_before, etcd_idle),
        },
        "refusal": {
            "n": len(refused),
            "p50_ms": round(h.percentile(refused, 0.5), 1) if refused else None,
            "max_ms": round(refused[-1], 1) if refused else None,
        },
        "cost": {
            "seconds": round(cost_s, 2),
            "etcd_puts_per_revocation": round(puts(etcd_before, etcd_after) / count, 3),
            "server_cpu_ms_per_revocation": [
                round((after - before) * 1000 / count, 3) for before, after in zip(cpu_before, cpu_after)
            ],
            "revocations_per_s": round(count / cost_s, 1),
        },
    }))


if __name__ == "__main__":
    main()
