"""The two Python distributions, built and installed as a user would.

``tickwheel`` (the SDK and the worker runtime, ``pyproject.toml``) and
``tickwheel-server`` (``server/pyproject.toml``) are built into sdists and
wheels from a copy of the tree, each installed from its sdist into a clean
virtual environment (so the sdist is complete), and used from there:
``tickwheel dev`` from the server's environment, and from the SDK's, a
client creating a job that a ``tickwheel-worker`` with a handler of its own
runs. The SDK's environment holds nothing of the server: no SQLAlchemy,
psycopg, etcd client or OpenTelemetry SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import venv
import zipfile
from pathlib import Path

import pytest

from tests.support.server import stop_process

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TREE = ["pyproject.toml", "sdk/python/README.md", "sdk/python/tickwheel", "workers/tickwheel_worker", "server"]
"""What the two builds read: each pyproject's packages and readme."""
SERVER_ONLY = {"sqlalchemy", "psycopg", "psycopg-binary", "etcd-sdk-python", "opentelemetry-sdk", "tickwheel-server"}
INSTALL_TIMEOUT = 600
CLEAN = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
"""The environment of every command here: no PYTHONPATH, so nothing comes from the checkout."""

HANDLERS = '''
from tickwheel_worker import HandlerRegistry

registry = HandlerRegistry()


@registry.handler("packaged")
def packaged(ctx):
    return b"ran from the tickwheel distribution alone"
'''

CLIENT = '''
import json, sys, time, uuid
from datetime import datetime, timedelta, timezone
from tickwheel import Client, once_job
from tickwheel.v1 import job_pb2

creds = json.load(open(sys.argv[1]))
with Client(creds["address"], api_key=creds["api_key"]) as client:
    at = datetime.now(timezone.utc) + timedelta(seconds=1)
    job = client.create_job(once_job(f"packaged-{uuid.uuid4().hex[:6]}", at, handler="packaged", payload="{}")).job
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = list(client.iter_executions(job.id))
        if any(run.status == job_pb2.EXECUTION_STATUS_SUCCEEDED for run in runs):
            print(json.dumps({"job": job.id, "workers": [a.worker_id for run in runs for a in run.attempts]}))
            sys.exit(0)
        time.sleep(0.3)
    print(json.dumps({"job": job.id, "runs": [str(run) for run in runs]}))
    sys.exit(1)
'''


def _run(*command: str | Path, cwd: Path | None = None, timeout: float = INSTALL_TIMEOUT) -> str:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=CLEAN)  # fmt: skip
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _copy_tree(into: Path) -> Path:
    for part in TREE:
        source = REPO / part
        target = into / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def _environment(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin"


def _installed(bin_dir: Path) -> set[str]:
    listed = json.loads(_run(bin_dir / "python", "-m", "pip", "list", "--format", "json", timeout=120))
    return {package["name"].lower() for package in listed}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    tree = _copy_tree(tmp_path_factory.mktemp("tree"))
    out = tmp_path_factory.mktemp("dist")
    for project in (tree, tree / "server"):
        _run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, project)
    return out


def test_each_wheel_holds_its_own_packages_only(dist: Path) -> None:
    names = sorted(path.name for path in dist.iterdir())
    assert names == ["tickwheel-0.1.0-py3-none-any.whl", "tickwheel-0.1.0.tar.gz",
                     "tickwheel_server-0.1.0-py3-none-any.whl", "tickwheel_server-0.1.0.tar.gz"], names  # fmt: skip
    sdk = {name.split("/")[0] for name in zipfile.ZipFile(dist / names[0]).namelist()}
    server = zipfile.ZipFile(dist / names[2]).namelist()
    assert sdk == {"tickwheel", "tickwheel_worker", "tickwheel-0.1.0.dist-info"}
    assert {name.split("/")[0] for name in server} == {"tickwheel_server", "tickwheel_server-0.1.0.dist-info"}
    # The migrations and the console's files travel with the server.
    assert any(name.startswith("tickwheel_server/store/migrations/0001") for name in server)
    assert any(name.startswith("tickwheel_server/web/static/") for name in server)
    assert "tickwheel/v1/scheduler_pb2.py" in zipfile.ZipFile(dist / names[0]).namelist()


def test_a_tenant_installs_the_sdk_alone_and_runs_a_job_with_it(dist: Path, tmp_path: Path) -> None:
    server_bin = _environment(tmp_path / "server-env")
    _run(server_bin / "python", "-m", "pip", "install", "-q", dist / "tickwheel-0.1.0-py3-none-any.whl")
    _run(server_bin / "python", "-m", "pip", "install", "-q", "--find-links", dist, dist / "tickwheel_server-0.1.0.tar.gz")
    sdk_bin = _environment(tmp_path / "sdk-env")
    _run(sdk_bin / "python", "-m", "pip", "install", "-q", dist / "tickwheel-0.1.0.tar.gz")

    installed = _installed(sdk_bin)
    assert "tickwheel" in installed and not installed & SERVER_ONLY, installed & SERVER_ONLY
    refused = subprocess.run([sdk_bin / "python", "-c", "import tickwheel_server"], capture_output=True, text=True,
                             env=CLEAN)  # fmt: skip
    assert refused.returncode != 0 and "No module named 'tickwheel_server'" in refused.stderr
    assert "--trace-export" in _run(sdk_bin / "tickwheel-worker", "--help", timeout=60)
    # Without the otlp extra, asking for traces says what to install.
    no_sdk = subprocess.run([sdk_bin / "tickwheel-worker", "--address", "127.0.0.1:9", "--credential", "twc_x",
                             "--trace-export", "console"], capture_output=True, text=True, timeout=60,
                            env=CLEAN)  # fmt: skip
    assert no_sdk.returncode == 2 and "tickwheel[otlp]" in no_sdk.stderr, no_sdk.stderr

    data = tmp_path / "dev"
    with contextlib.ExitStack() as stack:
        dev = subprocess.Popen(
            [server_bin / "tickwheel", "dev", "--listen", "127.0.0.1:0", "--data", data],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
            env=CLEAN,
        )
        stack.callback(stop_process, dev)
        ready, lines = threading.Event(), []

        def pump() -> None:
            for line in dev.stdout:
                lines.append(line)
                if "Stop with Ctrl-C" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        assert ready.wait(60) and dev.poll() is None, "".join(lines)

        (tmp_path / "packaged_handlers.py").write_text(HANDLERS)
        worker = subprocess.Popen(
            [sdk_bin / "tickwheel-worker", "--dev", data, "--no-http", "--worker-id", "packaged-worker",
             "--handlers", "packaged_handlers:registry", "--grace", "2"],
            stdout=(tmp_path / "worker.log").open("w"), stderr=subprocess.STDOUT, cwd=tmp_path,
            env=CLEAN,
        )  # fmt: skip
        stack.callback(stop_process, worker)
        (tmp_path / "client.py").write_text(CLIENT)
        ran = json.loads(_run(sdk_bin / "python", tmp_path / "client.py", data / "dev-credentials.json", timeout=120))
    assert ran["workers"] == ["packaged-worker"], (ran, (tmp_path / "worker.log").read_text())
