"""An example worker serving the handler ``echo-python`` until SIGTERM.

    TICKWHEEL_ADDRESS=127.0.0.1:50051 TICKWHEEL_WORKER_CREDENTIAL=tww_... ./run
    ./run --dev .tickwheel          # beside `tickwheel dev --data .tickwheel`

``echo-python`` answers with its payload. A payload that is a JSON object
with an integer ``"sleep_ms"`` makes it wait that long first (stopping at
once when the execution is canceled); ``"fail": "retryable"`` or
``"permanent"`` then makes it fail that way. It prints one JSON line per
event on stdout (``started``, ``canceled``, ``finished``); logs go to
stderr. SIGTERM drains: no new work, in-flight handlers finish (30 s at
most), then the process exits 0. The same contract as the Go, Java and
TypeScript examples (``sdk/<lang>/examples/worker``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

from tickwheel_worker import JobContext, PermanentError, Worker, WorkerConfig

HANDLER = "echo-python"
DRAIN_SECONDS = 30.0
MAX_SLEEP_MS = 6 * 3600 * 1000  # a job runs six hours at most


def emit(event: str, ctx: JobContext, **fields: object) -> None:
    print(json.dumps({"event": event, "execution_id": ctx.execution_id, **fields}), flush=True)


def instructions(payload: bytes) -> tuple[int, str]:
    """The payload's ``sleep_ms`` and ``fail``, when it is a JSON object carrying them."""
    try:
        spec = json.loads(payload)
    except (UnicodeDecodeError, ValueError):
        return 0, ""
    if not isinstance(spec, dict):
        return 0, ""
    sleep_ms = spec.get("sleep_ms", 0)
    if not isinstance(sleep_ms, int) or isinstance(sleep_ms, bool):
        sleep_ms = 0
    fail = spec.get("fail", "")
    return max(0, min(sleep_ms, MAX_SLEEP_MS)), fail if fail in ("retryable", "permanent") else ""


async def echo(ctx: JobContext) -> bytes:
    emit("started", ctx, delivery=ctx.delivery, attempt=ctx.attempt)
    try:
        sleep_ms, fail = instructions(ctx.payload)
        if sleep_ms:
            try:
                await asyncio.wait_for(ctx.canceled.wait(), sleep_ms / 1000)
            except asyncio.TimeoutError:
                pass
            else:
                emit("canceled", ctx)
                raise RuntimeError(f"stopped: {ctx.cancel_reason}")  # the runtime reports CANCELED or TIMED_OUT
        if fail == "permanent":
            raise PermanentError("asked to fail")
        if fail == "retryable":
            raise RuntimeError("asked to fail")
        return ctx.payload
    finally:
        emit("finished", ctx)


def settings(argv: list[str]) -> tuple[str, str]:
    parser = argparse.ArgumentParser(description=f"serve the {HANDLER} handler")
    parser.add_argument("--dev", metavar="DIR", help="read the address and credential from DIR/dev-credentials.json")
    args = parser.parse_args(argv)
    if args.dev:
        try:
            saved = json.loads((Path(args.dev) / "dev-credentials.json").read_text())
        except (OSError, ValueError) as error:
            sys.exit(f"error: cannot read {args.dev}/dev-credentials.json: {error}")
        return str(saved.get("address", "")), str(saved.get("worker_credential", ""))
    return os.environ.get("TICKWHEEL_ADDRESS", ""), os.environ.get("TICKWHEEL_WORKER_CREDENTIAL", "")


def target(address: str) -> str:
    """A comma-separated list of IPv4 ``host:port`` becomes one gRPC target
    (pick-first: the next address when the one in use fails)."""
    return f"ipv4:{address}" if "," in address else address


async def main(argv: list[str]) -> int:
    address, credential = settings(argv)
    if not address or not credential:
        print("error: set TICKWHEEL_ADDRESS and TICKWHEEL_WORKER_CREDENTIAL, or pass --dev DIR", file=sys.stderr)
        return 2
    slots = int(os.environ.get("TICKWHEEL_SLOTS", "4"))
    worker = Worker(WorkerConfig(address=target(address), credential=credential, http=False, slots=slots))
    worker.handler(HANDLER)(echo)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: stopping or stopping.append(loop.create_task(worker.stop(DRAIN_SECONDS))))
    logging.getLogger(__name__).info("serving %s on %s", HANDLER, address)
    await worker.run()
    if stopping:
        await stopping[0]
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    sys.exit(asyncio.run(main(sys.argv[1:])))
