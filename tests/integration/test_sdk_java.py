"""The Java SDK (sdk/java): its JUnit tests, and its example program against a
real `tickwheel dev`, whose built-in worker serves the `echo` handler, and
against a real server that requires mutual TLS (the checks shared with
test_sdk_go.py).

The SDK is compiled once per module into a folder of the test run's own
(`-Dtickwheel.build.dir`), so runs side by side never share `target/`; the
example (dev.tickwheel.examples.CreateAndHistory) then runs on a plain `java`
command line with the runtime class path Maven wrote. It creates a job, waits
for its first execution to end and prints the job's history as JSON, or the
failed call's status, code name and field violations.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_processes import start_dev
from tests.integration.test_sdk_go import check_batch, check_mutual_tls, job_count, run_json, run_json_async
from tests.integration.test_sdk_go import pki  # noqa: F401 (the fixture, shared)
from tests.support.server import REPO
from tickwheel import Client

pytestmark = pytest.mark.slow

SDK = REPO / "sdk" / "java"
MVN = shutil.which("mvn") or "/usr/bin/mvn"
JAVA = shutil.which("java") or "/usr/bin/java"


def mvn(build: Path, *goals: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [MVN, "-q", "-B", "-Dstyle.color=never", f"-Dtickwheel.build.dir={build}", *goals],
        cwd=SDK, capture_output=True, text=True, timeout=900,
    )


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdk/java compiled (main and test classes), with target/classpath.txt."""
    build = tmp_path_factory.mktemp("java")
    compiled = mvn(
        build, "test-compile", "dependency:build-classpath",
        f"-Dmdep.outputFile={build / 'classpath.txt'}", "-Dmdep.includeScope=runtime",
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    return build


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


def example(build: Path, address: str, api_key: str, *args: str) -> list[str]:
    """The command line of CreateAndHistory on the runtime class path Maven wrote."""
    classpath = f"{build / 'classes'}:{(build / 'classpath.txt').read_text().strip()}"
    return [JAVA, "-cp", classpath, "dev.tickwheel.examples.CreateAndHistory",
            "--address", address, "--api-key", api_key, *args]  # fmt: skip


def run_example(build: Path, address: str, api_key: str, *args: str) -> tuple[int, list[dict]]:
    return run_json(example(build, address, api_key, *args))


def test_junit_tests_pass(build: Path) -> None:
    tested = mvn(build, "surefire:test")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    counts = {"tests": 0, "failures": 0, "errors": 0}
    suites = set()
    for report in (build / "surefire-reports").glob("TEST-*.xml"):
        suite = ElementTree.parse(report).getroot()
        suites.add(suite.get("name"))
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
    assert {"dev.tickwheel.TickwheelClientTest", "dev.tickwheel.SchedulerRpcsTest"} <= suites
    assert counts["failures"] == counts["errors"] == 0 and counts["tests"] >= 20, counts


def test_a_one_off_job_created_through_java_runs_and_its_history_reads_back(dev, build: Path) -> None:
    status, events = run_example(build, dev["address"], dev["api_key"], "--in", "2", "--wait", "60")
    assert status == 0, events
    created, history = events
    assert created["event"] == "created" and created["job_id"].startswith("job_")
    assert history["event"] == "history" and history["job_id"] == created["job_id"]
    [execution] = history["executions"]
    assert execution["status"] == "EXECUTION_STATUS_SUCCEEDED"
    [attempt] = execution["attempts"]
    assert attempt["attempt"] == 1 and attempt["status"] == "ATTEMPT_STATUS_SUCCEEDED"
    assert attempt["worker_id"].startswith("dev-worker")
    # The Python client sees the job the Java client wrote, field for field.
    with Client(dev["address"], api_key=dev["api_key"]) as client:
        job = client.get_job(created["job_id"]).job
        stored = client.get_execution(execution["id"]).execution
    assert job.name == "example-history" and job.target.handler.name == "echo"
    assert job.retry_policy.max_attempts == 3 and job.retry_policy.max_backoff.seconds == 10
    assert stored.payload == b'{"from":"java"}'


def test_a_wrong_api_key_is_unauthenticated(dev, build: Path) -> None:
    before = job_count(dev)
    status, events = run_example(build, dev["address"], "twk_wrong_key", "--in", "2")
    assert status == 1
    [error] = events
    assert error["event"] == "error" and error["code"] == "UNAUTHENTICATED"
    assert job_count(dev) == before, "a refused call writes nothing"


def test_an_invalid_cron_expression_is_invalid_argument_naming_the_field(dev, build: Path) -> None:
    before = job_count(dev)
    status, events = run_example(build, dev["address"], dev["api_key"], "--cron", "61 * * * *")
    assert status == 1
    [error] = events
    assert error["event"] == "error" and error["code"] == "INVALID_ARGUMENT"
    fields = [violation["field"] for violation in error["field_violations"]]
    assert fields == ["job.schedule.cron.expression"]
    assert "61" in error["field_violations"][0]["description"]
    assert job_count(dev) == before, "a refused job writes nothing"


def test_a_batch_created_through_java_keeps_the_order_and_is_idempotent_per_job(dev, build: Path) -> None:
    check_batch(lambda *args: run_example(build, dev["address"], dev["api_key"], *args), dev, "java-batch",
                ("--in", str(365 * 24 * 3600)))


async def test_mutual_tls_previews_and_refuses_without_a_client_certificate(build: Path, pki, tmp_path: Path) -> None:
    async def run(address: str, api_key: str, *args: str) -> tuple[int, list[dict]]:
        return await run_json_async(example(build, address, api_key, *args))

    await check_mutual_tls(run, pki, f"sqlite:///{tmp_path / 'tls.db'}")
