"""``tickwheel worker``: run a worker process until SIGTERM or SIGINT.

    tickwheel worker --address HOST:PORT --credential-file FILE
                     [--dev DIR] [--handlers module:object ...] [--slots N] [--no-http]
                     [--allow-target-network CIDR ...]
                     [--tls | --tls-ca FILE] [--tls-cert FILE --tls-key FILE]

The worker credential comes from ``--credential-file FILE`` (the file
holds it alone), ``TICKWHEEL_WORKER_CREDENTIAL`` or ``--dev DIR``, in that
order. ``--credential CRED`` still works but is visible to every local user
in ``ps``: the worker warns when it is used.

``--dev DIR`` reads ``address`` and ``worker_credential`` from
``DIR/dev-credentials.json`` (explicit ``--address`` and credentials win)
and, like ``tickwheel dev``'s built-in worker, lets HTTP targets reach
loopback.

HTTP targets are called only at addresses the target address policy allows
(``tickwheel.shared.targets``): loopback, link-local, private, unspecified
and reserved addresses are refused, after DNS resolution, unless a network
holding them is allowed with ``--allow-target-network CIDR`` (repeatable) or
``TICKWHEEL_ALLOW_TARGET_NETWORKS`` (CIDRs separated by commas or spaces).
The worker enforces its own list, since it makes the call; the server's
list decides only which target URLs may be written.

TLS: ``--tls`` trusts the system's roots, ``--tls-ca FILE`` a PEM CA bundle;
``--tls-cert FILE --tls-key FILE`` present a client certificate to a server
that requires mutual TLS.

``--handlers module:object`` (repeatable, several per flag allowed) imports
``module`` (the current directory is on the import path) and takes
``object`` (a dotted attribute path), which is one of:

* a :class:`~tickwheel_worker.handlers.HandlerRegistry` - its handlers are added;
* a :class:`~tickwheel_worker.runtime.Worker` - its handlers are added (its
  connection settings are ignored);
* a callable taking one ``HandlerRegistry`` - called to register handlers
  into it (``tickwheel_worker.handlers:register_builtins`` adds ``echo``).

The first SIGTERM or SIGINT stops gracefully (no new work, in-flight
attempts get ``--grace`` seconds to finish and be acknowledged); a second one
stops at once. Exit status: 0 after a stop, 1 when the server refuses the
worker, 2 for bad input. Diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tickwheel_worker.config import WorkerConfig
from tickwheel_worker.exporters import PROTOCOLS, TRACE_EXPORT_HELP, Otlp, tracer_provider
from tickwheel_worker.handlers import HandlerRegistry
from tickwheel_worker.runtime import Worker, WorkerFatalError

from tickwheel.shared.heap import tune_collector
from tickwheel.shared.logs import LOG_FORMATS, configure as configure_logs
from tickwheel.shared.secretargs import flag_warning, read_secret_file
from tickwheel.shared.smallfiles import read_small
from tickwheel.shared.targets import LOOPBACK_NETWORKS, TargetPolicy

log = logging.getLogger("tickwheel_worker")

ALLOW_ENV = "TICKWHEEL_ALLOW_TARGET_NETWORKS"


class UsageError(Exception):
    """Bad command-line input (exit status 2)."""


def build_parser(prog: str = "tickwheel worker") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a Tickwheel worker: HTTP targets and named handlers.",
    )
    parser.add_argument("--address", help="server HOST:PORT (or TICKWHEEL_ADDRESS)")
    parser.add_argument(
        "--credential-file", metavar="FILE",
        help="file holding the worker credential (or TICKWHEEL_WORKER_CREDENTIAL)",
    )
    parser.add_argument(
        "--credential", metavar="CRED",
        help="the worker credential itself: visible to local users in ps; prefer --credential-file",
    )
    parser.add_argument("--dev", metavar="DIR", help="read address and worker_credential from DIR/dev-credentials.json")
    parser.add_argument(
        "--handlers", metavar="MODULE:OBJECT", nargs="+", action="extend", default=[],
        help="a HandlerRegistry, a Worker, or a callable(registry) registering handlers",
    )
    parser.add_argument("--slots", type=int, default=4, help="executions run at once (default 4)")
    parser.add_argument("--no-http", dest="http", action="store_false", help="do not run HTTP targets")
    parser.add_argument("--worker-id", help="stable worker id (default hostname-pid-random)")
    parser.add_argument(
        "--allow-target-network", metavar="CIDR", action="append", default=[],
        help="let HTTP targets reach this network although the address policy refuses its range "
             "(loopback, private, link-local, ...); repeatable (or TICKWHEEL_ALLOW_TARGET_NETWORKS)",
    )  # fmt: skip
    parser.add_argument("--tls", action="store_true", help="use TLS with the system's root certificates")
    parser.add_argument("--tls-ca", metavar="FILE", help="use TLS, trusting this PEM CA bundle")
    parser.add_argument("--tls-cert", metavar="FILE", help="PEM client certificate for mutual TLS (with --tls-key)")
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds to finish in-flight work on stop (default 30)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text",
        help="text (default) or json: one JSON object per line, execution, job and tenant ids as fields",
    )
    parser.add_argument(
        "--trace-export", metavar="WHERE", default=os.environ.get("TICKWHEEL_TRACE_EXPORT") or "none",
        help=f"where the target calls' spans go (or TICKWHEEL_TRACE_EXPORT): {TRACE_EXPORT_HELP}",
    )
    parser.add_argument(
        "--otlp-endpoint", metavar="URL", default="",
        help="OTLP collector base URL, e.g. http://127.0.0.1:4318 (or OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    parser.add_argument(
        "--otlp-protocol", choices=PROTOCOLS, default="",
        help="OTLP over grpc or http/protobuf (or OTEL_EXPORTER_OTLP_PROTOCOL; default http/protobuf)",
    )
    return parser


def load_handlers(spec: str, registry: HandlerRegistry) -> None:
    """Import ``module:object`` and add its handlers to ``registry`` (see the module docstring)."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise UsageError(f"--handlers {spec!r}: expected module:object")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--handlers {spec!r}: cannot import {module_name}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--handlers {spec!r}: {module_name} has no attribute {attr_path}") from None
    try:
        if isinstance(obj, HandlerRegistry):
            registry.update(obj)
        elif isinstance(obj, Worker):
            registry.update(obj.handlers)
        elif callable(obj):
            obj(registry)
        else:
            raise UsageError(
                f"--handlers {spec!r}: expected a HandlerRegistry, a Worker or a callable, got {type(obj).__name__}"
            )
    except ValueError as exc:
        raise UsageError(f"--handlers {spec!r}: {exc}") from exc


