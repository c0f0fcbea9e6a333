"""Comparison: the limits a hostile HTTP client meets on the console's
endpoint (``web/http.py``) and on aiohttp's server, probed the same way in
the same run.

    .venv/bin/python loadtest/http_limits.py [--smoke]

Prints one JSON object, a result per probe and stack. aiohttp is the
``bench`` extra (``scripts/install.sh --bench``); without it its column
says why it was skipped. Each stack serves ``/`` (a short page) and
``/big`` (64 MiB, more than the sockets buffer) and gets the same settings where it has one: a 5 s idle
and keep-alive timeout, its own head limits (aiohttp's default per line
and header count). The probes:

- ``slow_head``: a request head sent one header line every 2 s (slowloris):
  seconds until the server closes, or ``null`` if still open after 30 s;
- ``head_800k``: one head of 100 header lines of 8 000 bytes: the status;
- ``connections_600``: 600 idle connections at once, then a request on the
  last: the status (no limit: 200);
- ``get_with_body``: a GET with ``Content-Length: 5``: the status;
- ``slow_reader``: a client that asks for ``/big`` and reads nothing for
  35 s: whether the server dropped it (``dropped``) or still holds the
  response for it (``held``).

``--smoke`` shortens the waits so CI keeps the script working; its figures
mean nothing. docs/architecture.md ("The console's HTTP endpoint") reads
these results.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from tickwheel_server.web.http import HttpServer  # noqa: E402
from tickwheel_server.web.router import Response, Router  # noqa: E402

BIG = b"x" * (64 << 20)


@contextlib.asynccontextmanager
async def ours(idle: float) -> AsyncIterator[int]:
    router = Router()

    async def page(request):
        return Response(200, b"hi", "text/plain")

    async def big(request):
        return Response(200, BIG, "application/octet-stream")

    router.get("/", page)
    router.get("/big", big)
    server = HttpServer(router, "127.0.0.1:0", idle_timeout=idle, write_timeout=idle)
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop(0.5)


@contextlib.asynccontextmanager
async def aiohttp_server(idle: float) -> AsyncIterator[int]:
    from aiohttp import web

    async def page(request):
        return web.Response(text="hi")

    async def big(request):
        return web.Response(body=BIG)

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/big", big)
    runner = web.AppRunner(app, keepalive_timeout=idle)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]
    finally:
        await runner.cleanup()


async def _status(reader: asyncio.StreamReader) -> int | None:
    try:
        line = await asyncio.wait_for(reader.readline(), 10)
    except (asyncio.TimeoutError, ConnectionError):
        return None
    parts = line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


async def slow_head(port: int, limit: float) -> float | None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    started = time.monotonic()
    try:
        while time.monotonic() - started < limit:
            await asyncio.sleep(min(2.0, limit / 5))
            if reader.at_eof():
                return round(time.monotonic() - started, 1)
            writer.write(b"X-Slow: a\r\n")
            await writer.drain()
        return None
    except ConnectionError:
        return round(time.monotonic() - started, 1)
    finally:
        writer.close()


async def head_800k(port: int) -> int | None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 8000) for i in range(100))
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n")
        await writer.drain()
    except ConnectionError:
        pass
    status = await _status(reader)
    writer.close()
    return status


async def connections(port: int, count: int) -> int | None:
    opened = []
    try:
        for _ in range(count):
            opened.append(await asyncio.open_connection("127.0.0.1", port))
        reader, writer = opened[-1]
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        return await _status(reader)
    except ConnectionError:
        return None
    finally:
        for _, writer in opened:
            writer.close()
        for _, writer in opened:
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        await asyncio.sleep(1.0)  # the server sees them go before the next probe


async def get_with_body(port: int) -> int | None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    await writer.drain()
    status = await _status(reader)
    writer.close()
    return status


async def slow_reader(port: int, wait: float) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
    writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(wait)
    got = 0
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(1 << 20), 5)
            if not chunk:
                break
            got += len(chunk)
    except (asyncio.TimeoutError, ConnectionError):
        pass
    writer.close()
    return "held" if got >= len(BIG) else "dropped"


async def probe(stack: Callable, smoke: bool) -> dict:
    idle = 1.0 if smoke else 5.0
    async with stack(idle) as port:
        return {
            "slow_head_closed_after_s": await slow_head(port, 6.0 if smoke else 30.0),
            "head_800k_status": await head_800k(port),
            "connections_600_status": await connections(port, 60 if smoke else 600),
            "get_with_body_status": await get_with_body(port),
            "slow_reader": await slow_reader(port, 3.0 if smoke else 35.0),
        }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="short waits, for CI")
    args = parser.parse_args(argv)
    report: dict = {"benchmark": "http_limits", "smoke": args.smoke, "tickwheel": await probe(ours, args.smoke)}
    try:
        import aiohttp
    except ImportError:
        report["aiohttp"] = {"skipped": "aiohttp is not installed (bash scripts/install.sh --bench)"}
    else:
        report["aiohttp"] = {"version": aiohttp.__version__, **(await probe(aiohttp_server, args.smoke))}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
