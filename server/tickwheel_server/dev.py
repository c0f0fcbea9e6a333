"""`tickwheel dev`: the whole system on one laptop, no services.

The same server code on embedded SQLite and the in-process lease store, plus
a built-in worker (HTTP targets and the ``echo`` handler). Unlike
``tickwheel server``, both the server (when jobs are written) and the worker
(when targets are called) allow HTTP targets on loopback, so a target on the
laptop works; every other refused range stays refused. On first start it
creates the tenant ``dev``, an admin token, an API key and a worker
credential, and writes them to ``DIR/dev-credentials.json``; later starts
reuse what still verifies and replace what does not. The web console is on
(a free port on 127.0.0.1 unless ``--http-listen`` says otherwise); its URL
is in the banner, the log and ``dev-credentials.json`` (``console``).

``--log-format`` and ``--trace-export`` are those of ``tickwheel server``;
the built-in worker shares the server's tracer, so with tracing on one
trace runs from the API call or the dispatch to the target call (and the
HTTP target receives its ``traceparent``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import signal
import sys
from pathlib import Path

from tickwheel.shared.heap import tune_collector
from tickwheel.shared import logs
from tickwheel.shared.logs import LOG_FORMATS
from tickwheel.shared.secretargs import MAX_SECRET_BYTES
from tickwheel.shared.smallfiles import MAX_SMALL_FILE_BYTES, read_small
from tickwheel.shared.targets import LOOPBACK_NETWORKS, TargetPolicy
from tickwheel_worker.exporters import TRACE_EXPORT_HELP

from .app import StartupError, TickwheelServer
from .config import ConfigError, ServerConfig
from .errors import AlreadyExists
from .store.tenants import Tenant
from .telemetry.tracing import Tracing

log = logging.getLogger("tickwheel.dev")

DEV_TENANT = "dev"
CREDENTIALS_FILE = "dev-credentials.json"


def _read_saved(path: Path, limit: int) -> str | None:
    """``path``'s text (read up to ``limit``, :func:`read_small`), None when
    it does not exist; :class:`ConfigError` naming it when it cannot be
    read, holds more (``/dev/zero``, a FIFO written to forever) or is not
    UTF-8, so ``tickwheel dev`` stops with one line instead of reading it
    forever."""
    try:
        return read_small(path, limit).decode("utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def _admin_token(data: Path) -> str:
    path = data / "admin-token"
    saved = _read_saved(path, MAX_SECRET_BYTES)
    if saved is not None:
        return saved.strip()
    token = "twa_" + secrets.token_urlsafe(32)  # a prefix, like twk_ and tww_: never starts with "-" on a command line
    path.write_text(token + "\n")
    path.chmod(0o600)
    return token


async def _credentials(server: TickwheelServer, data: Path) -> dict[str, str]:
    """The dev tenant's API key and worker credential: the saved ones when they
    still verify, new ones otherwise."""
    path = data / CREDENTIALS_FILE
    text = _read_saved(path, MAX_SMALL_FILE_BYTES)
    try:
        saved = {} if text is None else json.loads(text)
    except ValueError as error:
        log.warning("%s is not valid JSON (%s): new credentials replace it", path, error)
        saved = {}
    if not isinstance(saved, dict):
        log.warning("%s is not a JSON object: new credentials replace it", path)
        saved = {}
    stores = server.stores
    try:
        _, issued = await stores.tenants.create(Tenant(name=DEV_TENANT), key_description="tickwheel dev")
        api_key = issued.secret
    except AlreadyExists:
        api_key = saved.get("api_key", "")
        if not api_key or await stores.tenants.verify_key(api_key) is None:
            api_key = (await stores.tenants.issue_key(DEV_TENANT, "tickwheel dev")).secret
    worker_credential = saved.get("worker_credential", "")
    if not worker_credential or await stores.workers.verify(worker_credential) is None:
        issued_worker = await stores.workers.issue([DEV_TENANT], [], http=True, description="tickwheel dev worker")
        worker_credential = issued_worker.secret
    credentials = {
        "address": server.address,
        "tenant": DEV_TENANT,
        "api_key": api_key,
        "admin_token": server.config.admin_token,
        "worker_credential": worker_credential,
        "console": server.http.url if server.http is not None else "",
    }
    path.write_text(json.dumps(credentials, indent=2) + "\n")
    path.chmod(0o600)
    return credentials


def _banner(data: Path, credentials: dict[str, str]) -> str:
    address = credentials["address"]
    console = (
        f"Web console: {credentials['console']} (sign in with the api_key, or the admin_token, from "
        f"{data / CREDENTIALS_FILE})\n"
        if credentials.get("console") else ""
    )
    return f"""
