"""The Go SDK (sdk/go): `go vet` and its unit tests, and its example program
against a real `tickwheel dev`, whose built-in worker serves the `echo`
handler.

The example (sdk/go/examples/history) is built once per module; it creates a
job, waits for its first execution to end and prints the job's history as
JSON, or the failed call's status, code name and field violations.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_processes import start_dev
from tests.support.server import REPO
from tickwheel import Client

pytestmark = pytest.mark.slow

SDK = REPO / "sdk" / "go"
# Where scripts/install.sh found or put the go command (its find_go).
GO = next(
    (str(path) for path in (SDK / ".tools" / "go", shutil.which("go"), "/usr/local/go/bin/go") if path and Path(path).exists()),
    "go",
)


def go(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    # GOTOOLCHAIN=local: build with this machine's Go, never fetch another one here.
    env = {**os.environ, "GOTOOLCHAIN": "local"}
    return subprocess.run([GO, *args], cwd=SDK, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def history_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    program = tmp_path_factory.mktemp("go") / "history"
    built = go("build", "-o", str(program), "./examples/history")
    assert built.returncode == 0, built.stderr
    return program


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A `tickwheel dev` for this module; yields its saved credentials."""
    data = tmp_path_factory.mktemp("dev")
    process = start_dev(data)
    try:
        yield json.loads((data / "dev-credentials.json").read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


def run_history(program: Path, address: str, api_key: str, *args: str) -> tuple[int, list[dict]]:
    """Runs the example; returns its exit status and the JSON objects it printed."""
    result = subprocess.run(
        [str(program), "--address", address, "--api-key", api_key, *args],
        capture_output=True, text=True, timeout=120,
    )
    assert result.stderr == "", result.stderr
    return result.returncode, [json.loads(line) for line in result.stdout.splitlines()]


def test_go_vet_and_unit_tests_pass() -> None:
    vet = go("vet", "./...")
    assert vet.returncode == 0, vet.stdout + vet.stderr
    tested = go("test", "-count=1", "./...")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "ok  \tgithub.com/tickwheel/tickwheel/sdk/go/tickwheel" in tested.stdout


def test_a_one_off_job_created_through_go_runs_and_its_history_reads_back(dev, history_program: Path) -> None:
    status, events = run_history(history_program, dev["address"], dev["api_key"], "--in", "2s", "--wait", "60s")
    assert status == 0, events
    created, history = events
    assert created["event"] == "created" and created["job_id"].startswith("job_")
    assert history["event"] == "history" and history["job_id"] == created["job_id"]
    [execution] = history["executions"]
    assert execution["status"] == "EXECUTION_STATUS_SUCCEEDED"
    assert execution["id"] == f"{created['job_id']}:{execution['nominal_at']}"
    [attempt] = execution["attempts"]
    assert attempt["attempt"] == 1 and attempt["status"] == "ATTEMPT_STATUS_SUCCEEDED"
    assert attempt["worker_id"].startswith("dev-worker")
    # The Python client sees the job the Go client wrote, field for field.
    with Client(dev["address"], api_key=dev["api_key"]) as client:
        job = client.get_job(created["job_id"]).job
        stored = client.get_execution(execution["id"]).execution
    assert job.name == "example-history" and job.target.handler.name == "echo"
    assert job.retry_policy.max_attempts == 3 and job.retry_policy.initial_backoff.seconds == 1
    assert stored.payload == b'{"from":"go"}'


def test_a_wrong_api_key_is_unauthenticated(dev, history_program: Path) -> None:
    status, events = run_history(history_program, dev["address"], "twk_wrong_key", "--in", "2s")
    assert status == 1
    [error] = events
    assert error["event"] == "error" and error["code"] == "UNAUTHENTICATED"


def test_an_invalid_cron_expression_is_invalid_argument_naming_the_field(dev, history_program: Path) -> None:
    status, events = run_history(history_program, dev["address"], dev["api_key"], "--cron", "61 * * * *")
    assert status == 1
    [error] = events
    assert error["event"] == "error" and error["code"] == "INVALID_ARGUMENT"
    fields = [violation["field"] for violation in error["field_violations"]]
    assert fields == ["job.schedule.cron.expression"]
    assert "61" in error["field_violations"][0]["description"]