def _read_dev_credentials(folder: str) -> dict[str, Any]:
    path = Path(folder) / "dev-credentials.json"
    try:
        data = json.loads(read_small(path).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--dev {folder}: {path} not found (start `tickwheel dev --data {folder}` first)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"--dev {folder}: cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"--dev {folder}: {path} is not a JSON object")
    return data


def tracing_from_args(args: argparse.Namespace):
    """The tracer provider ``--trace-export`` asks for (None for ``none``); UsageError naming the flags."""
    try:
        return tracer_provider(args.trace_export, "tickwheel-worker", Otlp(args.otlp_endpoint, args.otlp_protocol))
    except ValueError as exc:
        raise UsageError(f"--trace-export/--otlp-endpoint/--otlp-protocol: {exc}") from None


def config_from_args(args: argparse.Namespace, tracer: Any = None) -> WorkerConfig:
    """The worker configuration the parsed arguments describe, its target
    calls traced by ``tracer`` when given. UsageError when it is incomplete."""
    dev = _read_dev_credentials(args.dev) if args.dev else {}
    address = args.address or os.environ.get("TICKWHEEL_ADDRESS") or dev.get("address")
    credential = args.credential
    if not credential and args.credential_file:
        try:
            credential = read_secret_file(args.credential_file, "--credential-file")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    credential = credential or os.environ.get("TICKWHEEL_WORKER_CREDENTIAL") or dev.get("worker_credential")
    if not address:
        raise UsageError("no server address: give --address, TICKWHEEL_ADDRESS or --dev DIR")
    if not credential:
        raise UsageError("no worker credential: give --credential-file FILE, TICKWHEEL_WORKER_CREDENTIAL or --dev DIR")
    registry = HandlerRegistry()
    for spec in args.handlers:
        load_handlers(spec, registry)
    if not args.http and len(registry) == 0:
        raise UsageError("--no-http without --handlers: the worker would have nothing to run")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert and --tls-key go together")
    tls_files = {"root_certificates": args.tls_ca, "certificate_chain": args.tls_cert, "private_key": args.tls_key}
    flags = {"root_certificates": "--tls-ca", "certificate_chain": "--tls-cert", "private_key": "--tls-key"}
    tls: dict[str, bytes] = {}
    for name, path in tls_files.items():
        if path:
            try:
                tls[name] = read_small(path)
            except OSError as exc:
                raise UsageError(f"{flags[name]}: cannot read {path}: {exc.strerror}") from None
    networks = [*args.allow_target_network, *os.environ.get(ALLOW_ENV, "").replace(",", " ").split()]
    if args.dev:
        networks += LOOPBACK_NETWORKS
    try:
        policy = TargetPolicy.allowing(networks, origin="--allow-target-network")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    extra: dict[str, Any] = {"worker_id": args.worker_id} if args.worker_id else {}
    if tracer is not None:
        extra["tracer"] = tracer
    try:
        return WorkerConfig(
            address=str(address),
            credential=str(credential),
            handlers=registry,
            http=args.http,
            slots=args.slots,
            tls=args.tls,
            address_policy=policy,
            **tls,
            **extra,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


async def _serve(worker: Worker, grace: float) -> int:
    loop = asyncio.get_running_loop()
    signals_seen = 0
    stopping: list[asyncio.Task[None]] = []

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        first = signals_seen == 1
        log.info("%s: %s", signal.Signals(signum).name, "stopping gracefully" if first else "stopping now")
        stopping.append(loop.create_task(worker.stop(grace if first else 0.0)))

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await worker.run()
        await asyncio.gather(*stopping)
    except WorkerFatalError:
        return 1  # the worker logged why, at ERROR: once is enough
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return 0


def worker_main(argv: list[str], prog: str = "tickwheel worker") -> int:
    """Entry point of ``tickwheel worker``; returns the exit status."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad flags (2)
        return int(exc.code or 0)
    try:
        level = logging.getLevelName(args.log_level.upper())
        if not isinstance(level, int):
            raise UsageError(f"--log-level {args.log_level!r} is not a log level")
        provider = tracing_from_args(args)
        config = config_from_args(args, provider.get_tracer("tickwheel-worker") if provider is not None else None)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    configure_logs(level, args.log_format)  # nothing changes when logging is already set up
    if args.credential:
        log.warning(flag_warning("--credential", "--credential-file FILE", "TICKWHEEL_WORKER_CREDENTIAL"))
    worker = Worker(config)
    policy = config.address_policy
    log.info(
        "worker %s: %s%s, handlers [%s], http %s (target networks allowed beyond the policy: %s), %d slots",
        config.worker_id, config.address, " over TLS" if config.tls else "", ", ".join(config.handlers.names()),
        config.http, policy.describe() if isinstance(policy, TargetPolicy) else "custom policy", config.slots,
    )
    tune_collector()
    try:
        return asyncio.run(_serve(worker, args.grace))
    finally:
        if provider is not None:
            provider.shutdown()  # the spans still buffered are exported before the process exits


def main() -> None:
    """``tickwheel-worker``: the worker without the server's ``tickwheel`` command."""
    sys.exit(worker_main(sys.argv[1:], prog="tickwheel-worker"))


if __name__ == "__main__":
    main()
