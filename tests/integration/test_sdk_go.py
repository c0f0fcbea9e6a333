"""The Go SDK (sdk/go): `go vet` and its unit tests, and its example program
against a real `tickwheel dev`, whose built-in worker serves the `echo`
handler, and against a real server that requires mutual TLS; and the example
worker (sdk/go/examples/worker, started through its `run` script) serving
`echo-go` against both.

The example (sdk/go/examples/history) is built once per module; it creates a
job, waits for its first execution to end and prints the job's history as
JSON (or previews a job's next fires), or the failed call's status, code name
and field violations. test_sdk_java.py drives the Java example the same way
with the helpers here.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.integration.test_processes import start_dev
from tests.support.server import REPO, running_server
from tickwheel import AsyncClient, Client, TlsOptions, cron_job
from tickwheel.v1 import job_pb2
from tickwheel_server.config import TlsConfig

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
        yield {**json.loads((data / "dev-credentials.json").read_text()), "data": str(data)}
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


def _events(stdout: str, stderr: str) -> list[dict]:
    try:
        return [json.loads(line) for line in stdout.splitlines()]
    except json.JSONDecodeError:
        raise AssertionError(f"the program printed more than JSON lines:\n{stdout}\n{stderr}") from None


def run_json(argv: Sequence[str]) -> tuple[int, list[dict]]:
    """Runs an example program; returns its exit status and the JSON objects it printed."""
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    return result.returncode, _events(result.stdout, result.stderr)


async def run_json_async(argv: Sequence[str]) -> tuple[int, list[dict]]:
    """As run_json, without blocking the event loop (an in-process server keeps serving)."""
    process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return process.returncode, _events(stdout.decode(), stderr.decode())


def run_history(program: Path, address: str, api_key: str, *args: str) -> tuple[int, list[dict]]:
    return run_json([str(program), "--address", address, "--api-key", api_key, *args])


def job_count(dev: dict[str, str]) -> int:
    """How many jobs the dev tenant has, read through the Python client."""
    with Client(dev["address"], api_key=dev["api_key"]) as client:
        return sum(1 for _ in client.iter_jobs())


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate (openssl)."""
    folder = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(folder, "req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sdk-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, extensions in (
        ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        (folder / f"{name}.ext").write_text(extensions)
        _openssl(folder, "req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext")
    return {name: folder / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


# A cron job in a zone across the 2027 spring-forward in London, previewed from
# a fixed instant.
PREVIEW = ("--cron", "30 2 * * *", "--tz", "Europe/London", "--preview", "3", "--after", "2027-03-26T12:00:00Z")


async def check_mutual_tls(run, pki: dict[str, Path], store: str) -> None:
    """Drives an example program (``run(address, api_key, *args)``) against a
    server that requires client certificates: a preview and a refused cron
    expression go through; without a client certificate nothing does."""
    tls = TlsConfig(str(pki["server.pem"]), str(pki["server.key"]), client_ca_file=str(pki["ca.pem"]))
    client_tls = TlsOptions.from_files(pki["ca.pem"], pki["client.pem"], pki["client.key"])
    mutual = ("--ca", str(pki["ca.pem"]), "--cert", str(pki["client.pem"]), "--key", str(pki["client.key"]))
    async with running_server(store, tls=tls) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=client_tls) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
        async with AsyncClient(running.address, api_key=api_key, tls=client_tls) as python:
            expected = await python.preview_schedule(
                job=cron_job("example-history", "30 2 * * *", "Europe/London", handler="echo"),
                after=datetime(2027, 3, 26, 12, tzinfo=timezone.utc), count=3,
            )

        status, events = await run(running.address, api_key, *mutual, *PREVIEW)
        assert status == 0, events
        [preview] = events
        assert [fire["local_time"] for fire in preview["fires"]] == [
            "2027-03-27T02:30:00+00:00", "2027-03-28T02:30:00+01:00", "2027-03-29T02:30:00+01:00",
        ]
        assert [fire["local_time"] for fire in preview["fires"]] == [fire.local_time for fire in expected.fires]

        status, events = await run(running.address, api_key, *mutual, "--cron", "61 * * * *")
        assert status == 1 and events[0]["code"] == "INVALID_ARGUMENT", events
        assert [v["field"] for v in events[0]["field_violations"]] == ["job.schedule.cron.expression"]

        status, events = await run(running.address, api_key, "--ca", str(pki["ca.pem"]), "--cron", "0 * * * *")
        assert status == 1 and events[0]["code"] == "UNAVAILABLE", events


def test_go_vet_and_unit_tests_pass() -> None:
    vet = go("vet", "./...")
    assert vet.returncode == 0, vet.stdout + vet.stderr
    tested = go("test", "-count=1", "./...")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "ok  \tgithub.com/tickwheel/tickwheel/sdk/go/tickwheel\t" in tested.stdout
    assert "ok  \tgithub.com/tickwheel/tickwheel/sdk/go/tickwheel/worker\t" in tested.stdout
    assert "ok  \tgithub.com/tickwheel/tickwheel/sdk/go/examples/worker\t" in tested.stdout


def test_a_one_off_job_created_through_go_runs_and_its_history_reads_back(dev, history_program: Path) -> None:
    status, events = run_history(history_program, dev["address"], dev["api_key"], "--in", "2s", "--wait", "60s")
    assert status == 0, events
    created, history = events
    assert created["event"] == "created" and created["job_id"].startswith("job_")
    assert history["event"] == "history" and history["job_id"] == created["job_id"]
    [execution] = history["executions"]
    assert execution["status"] == "EXECUTION_STATUS_SUCCEEDED"
    # The id's instant is fixed at six fractional digits; Go's RFC 3339
    # (nano) drops trailing zeros from nominal_at, so compare the instants.
    prefix, _, instant = execution["id"].partition(":")
    assert prefix == created["job_id"]
    assert _instant(instant) == _instant(execution["nominal_at"])
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
    before = job_count(dev)
    status, events = run_history(history_program, dev["address"], "twk_wrong_key", "--in", "2s")
    assert status == 1
    [error] = events
    assert error["event"] == "error" and error["code"] == "UNAUTHENTICATED"
    assert job_count(dev) == before, "a refused call writes nothing"


def test_an_invalid_cron_expression_is_invalid_argument_naming_the_field(dev, history_program: Path) -> None:
    before = job_count(dev)
    status, events = run_history(history_program, dev["address"], dev["api_key"], "--cron", "61 * * * *")
    assert status == 1
    [error] = events
    assert error["event"] == "error" and error["code"] == "INVALID_ARGUMENT"
    fields = [violation["field"] for violation in error["field_violations"]]
    assert fields == ["job.schedule.cron.expression"]
    assert "61" in error["field_violations"][0]["description"]
    assert job_count(dev) == before, "a refused job writes nothing"


def check_batch(run, dev: dict[str, str], prefix: str, a_year_ahead: tuple[str, ...]) -> None:
    """Drives an example program's batch mode (``run(*args)``) against the dev
    server: 1001 one-off jobs a year ahead in two calls, the last one refused
    with its field, every result in order; the same request ids again create
    nothing."""
    before = job_count(dev)
    args = (*a_year_ahead, "--batch", "1001", "--request-prefix", prefix, "--invalid-at", "1000")
    status, first = run(*args)
    assert status == 0, first[-3:]
    assert [(e["event"], e["index"], e["request_id"]) for e in first] == [("batch", i, f"{prefix}-{i}") for i in range(1001)]
    assert all(e["created"] is True and e["job_id"].startswith("job_") for e in first[:1000])
    assert len({e["job_id"] for e in first[:1000]}) == 1000
    assert first[1000]["code"] == "INVALID_ARGUMENT" and "job_id" not in first[1000]
    assert [v["field"] for v in first[1000]["field_violations"]] == ["job.schedule.cron.expression"]
    assert job_count(dev) == before + 1000
    status, again = run(*args)
    assert status == 0, again[-3:]
    assert [(e["job_id"], e["created"]) for e in again[:1000]] == [(e["job_id"], False) for e in first[:1000]]
    assert again[1000]["code"] == "INVALID_ARGUMENT"
    assert job_count(dev) == before + 1000, "the same request ids create nothing twice"


def test_a_batch_created_through_go_keeps_the_order_and_is_idempotent_per_job(dev, history_program: Path) -> None:
    def run(*args: str) -> tuple[int, list[dict]]:
        return run_history(history_program, dev["address"], dev["api_key"], *args)

    check_batch(run, dev, "go-batch", ("--in", "8760h"))


async def test_mutual_tls_previews_and_refuses_without_a_client_certificate(history_program: Path, pki, tmp_path: Path) -> None:
    async def run(address: str, api_key: str, *args: str) -> tuple[int, list[dict]]:
        return await run_json_async([str(history_program), "--address", address, "--api-key", api_key, *args])

    await check_mutual_tls(run, pki, f"sqlite:///{tmp_path / 'tls.db'}")


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- the example worker (sdk/go/examples/worker) ---------------------------------------

RUN_WORKER = SDK / "examples" / "worker" / "run"
SUCCEEDED = job_pb2.EXECUTION_STATUS_SUCCEEDED
CANCELED = job_pb2.EXECUTION_STATUS_CANCELED


class GoWorker:
    """The example worker as a child process started through its `run`
    script; its stdout lines (JSON objects, nothing else) are read as events."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self.events: list[dict] = []

    @classmethod
    async def start(cls, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> GoWorker:
        log = tmp_path / f"go-worker-{len(list(tmp_path.glob('go-worker-*.log')))}.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        with log.open("w") as stderr:
            process = await asyncio.create_subprocess_exec(
                str(RUN_WORKER), *args, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                env={**base, "GOTOOLCHAIN": "local", **(env or {})}, cwd=tmp_path,
            )
        return cls(process, log)

    async def event(self, kind: str, execution_id: str, timeout: float = 120) -> dict:
        """The next event of ``kind`` for ``execution_id`` (others are kept in ``events``)."""
        async def read() -> dict:
            while True:
                line = await self.process.stdout.readline()
                if not line:
                    raise AssertionError(f"the worker ended before {kind} of {execution_id}:\n{self.log.read_text()}")
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    raise AssertionError(f"the worker printed more than JSON lines: {line!r}") from None
                self.events.append(event)
                if event["event"] == kind and event["execution_id"] == execution_id:
                    return event

        try:
            return await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            raise AssertionError(f"no {kind} of {execution_id} within {timeout}s:\n{self.log.read_text()}") from None

    async def terminate(self, timeout: float = 40) -> int:
        """SIGTERM, then the exit status (SIGKILL if it does not exit in time)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            rest = await asyncio.wait_for(self.process.stdout.read(), timeout)  # to the end: the events of the drain
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"the worker did not exit within {timeout}s of SIGTERM:\n{self.log.read_text()}") from None
        try:
            self.events.extend(json.loads(line) for line in rest.splitlines())
        except json.JSONDecodeError:
            raise AssertionError(f"the worker printed more than JSON lines: {rest!r}") from None
        return self.process.returncode

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


