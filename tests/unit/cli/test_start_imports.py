"""A ``tickwheel`` command loads what it runs and no more: ``--help`` and
``cron next`` load no protobuf, gRPC, store or file readers; ``apply -f``
checks its jobs with the server's rules (``api/validate.py``) without the
store's SQLAlchemy and psycopg. Each command runs in a fresh interpreter, as from a script or
CI, and reports the modules loaded when it returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ROOTS = [str(REPO / part) for part in ("server", "workers", "sdk/python")]

PROBE = """\
import json, sys
from tickwheel_server.cli.main import main
status = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"status": status, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

STORE = ("sqlalchemy", "psycopg", "tickwheel_server.store", "opentelemetry.sdk")
WIRE = ("google.protobuf", "grpc", "tickwheel.v1", "yaml")
FILES = ("tomllib", "csv", "concurrent.futures.thread")  # what reading a file to apply or import needs


def _run(*argv: str) -> tuple[int, str, set[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*ROOTS, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=120)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["status"], done.stdout + done.stderr, set(report["modules"])


def _loaded(modules: set[str], families: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules for family in families if name == family or name.startswith(family + "."))


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["cron", "next", "--tz", "UTC", "--count", "2", "0 2 * * *"], ["job", "--help"]],
    ids=["help", "cron-next", "job-help"],
)
def test_a_command_without_a_call_loads_neither_wire_nor_store(argv: list[str]) -> None:
    status, shown, modules = _run(*argv)
    assert status == 0, shown
    assert _loaded(modules, STORE + WIRE + FILES) == []


def test_apply_checks_its_jobs_with_the_servers_rules_without_the_store(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[jobs]]\nname = "nightly"\ncron = "0 2 * * *"\nhandler = "report"\n\n'
                    '[[jobs]]\nname = "broken"\ncron = "61 2 * * *"\nhandler = "report"\n')  # fmt: skip
    key = tmp_path / "key"
    key.write_text("tw_unused\n")
    # The second job is refused by the server's rules before any call: no
    # server listens at the address, and the exit is 2, not UNAVAILABLE's 1.
    status, shown, modules = _run("--address", "127.0.0.1:9", "--api-key-file", str(key), "apply", "-f", str(jobs))
    assert status == 2, shown
    assert '"broken": cron: minute field: 61 is out of range' in shown, shown
    assert "tickwheel_server.api.validate" in modules
    assert _loaded(modules, STORE) == []
