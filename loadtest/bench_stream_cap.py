"""Benchmark: what one connection's streams make a server hold, under the
port's transport options (``tickwheel_server.transport.LIMITS``): a raw
HTTP/2 client (which ignores the announced limit) opens ``--streams``
Health.Watch calls on one connection, each of which stays open; counted
are the streams served (a servicer task each) and reset, and the growth
of the server process's resident memory (the client's buffers are a few
bytes a stream; both run in this process, so the figure is an upper
bound of the server's share).

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_stream_cap.py [--streams 10000] [--smoke]

Prints one JSON object. Run it with another tree's ``PYTHONPATH`` to
compare trees (each uses that tree's ``transport.LIMITS``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from tickwheel_server import transport

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support import http2  # noqa: E402  (the raw client the transport tests use)

WATCH = "/grpc.health.v1.Health/Watch"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _run(count: int) -> dict:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0), *transport.LIMITS])
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    before = _rss_bytes()
    reader, writer = await http2.connect("127.0.0.1", port)
    authority = f"127.0.0.1:{port}"
    streams = [2 * n + 1 for n in range(count)]
    for start in range(0, count, 500):
        writer.write(b"".join(http2.unary_request(s, authority, WATCH) for s in streams[start : start + 500]))
        await writer.drain()
    served: set[int] = set()
    reset: set[int] = set()
    while len(served) + len(reset) < count:
        frame = await asyncio.wait_for(http2.next_frame(reader), 120)
        if frame is None:
            break
        if frame.kind == http2.HEADERS:
            served.add(frame.stream)
        elif frame.kind == http2.RST_STREAM:
            reset.add(frame.stream)
    grown = _rss_bytes() - before
    writer.close()
    await server.stop(0)
    return {"streams": count, "served": len(served), "reset": len(reset), "rss_growth_bytes": grown,
            "max_concurrent_streams": dict(transport.LIMITS).get("grpc.max_concurrent_streams")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: only that it runs")
    args = parser.parse_args()
    report = {"benchmark": "stream_cap", "smoke": args.smoke, **asyncio.run(_run(200 if args.smoke else args.streams))}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