async def wait_status(client: AsyncClient, execution_id: str, statuses: set[int], timeout: float = 60):
    """Polls GetExecution until the execution reaches one of ``statuses``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        execution = (await client.get_execution(execution_id)).execution
        if execution.status in statuses:
            return execution
        if loop.time() > deadline:
            raise AssertionError(f"{execution_id} is still {job_pb2.ExecutionStatus.Name(execution.status)}: {execution}")
        await asyncio.sleep(0.1)


async def echo_job(client: AsyncClient) -> str:
    """A job for echo-go that runs only when triggered; returns its id."""
    job = cron_job("go-example-worker", "0 0 1 1 *", "UTC", handler="echo-go")
    return (await client.create_job(job)).job.id


async def trigger(client: AsyncClient, job_id: str, payload: bytes) -> str:
    return (await client.trigger_job(job_id, payload=payload, allow_overlap=True)).execution.id


async def check_echo_runs(worker: GoWorker, client: AsyncClient, job_id: str, payload: bytes) -> None:
    """One echo-go execution: started with delivery and attempt 1, finished, SUCCEEDED by the Go worker."""
    execution_id = await trigger(client, job_id, payload)
    started = await worker.event("started", execution_id)
    assert started == {"event": "started", "execution_id": execution_id, "delivery": 1, "attempt": 1}
    assert await worker.event("finished", execution_id) == {"event": "finished", "execution_id": execution_id}
    execution = await wait_status(client, execution_id, {SUCCEEDED, CANCELED, job_pb2.EXECUTION_STATUS_DEAD})
    assert execution.status == SUCCEEDED, execution
    [attempt] = execution.attempts
    assert not attempt.worker_id.startswith("dev-worker"), "the Go worker ran it, not the built-in one"
    assert execution.payload == payload


async def test_the_example_worker_runs_cancels_and_drains_echo_go_jobs(dev, tmp_path: Path) -> None:
    worker = await GoWorker.start(tmp_path, "--dev", dev["data"], env={"TICKWHEEL_SLOTS": "2"})
    try:
        async with AsyncClient(dev["address"], api_key=dev["api_key"]) as client:
            job_id = await echo_job(client)
            await check_echo_runs(worker, client, job_id, b'{"hello": "go", "n": [1, 2]}')

            # CancelExecution reaches the handler, which ends its wait at once.
            sleeping = await trigger(client, job_id, b'{"sleep_ms": 60000}')
            await worker.event("started", sleeping)
            await client.cancel_execution(sleeping, reason="by the test")
            assert await worker.event("canceled", sleeping, timeout=30) == {"event": "canceled", "execution_id": sleeping}
            await worker.event("finished", sleeping)
            assert (await wait_status(client, sleeping, {CANCELED, SUCCEEDED})).status == CANCELED

            # SIGTERM drains: the in-flight sleep finishes, its result is acked, exit 0.
            draining = await trigger(client, job_id, b'{"sleep_ms": 1500}')
            await worker.event("started", draining)
            assert await worker.terminate() == 0
            assert {"event": "finished", "execution_id": draining} in worker.events
            assert {"event": "canceled", "execution_id": draining} not in worker.events
            execution = await wait_status(client, draining, {SUCCEEDED, CANCELED}, timeout=10)
            assert execution.status == SUCCEEDED and execution.attempt == 1 and execution.delivery == 1
    finally:
        await worker.close()


async def test_the_example_worker_refuses_to_start_without_a_credential_and_ends_on_a_wrong_one(dev, tmp_path: Path) -> None:
    missing = await GoWorker.start(tmp_path, env={"TICKWHEEL_ADDRESS": dev["address"]})
    assert await asyncio.wait_for(missing.process.wait(), 120) == 2
    assert (await missing.process.stdout.read()) == b""
    assert "no worker credential" in missing.log.read_text()

    wrong = await GoWorker.start(tmp_path, env={"TICKWHEEL_ADDRESS": dev["address"], "TICKWHEEL_WORKER_CREDENTIAL": "tww_wrong"})
    assert await asyncio.wait_for(wrong.process.wait(), 120) == 1
    assert "UNAUTHENTICATED" in wrong.log.read_text()


async def test_the_example_worker_over_mutual_tls(pki, tmp_path: Path) -> None:
    tls = TlsConfig(str(pki["server.pem"]), str(pki["server.key"]), client_ca_file=str(pki["ca.pem"]))
    client_tls = TlsOptions.from_files(pki["ca.pem"], pki["client.pem"], pki["client.key"])
    mutual = ("--tls-ca", str(pki["ca.pem"]), "--tls-cert", str(pki["client.pem"]), "--tls-key", str(pki["client.key"]))
    async with running_server(f"sqlite:///{tmp_path / 'tls.db'}", tls=tls) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=client_tls) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            credential = (await admin.admin.issue_worker_credential(["acme"], handlers=["echo-go"])).credential.secret
        env = {"TICKWHEEL_ADDRESS": running.address, "TICKWHEEL_WORKER_CREDENTIAL": credential}
        worker = await GoWorker.start(tmp_path, *mutual, env=env)
        try:
            async with AsyncClient(running.address, api_key=api_key, tls=client_tls) as client:
                job_id = await echo_job(client)
                await check_echo_runs(worker, client, job_id, b"over mutual TLS")
            assert await worker.terminate() == 0
        finally:
            await worker.close()
