"""`tickwheel dev` and `tickwheel server` as real processes, driven by the CLI."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.support.server import TICKWHEEL, start_server_process

pytestmark = pytest.mark.slow


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([TICKWHEEL, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def start_dev(data: Path, *extra: str) -> subprocess.Popen:
    """`tickwheel dev` on a free port; returns once its banner says it serves.
    Its output so far is ``process.lines`` (all of it once ``process.pump`` is joined)."""
    process = subprocess.Popen(
        [TICKWHEEL, "dev", "--listen", "127.0.0.1:0", "--data", str(data), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    ready = threading.Event()
    lines: list[str] = []

    def pump() -> None:
        for line in process.stdout:
            lines.append(line)
            if "Stop with Ctrl-C" in line:
                ready.set()
        ready.set()

    process.lines, process.pump = lines, threading.Thread(target=pump, daemon=True)
    process.pump.start()
    if not ready.wait(60) or process.poll() is not None:
        process.kill()
        raise AssertionError("tickwheel dev did not start:\n" + "".join(lines))
    return process


def wait_succeeded(data: Path, job_id: str, failure: str, timeout: float = 30.0) -> None:
    """Poll `tickwheel job history` (through the dev server at ``data``) until
    one of the job's executions has succeeded; fail with ``failure`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        history = json.loads(cli("job", "history", job_id, "--json", "--dev", str(data)).stdout or "{}")
        if any(e.get("status") == "EXECUTION_STATUS_SUCCEEDED" for e in history.get("executions", [])):
            return
        time.sleep(0.2)
    raise AssertionError(f"{failure}: {history}")


