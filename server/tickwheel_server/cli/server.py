"""`tickwheel server`: parse the server's flags, configure logs and the
collector, run a :class:`~tickwheel_server.app.TickwheelServer` until SIGTERM
or SIGINT, then stop it gracefully."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from tickwheel.shared import logs
from tickwheel.shared.heap import tune_collector

from ..app import StartupError, TickwheelServer
from ..config import ConfigError, add_server_arguments, command_line_secrets, load_server_config

log = logging.getLogger("tickwheel.server")


async def serve_until_signalled(server: TickwheelServer) -> None:
    """Start, then stop gracefully on SIGTERM or SIGINT. A signal while the
    start still waits for the store or etcd ends the start: nothing runs yet."""
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_requested.set)
    starting = asyncio.create_task(server.start(), name="tickwheel-start")
    stopping = asyncio.create_task(stop_requested.wait(), name="tickwheel-stop-requested")
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        log.info("stopping before the start completed")
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        return
    starting.result()  # a StartupError ends the process with its message
    await stopping
    await server.stop()


def build_parser() -> argparse.ArgumentParser:
    """The flags of ``tickwheel server`` (also read by ``tickwheel completion``)."""
    parser = argparse.ArgumentParser(prog="tickwheel server", description="Run a Tickwheel server.")
    add_server_arguments(parser)
    return parser


def server_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_server_config(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    logs.configure(config.log_level, config.log_format)
    for warning in command_line_secrets(args):
        log.warning(warning)
    tune_collector()
    try:
        asyncio.run(serve_until_signalled(TickwheelServer(config)))
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
