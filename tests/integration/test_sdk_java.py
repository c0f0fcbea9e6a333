"""The Java SDK (sdk/java): its JUnit tests, its history example against a
real `tickwheel dev`, whose built-in worker serves the `echo` handler, and
against a real server that requires mutual TLS (the checks shared with
test_sdk_go.py), and its example worker (sdk/java/examples/worker/run)
against a real `tickwheel dev`.

The SDK (main and test classes) is compiled once per module into the example
worker's build folder, under its lock (tests/support/java.py): the example
worker's `run` script and test_sdk_packages.py's `mvn install` then find the
classes compiled. The history example (sdk/java/examples/history, outside the
SDK's jar) is compiled with javac against it into a folder of the module's
own and runs on a plain `java` command line with the runtime class path Maven
wrote. It creates a job, waits for its first execution to end and prints the
job's history as JSON, or the failed call's status, code name and field
violations. The example worker is started through its own `run` script,
which builds into its `.build` folder beside it and builds again only when a
source changed (a digest stamp; a lock for runs at once):
test_worker_languages.py's Java runs, in the same unit of work (see
tests/conftest.py), find it built.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.test_processes import start_dev
from tests.integration.test_sdk_go import check_batch, check_mutual_tls, job_count, run_json, run_json_async
from tests.integration.test_sdk_go import pki  # noqa: F401 (the fixture, shared)
from tests.support.faults import eventually
from tests.support.java import SDK, SDK_BUILD, mvn
from tests.support.polling import eventually as polling_eventually
from tests.support.server import running_server
from tickwheel import AsyncClient, Client, TlsOptions
from tickwheel.builders import once_job
from tickwheel_server.config import TlsConfig
from tickwheel.v1 import execution_pb2, job_pb2

pytestmark = pytest.mark.slow

JAVA = shutil.which("java") or "/usr/bin/java"
JAVAC = shutil.which("javac") or "/usr/bin/javac"
WORKER_RUN = SDK / "examples" / "worker" / "run"


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdk/java compiled (main and test classes, in :data:`SDK_BUILD`); the
    module's folder, holding classpath.txt and the history example's classes."""
    build = tmp_path_factory.mktemp("java")
    compiled = mvn(
        "test-compile", "dependency:build-classpath",
        f"-Dmdep.outputFile={build / 'classpath.txt'}", "-Dmdep.includeScope=runtime",
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    classpath = f"{SDK_BUILD / 'classes'}:{(build / 'classpath.txt').read_text().strip()}"
    examples = subprocess.run(
        [JAVAC, "-d", str(build / "examples"), "-cp", classpath, str(SDK / "examples" / "history" / "CreateAndHistory.java")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert examples.returncode == 0, examples.stdout + examples.stderr
    return build


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A `tickwheel dev` for this module; yields its saved credentials, and its
    data folder under "data"."""
    data = tmp_path_factory.mktemp("dev")
    process = start_dev(data)
    try:
        yield {**json.loads((data / "dev-credentials.json").read_text()), "data": str(data)}
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


def example(build: Path, address: str, api_key: str, *args: str) -> list[str]:
    """The command line of CreateAndHistory on the runtime class path Maven wrote."""
    classpath = f"{build / 'examples'}:{SDK_BUILD / 'classes'}:{(build / 'classpath.txt').read_text().strip()}"
    return [JAVA, "-cp", classpath, "dev.tickwheel.examples.CreateAndHistory",
            "--address", address, "--api-key", api_key, *args]  # fmt: skip


def run_example(build: Path, address: str, api_key: str, *args: str) -> tuple[int, list[dict]]:
    return run_json(example(build, address, api_key, *args))


def test_junit_tests_pass(build: Path) -> None:
    reports = SDK_BUILD / "surefire-reports"
    shutil.rmtree(reports, ignore_errors=True)  # only this run's: the folder outlives runs
    tested = mvn("surefire:test")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    counts = {"tests": 0, "failures": 0, "errors": 0}
    suites = set()
    for report in reports.glob("TEST-*.xml"):
        suite = ElementTree.parse(report).getroot()
        suites.add(suite.get("name"))
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
    assert {
        "dev.tickwheel.TickwheelClientTest", "dev.tickwheel.SchedulerRpcsTest", "dev.tickwheel.TickwheelAdminClientTest",
        "dev.tickwheel.worker.WorkerTest", "dev.tickwheel.worker.BackoffTest", "dev.tickwheel.CalendarsTest",
    } <= suites  # fmt: skip
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


# --- the example worker (sdk/java/examples/worker/run) --------------------------------------


class ExampleWorker:
    """`run ARGS` as a child process; its stdout JSON lines are read as they come."""

    def __init__(self, logs: Path, *args: str, env: dict[str, str] | None = None) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        env = {**base, "TICKWHEEL_SLOTS": "2", **(env or {})}
        self.stderr = logs / f"worker-{time.monotonic_ns()}.stderr"
        with self.stderr.open("w") as stderr:
            self.process = subprocess.Popen(
                [str(WORKER_RUN), *args], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
            )
        self.events: queue.Queue[dict | None] = queue.Queue()
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            self.events.put(json.loads(line))  # anything but JSON on stdout fails the test here
        self.events.put(None)

    def next_event(self, timeout: float = 240) -> dict:
        """The next stdout event; fails when none comes within ``timeout`` (the first run builds)."""
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout} s; stderr:\n{self.stderr.read_text()}") from None
        assert event is not None, f"the worker exited ({self.process.poll()}); stderr:\n{self.stderr.read_text()}"
        return event

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


@pytest.fixture(scope="module")
def worker_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the example workers' stderr goes (one folder for the module's runs)."""
    return tmp_path_factory.mktemp("java-worker")


@pytest.fixture
def example_worker(dev, worker_logs: Path) -> Iterator[ExampleWorker]:
    worker = ExampleWorker(worker_logs, "--dev", dev["data"])
    try:
        yield worker
    finally:
        worker.stop()


def trigger_echo(dev: dict[str, str], payload: bytes) -> str:
    """Triggers a far-future one-off `echo-java` job with ``payload``; returns the execution id."""
    with Client(dev["address"], api_key=dev["api_key"]) as client:
        job = once_job("java-worker", datetime.now(UTC) + timedelta(days=365), handler="echo-java", payload=payload)
        job_id = client.create_job(job).job.id
        return client.trigger_job(job_id, payload=payload).execution.id


def wait_ended(dev: dict[str, str], execution_id: str, timeout: float = 60) -> execution_pb2.Execution:
    """The execution once it has ended; fails after ``timeout`` seconds."""
    ended = {job_pb2.EXECUTION_STATUS_SUCCEEDED, job_pb2.EXECUTION_STATUS_DEAD, job_pb2.EXECUTION_STATUS_CANCELED}
    with Client(dev["address"], api_key=dev["api_key"]) as client:

        def read() -> execution_pb2.Execution | None:
            execution = client.get_execution(execution_id).execution
            return execution if execution.status in ended else None

        return eventually(read, timeout, f"execution {execution_id} ends")


def test_the_example_worker_runs_an_echo_java_job_to_succeeded(dev, example_worker: ExampleWorker) -> None:
    payload = b'{"from":"java-worker","n":1}'
    execution_id = trigger_echo(dev, payload)
    started = example_worker.next_event()
    assert started == {"event": "started", "execution_id": execution_id, "delivery": 1, "attempt": 1}
    assert example_worker.next_event() == {"event": "finished", "execution_id": execution_id}
    execution = wait_ended(dev, execution_id)
    assert execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED, execution
    assert execution.payload == payload
    [attempt] = execution.attempts
    assert attempt.status == execution_pb2.ATTEMPT_STATUS_SUCCEEDED and attempt.worker_id


def test_sigterm_drains_the_example_workers_in_flight_sleep(dev, example_worker: ExampleWorker) -> None:
    payload = b'{"sleep_ms": 3000}'
    execution_id = trigger_echo(dev, payload)
    assert example_worker.next_event()["event"] == "started"
    example_worker.process.send_signal(signal.SIGTERM)
    assert example_worker.next_event(60) == {"event": "finished", "execution_id": execution_id}
    assert example_worker.process.wait(40) == 0, example_worker.stderr.read_text()
    assert all(json.loads(line)["event"] != "canceled" for line in example_worker.lines)
    execution = wait_ended(dev, execution_id)
    assert execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED, execution
    assert [a.status for a in execution.attempts] == [execution_pb2.ATTEMPT_STATUS_SUCCEEDED]


def test_the_example_worker_without_address_or_credential_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    result = subprocess.run([str(WORKER_RUN)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == "echo-java: no address: set TICKWHEEL_ADDRESS or pass --dev DIR"


async def test_the_example_worker_runs_a_job_over_mutual_tls(pki, worker_logs: Path, tmp_path: Path) -> None:
    tls = TlsConfig(str(pki["server.pem"]), str(pki["server.key"]), client_ca_file=str(pki["ca.pem"]))
    client_tls = TlsOptions.from_files(pki["ca.pem"], pki["client.pem"], pki["client.key"])
    async with running_server(f"sqlite:///{tmp_path / 'tls.db'}", tls=tls) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=client_tls) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            credential = (await admin.admin.issue_worker_credential(["acme"], handlers=["echo-java"])).credential.secret
        worker = ExampleWorker(
            worker_logs, "--ca-cert", str(pki["ca.pem"]), "--client-cert", str(pki["client.pem"]),
            "--client-key", str(pki["client.key"]),
            env={"TICKWHEEL_ADDRESS": running.address, "TICKWHEEL_WORKER_CREDENTIAL": credential},
        )  # fmt: skip
        try:
            async with AsyncClient(running.address, api_key=api_key, tls=client_tls) as client:
                job = once_job("tls", datetime.now(UTC) + timedelta(days=365), handler="echo-java")
                job_id = (await client.create_job(job)).job.id
                execution_id = (await client.trigger_job(job_id, payload=b"over mtls")).execution.id
                started = await asyncio.to_thread(worker.next_event)
                assert started["event"] == "started" and started["execution_id"] == execution_id

                async def succeeded() -> bool:
                    execution = (await client.get_execution(execution_id)).execution
                    return execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED

                await polling_eventually(succeeded, "the execution succeeds over mutual TLS", timeout=60)
        finally:
            worker.stop()