def test_dev_serves_all_services_with_its_own_credentials(tmp_path: Path) -> None:
    data = tmp_path / "dev"
    process = start_dev(data)
    try:
        credentials = json.loads((data / "dev-credentials.json").read_text())
        assert set(credentials) == {"address", "tenant", "api_key", "admin_token", "worker_credential", "console"}
        created = cli(
            "job", "create", "--name", "hello", "--cron", "*/5 * * * *", "--tz", "Europe/London",
            "--handler", "echo", "--dev", str(data),
        )
        assert created.returncode == 0, created.stderr
        job_id = created.stdout.strip().splitlines()[-1]
        assert job_id.startswith("job_")
        got = cli("--dev", str(data), "--json", "job", "get", job_id)
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["job"]["name"] == "hello"
        bad = cli("job", "create", "--name", "bad", "--cron", "61 * * * *", "--handler", "echo", "--dev", str(data))
        assert bad.returncode == 2
        assert "schedule.cron.expression" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
        listed = cli("job", "list", "--dev", str(data), "--json")
        assert [job["id"] for job in json.loads(listed.stdout)["jobs"]] == [job_id]
        services = subprocess.run(
            [str(Path(sys.executable).with_name("grpcurl")), "-plaintext", credentials["address"], "list"],
            capture_output=True, text=True, timeout=30,
        )
        assert {"tickwheel.v1.SchedulerService", "tickwheel.v1.WorkerService", "tickwheel.v1.AdminService"} <= set(
            services.stdout.split()
        )
        with urllib.request.urlopen(credentials["console"], timeout=10) as page:  # the web console
            assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
        session = urllib.request.Request(credentials["console"].rstrip("/") + "/api/session",
                                         headers={"Authorization": f"Bearer {credentials['api_key']}"})
        with urllib.request.urlopen(session, timeout=10) as reply:
            assert json.loads(reply.read())["tenant"] == "dev"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    # A restart reuses the database and the saved credentials that still verify.
    process = start_dev(data)
    try:
        again = json.loads((data / "dev-credentials.json").read_text())
        assert again["api_key"] == credentials["api_key"]
        assert cli("job", "get", job_id, "--dev", str(data)).returncode == 0
        # Fencing epochs recorded before the restart do not block dispatch after it.
        at = (datetime.now(timezone.utc) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        once = cli("job", "create", "--name", "once", "--at", at, "--handler", "echo", "--dev", str(data))
        once_id = once.stdout.strip().splitlines()[-1]
        wait_succeeded(data, once_id, "the one-off job did not run after the restart")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


def test_dev_logs_json_and_its_worker_traces_the_target_call(tmp_path: Path) -> None:
    data, spans = tmp_path / "dev", tmp_path / "spans.jsonl"
    process = start_dev(data, "--log-format", "json", "--trace-export", f"jsonl:{spans}")
    try:
        at = (datetime.now(timezone.utc) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        once = cli("job", "create", "--name", "once", "--at", at, "--handler", "echo", "--dev", str(data))
        assert once.returncode == 0, once.stderr
        once_id = once.stdout.strip().splitlines()[-1]
        wait_succeeded(data, once_id, "the one-off job did not run")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    process.pump.join(10)
    logged = [json.loads(line) for line in process.lines if line.startswith("{")]
    assert logged and all({"ts", "level", "logger", "msg"} <= set(entry) for entry in logged)
    assert any(entry["logger"].startswith("tickwheel") for entry in logged)
    text_lines = [line for line in process.lines if re.match(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d", line)]
    assert not text_lines, "every log line is JSON"
    exported = [json.loads(line) for line in spans.read_text().splitlines()]
    of_job = [s for s in exported if s["attributes"].get("tickwheel.job_id") == once_id]
    [dispatch] = [s for s in of_job if s["name"] == "dispatch"]
    [call] = [s for s in of_job if s["name"] == "handler echo"]
    assert call["kind"] == "SpanKind.CLIENT", "the built-in worker has the server's tracer"
    assert call["context"]["trace_id"] == dispatch["context"]["trace_id"]


def test_server_refuses_to_start_without_an_admin_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TICKWHEEL_ADMIN_TOKEN"}
    result = subprocess.run(
        [TICKWHEEL, "server", "--store", f"sqlite:///{tmp_path / 's.db'}", "--etcd", "memory"],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert result.returncode == 2
    assert "admin token" in result.stderr


def test_server_refuses_an_unmigrated_store(tmp_path: Path) -> None:
    result = subprocess.run(
        [TICKWHEEL, "server", "--store", f"sqlite:///{tmp_path / 's.db'}", "--etcd", "memory", "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "TICKWHEEL_ADMIN_TOKEN": "x" * 24},
    )
    assert result.returncode == 1
    assert "tickwheel migrate" in result.stderr


@pytest.mark.postgres
@pytest.mark.etcd
def test_server_on_postgres_and_etcd_registers_and_shuts_down_gracefully(tmp_path: Path, postgres_url: str, etcd_endpoint: str) -> None:
    migrated = cli("migrate", "--store", postgres_url)
    assert migrated.returncode == 0, migrated.stderr
    assert re.search(r"schema version \d+ \(latest \d+\)", migrated.stdout)
    server = start_server_process(tmp_path, "--store", postgres_url, "--etcd", etcd_endpoint, "--server-id", "s1", "--session-ttl", "2")
    etcdctl = ["etcdctl", f"--endpoints={etcd_endpoint}"]
    try:
        registered = subprocess.run([*etcdctl, "get", "--prefix", "/tickwheel/servers/"], capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"})
        assert "/tickwheel/servers/s1" in registered.stdout
        created = cli("admin", "tenant", "create", "acme", "--address", server.address, "--admin-token", server.admin_token)
        assert created.returncode == 0, created.stderr
        key = created.stdout.strip().splitlines()[-1]
        job = cli("job", "create", "--name", "once", "--at", "2030-01-01T00:00:00Z", "--url", "https://example.com/hook",
                  "--address", server.address, "--api-key", key)
        assert job.returncode == 0, job.stderr
        status = cli("admin", "status", "--json", "--address", server.address, "--admin-token", server.admin_token)
        assert json.loads(status.stdout)["storeEngine"] == "postgresql"
    finally:
        assert server.terminate() == 0, server.log()
    gone = subprocess.run([*etcdctl, "get", "--prefix", "/tickwheel/servers/"], capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"})
    assert "/tickwheel/servers/s1" not in gone.stdout, "the session must be revoked on shutdown"
    assert "stopped" in server.log()
