"""What etcd's history costs in its database, and what a compaction gives back
(hardening of the wake-ups, issue 17): on a throwaway single-node etcd,
``--puts`` wake-like puts (``/tickwheel/wakes/<server>`` keys of 16 servers,
values as the wake-ups write them) through the lease store, then the
database's size (Maintenance Status) with the whole history kept and after
compacting to the latest revision, each after a defragmentation (which
packs the file). Prints one JSON object.

    PYTHONPATH=.:server:workers:sdk/python .venv/bin/python loadtest/bench_etcd_history.py --puts 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from pyetcd.etcdrpc import rpc_pb2

from tests.support.etcd import EtcdServer, _find_etcd
from tickwheel.shared.clock import SystemClock
from tickwheel_server.lease import open_lease_store


async def status(store) -> dict[str, int]:
    reply = await store._transport.call(lambda s: s.maintenance.Status, rpc_pb2.StatusRequest(), "status")
    return {"db_size": reply.dbSize, "revision": reply.header.revision}


async def defragment(store) -> dict[str, int]:
    await store._transport.call(lambda s: s.maintenance.Defragment, rpc_pb2.DefragmentRequest(), "defragment")
    return await status(store)


async def main(puts: int, servers: int, concurrency: int) -> dict[str, object]:
    binary = _find_etcd()
    if binary is None:
        raise SystemExit("no etcd binary (set TICKWHEEL_ETCD_BIN)")
    with tempfile.TemporaryDirectory() as tmp:
        etcd = EtcdServer(binary, Path(tmp))
        etcd.start()
        store = open_lease_store(etcd.endpoint, SystemClock())
        try:
            empty = await status(store)
            started, cpu = time.perf_counter(), time.process_time()
            for first in range(0, puts, concurrency):
                await asyncio.gather(*(
                    store.put(f"/tickwheel/wakes/server-{i % servers:02d}",
                              f"server-{(i + 1) % servers:02d} claim ready")
                    for i in range(first, min(puts, first + concurrency))
                ))  # fmt: skip
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            grown = await defragment(store)  # the whole history kept, the file packed
            await store._transport.call(  # what store.compact asks, waiting until it is done
                lambda s: s.kv.Compact, rpc_pb2.CompactionRequest(revision=grown["revision"], physical=True), "compact"
            )
            compacted = await defragment(store)
        finally:
            await store.close()
            etcd.stop()
    history = grown["db_size"] - compacted["db_size"]
    return {
        "bench": "etcd_history", "puts": puts, "servers": servers, "concurrency": concurrency,
        "puts_per_second": round(puts / seconds), "client_cpu_us_per_put": round(cpu / puts * 1e6, 1),
        "empty": empty, "after_puts_defragmented": grown, "after_compaction_defragmented": compacted,
        "history_bytes_per_revision": round(history / puts, 1),
    }  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--puts", type=int, default=100_000)
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.puts, args.servers, args.concurrency))))