Tickwheel dev is serving on {address} (store: {data / 'tickwheel.db'}, leases in process).
Tenant "{DEV_TENANT}"; credentials in {data / CREDENTIALS_FILE}.
A built-in worker runs HTTP targets (loopback allowed) and the "echo" handler.

  tickwheel job create --dev {data} --name hello --cron '*/1 * * * *' --tz Europe/London --handler echo
  tickwheel job list --dev {data}
  grpcurl -plaintext -H "authorization: Bearer $(jq -r .api_key {data / CREDENTIALS_FILE})" {address} tickwheel.v1.SchedulerService/ListJobs
{console}

Stop with Ctrl-C.
"""


async def run_dev(
    listen: str, data: Path, *, http_listen: str = "127.0.0.1:0", ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None, trace_export: str = "none", tracing: Tracing | None = None,
) -> None:
    """Run the dev server and its worker until ``stop`` is set (or a signal
    arrives). Spans go where ``trace_export`` says (``--trace-export``), or
    to ``tracing`` when given (a test's exporter); the worker uses the
    server's tracer."""
    from tickwheel_worker import Worker, WorkerConfig, register_builtins
    from tickwheel_worker.handlers import HandlerRegistry

    data.mkdir(parents=True, exist_ok=True)
    config = ServerConfig(
        store=f"sqlite:///{data / 'tickwheel.db'}",
        etcd="memory",
        admin_token=_admin_token(data),
        listen=listen,
        http_listen=http_listen,
        migrate=True,
        allow_target_networks=LOOPBACK_NETWORKS,
        shutdown_grace=5.0,
        trace_export=trace_export,
    )
    server = TickwheelServer(config, tracing=tracing)
    await server.start()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    worker = None
    worker_task = None
    try:
        credentials = await _credentials(server, data)
        registry = HandlerRegistry()
        register_builtins(registry)
        worker = Worker(
            WorkerConfig(
                address=server.address,
                credential=credentials["worker_credential"],
                worker_id=f"dev-worker-{os.getpid()}",
                handlers=registry,
                http=True,
                slots=16,
                address_policy=TargetPolicy.allowing(LOOPBACK_NETWORKS),
                tracer=server.tracing.tracer,
            )
        )
        worker_task = asyncio.create_task(worker.run(), name="tickwheel-dev-worker")
        print(_banner(data, credentials), file=sys.stderr, flush=True)
        if ready is not None:
            ready.set()
        await stop.wait()
    finally:
        if worker is not None:
            await worker.stop(2.0)
        if worker_task is not None:
            await asyncio.gather(worker_task, return_exceptions=True)
        await server.stop()


def build_parser() -> argparse.ArgumentParser:
    """The flags of ``tickwheel dev`` (also read by ``tickwheel completion``)."""
    parser = argparse.ArgumentParser(prog="tickwheel dev", description="Run Tickwheel on one machine, no services needed.")
    parser.add_argument("--listen", default="127.0.0.1:50051", help="HOST:PORT (default 127.0.0.1:50051)")
    parser.add_argument(
        "--http-listen", default="127.0.0.1:0", metavar="HOST:PORT",
        help="the web console's HOST:PORT (default a free port on 127.0.0.1, printed and written to "
             "dev-credentials.json); '' turns it off",
    )  # fmt: skip
    parser.add_argument("--data", default=".tickwheel", help="folder for the database and credentials (default ./.tickwheel)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text",
        help="text (default) or json: one JSON object per line, execution, job and tenant ids as fields "
             "(the server's and the built-in worker's lines)",
    )  # fmt: skip
    parser.add_argument(
        "--trace-export", metavar="WHERE", default="none",
        help=f"where spans go (the server's and the built-in worker's): {TRACE_EXPORT_HELP}",
    )
    return parser


def dev_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    tune_collector()
    try:
        asyncio.run(
            run_dev(args.listen, Path(args.data).resolve(), http_listen=args.http_listen, trace_export=args.trace_export)
        )
    except (ConfigError, StartupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
