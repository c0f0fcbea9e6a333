"""What a ``tickwheel`` command costs before and besides its work: modules
imported and CPU per run, for ``--help``, ``cron next``, ``job list`` and
``apply -f`` (the plan, nothing written) against a real ``tickwheel dev``.

Each command runs as its own process of ``python -m tickwheel_server.cli.main``
(what the console script runs) under the ``PYTHONPATH`` given (``--tree``,
repeatable: the trees alternate run by run, so an A/B against another
checkout shares the machine's load). Every tree is byte-compiled first, as
an installed package is (``PYTHONDONTWRITEBYTECODE`` would otherwise leave
one tree compiling its sources on every run). Modules are counted from a separate
``-X importtime`` run (one line per module imported, the interpreter's own
start-up included); CPU is the child's user + system time from ``getrusage``.
One JSON object is printed.

    python loadtest/bench_cli_start.py --tree new=$PWD --tree main=/work/wt-X-old --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = """\
[[jobs]]
name = "nightly"
cron = "0 2 * * *"
tz = "Europe/London"
handler = "report"
payload = { day = "yesterday" }

[[jobs]]
name = "hourly"
cron = "15 * * * *"
handler = "sweep"
"""

HEAVY = ("sqlalchemy", "psycopg", "tickwheel_server.store", "opentelemetry", "grpc", "google.protobuf", "yaml")


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(tree / part) for part in ("server", "workers", "sdk/python"))
    return env


def _modules(tree: Path, argv: list[str]) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tickwheel_server.cli.main", *argv],
                          env=_env(tree), capture_output=True, text=True, timeout=120)  # fmt: skip
    names = [line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    names = [name for name in names if name != "package"]
    heavy = sorted({family for family in HEAVY for name in names if name == family or name.startswith(family + ".")})
    return len(names), heavy


def _cpu_ms(tree: Path, argv: list[str]) -> tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "tickwheel_server.cli.main", *argv],
                          env=_env(tree), capture_output=True, timeout=120)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu * 1000, done.returncode


def _start_dev(tree: Path, data: Path) -> subprocess.Popen:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tickwheel_server.cli.main", "dev", "--data", str(data),
                               "--listen", f"127.0.0.1:{port}"],
                              env=_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    credentials = data / "dev-credentials.json"
    for _ in range(600):
        if credentials.exists():
            probe = subprocess.run([sys.executable, "-m", "tickwheel_server.cli.main", "--dev", str(data), "job", "list"],
                                   env=_env(tree), capture_output=True, timeout=60)  # fmt: skip
            if probe.returncode == 0:
                return server
        if server.poll() is not None:
            raise SystemExit("tickwheel dev exited")
        time.sleep(0.5)
    server.terminate()
    raise SystemExit("tickwheel dev did not answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout (repeatable)")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    trees = {name: Path(path).resolve() for name, _, path in (spec.partition("=") for spec in options.tree)}
    for tree in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(tree / part) for part in ("server", "workers", "sdk/python"))],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "dev"
        jobs = Path(scratch) / "jobs.toml"
        jobs.write_text(JOBS)
        server = _start_dev(next(iter(trees.values())), data)
        try:
            commands = {
                "--help": ["--help"],
                "cron next": ["cron", "next", "--tz", "UTC", "* * * * *"],
                "job list": ["--dev", str(data), "job", "list"],
                "apply -f (plan)": ["--dev", str(data), "apply", "-f", str(jobs)],
            }
            result: dict = {"load_average_before": os.getloadavg(), "runs": options.runs, "commands": {}}
            for label, argv in commands.items():
                entry: dict = {}
                cpu: dict[str, list[float]] = {name: [] for name in trees}
                for name, tree in trees.items():
                    count, heavy = _modules(tree, argv)
                    entry[name] = {"modules": count, "heavy_families": heavy}
                for _ in range(options.runs):
                    for name, tree in trees.items():  # alternated run by run
                        ms, status = _cpu_ms(tree, argv)
                        cpu[name].append(ms)
                        entry[name]["exit_status"] = status
                for name in trees:
                    entry[name]["cpu_ms_median"] = round(statistics.median(cpu[name]), 1)
                    entry[name]["cpu_ms_min"] = round(min(cpu[name]), 1)
                result["commands"][label] = entry
            result["load_average_after"] = os.getloadavg()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
