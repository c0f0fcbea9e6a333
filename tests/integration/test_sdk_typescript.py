"""The TypeScript SDK against a real server on PostgreSQL + etcd: its client
creates jobs and reads history, its worker runs handlers over the Pull
stream (on time, with heartbeats through a job longer than the heartbeat
timeout, and a retry after a thrown error), and its errors carry the status
code and the field violations.

The SDK is compiled once per module (``npm run build`` in sdk/typescript,
whose packages ``scripts/install.sh`` installs with ``npm ci``); each
scenario is a node process (``test/integration/scenarios.ts``) that prints
one JSON object, which the test asserts on.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, execution_pb2, job_pb2

from tests.support.server import REPO, running_server
from tickwheel import AsyncClient, TlsOptions
from tickwheel_server.config import TlsConfig

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

SDK = REPO / "sdk" / "typescript"
SCENARIOS = SDK / "dist" / "test" / "integration" / "scenarios.js"
HEARTBEAT_INTERVAL = 0.2
HEARTBEAT_TIMEOUT = 1.0
SCENARIO_TIMEOUT = 120.0


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name} is not on PATH: run scripts/install.sh (it installs Node.js and npm)")
    return path


@pytest.fixture(scope="module")
def built_sdk() -> Path:
    """Compile the SDK, its examples and its test programs with tsc --strict."""
    if not (SDK / "node_modules" / ".bin" / "tsc").exists():
        raise AssertionError("sdk/typescript/node_modules is missing: run scripts/install.sh (npm ci)")
    result = subprocess.run([_tool("npm"), "run", "build"], cwd=SDK, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"npm run build failed:\n{result.stdout}\n{result.stderr}"
    assert SCENARIOS.exists()
    return SDK


@pytest.fixture
async def cluster(postgres_url: str, etcd_endpoint: str):
    """A real server with a short heartbeat timeout, a tenant and a worker credential."""
    async with running_server(
        postgres_url, etcd_endpoint, heartbeat_interval=HEARTBEAT_INTERVAL, heartbeat_timeout=HEARTBEAT_TIMEOUT
    ) as running:
        async with grpc.aio.insecure_channel(running.address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            tenant = await admin.CreateTenant(
                admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme")), metadata=running.admin_metadata()
            )
            credential = await admin.IssueWorkerCredential(
                admin_pb2.IssueWorkerCredentialRequest(tenants=["acme"]), metadata=running.admin_metadata()
            )
        yield running, {
            "address": running.address,
            "apiKey": tenant.api_key.secret,
            "workerCredential": credential.credential.secret,
        }


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate (openssl)."""
    _tool("openssl")
    folder = tmp_path_factory.mktemp("ts-pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(folder, "req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ts-ca",
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


async def scenario(name: str, config: dict) -> dict:
    """Run one scenario in node (the server keeps serving in this event loop meanwhile)."""
    process = await asyncio.create_subprocess_exec(
        _tool("node"), str(SCENARIOS), name, json.dumps(config),
        cwd=SDK, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NODE_OPTIONS": ""},
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), SCENARIO_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"scenario {name} did not finish within {SCENARIO_TIMEOUT:g} s") from None
    lines = stdout.decode().strip().splitlines()
    assert lines, f"scenario {name} printed nothing (exit {process.returncode}):\n{stderr.decode()}"
    output = json.loads(lines[-1])
    assert process.returncode == 0 and "error" not in output, (
        f"scenario {name} failed (exit {process.returncode}): {output.get('error', output)}\n{stderr.decode()}"
    )
    return output


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def test_typescript_unit_tests_pass(built_sdk: Path) -> None:
    """The SDK's own tests (node --test): retries, errors, builders, and the worker's
    protocol against a scripted server."""
    result = subprocess.run(
        [_tool("node"), "--test", "dist/test/unit/"], cwd=built_sdk, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert "# fail 0" in result.stdout


async def test_a_one_off_handler_job_runs_in_the_typescript_worker_and_its_history_reads_back(built_sdk, cluster) -> None:
    _, config = cluster
    out = await scenario("run-and-history", {**config, "leadSeconds": 3})
    [execution] = out["executions"]
    assert execution["id"] == f"{out['jobId']}:{datetime.fromisoformat(out['onceAt'].replace('Z', '+00:00')).strftime('%Y-%m-%dT%H:%M:%S.%f')}Z"
    assert execution["status"] == "SUCCEEDED"
    assert (execution["attempt"], execution["delivery"]) == (1, 1)
    [attempt] = execution["attempts"]
    assert attempt["status"] == execution_pb2.ATTEMPT_STATUS_SUCCEEDED and attempt["workerId"] == "ts-run"
    [invocation] = out["invocations"]
    assert invocation["idempotencyKey"] == invocation["executionId"] == execution["id"]
    assert invocation["jobId"] == out["jobId"] and invocation["payload"] == "hello from typescript"
    assert (invocation["attempt"], invocation["delivery"]) == (1, 1)
    assert invocation["nominalAt"] == out["onceAt"]
    assert invocation["startedAt"] >= _ms(out["onceAt"]), "never early"
    assert out["created"] is True
    assert out["jobState"] == job_pb2.JOB_STATE_COMPLETED and out["runCount"] == 1


async def test_a_job_longer_than_the_heartbeat_timeout_heartbeats_and_completes_once(built_sdk, cluster) -> None:
    running, config = cluster
    run_ms = 3000
    assert run_ms / 1000 > 2 * HEARTBEAT_TIMEOUT, "the job must outlive the heartbeat timeout"
    # The worker's heartbeats as the server sees them: (wall time, its last-message mark) at each change.
    seen: list[tuple[float, float]] = []
    done = asyncio.Event()

    async def watch() -> None:
        while not done.is_set():
            for connection in running.server.connections.all():
                if connection.worker_id == "ts-heartbeat" and (not seen or seen[-1][1] != connection.last_message):
                    seen.append((time.time() * 1000, connection.last_message))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        out = await scenario("heartbeat", {**config, "leadSeconds": 2, "runMs": run_ms, "progressEveryMs": 200})
    finally:
        done.set()
        await watcher
    assert len(out["invocations"]) == 1, f"run more than once, so not kept alive by its heartbeats: {out}"
    [invocation] = out["invocations"]
    assert invocation["aborted"] is False
    assert invocation["progressReports"] >= 10
    assert invocation["endedAt"] - invocation["startedAt"] >= run_ms
    [execution] = out["executions"]
    assert execution["status"] == "SUCCEEDED"
    assert (execution["attempt"], execution["delivery"], execution["reapCount"]) == (1, 1, 0)
    assert [a["status"] for a in execution["attempts"]] == [execution_pb2.ATTEMPT_STATUS_SUCCEEDED]
    during = [at for at, _ in seen if invocation["startedAt"] <= at <= invocation["endedAt"]]
    assert len(during) >= 3, f"the server saw {len(during)} worker heartbeats during the {run_ms} ms run: {seen}"


async def test_a_handler_that_throws_on_attempt_1_succeeds_on_attempt_2(built_sdk, cluster) -> None:
    _, config = cluster
    out = await scenario("retry", {**config, "leadSeconds": 2})
    assert [(i["attempt"], i["executionId"]) for i in out["invocations"]] == [
        (1, out["executions"][0]["id"]),
        (2, out["executions"][0]["id"]),
    ]
    [execution] = out["executions"]
    assert execution["status"] == "SUCCEEDED" and execution["attempt"] == 2
    first, second = execution["attempts"]
    assert first["status"] == execution_pb2.ATTEMPT_STATUS_FAILED
    assert first["error"] == "Error: first attempt fails on purpose"
    assert second["status"] == execution_pb2.ATTEMPT_STATUS_SUCCEEDED
    assert out["runCount"] == 1


async def test_a_permanent_error_dead_letters_after_one_attempt(built_sdk, cluster) -> None:
    _, config = cluster
    out = await scenario("permanent", {**config, "leadSeconds": 2})
    assert len(out["invocations"]) == 1
    [execution] = out["executions"]
    assert execution["status"] == "DEAD"
    assert [a["error"] for a in execution["attempts"]] == ["the payload can never work"]
    assert "permanent" in execution["deadReason"]


async def test_client_and_worker_over_mutual_tls(built_sdk, postgres_url, etcd_endpoint, pki) -> None:
    tls = TlsConfig(str(pki["server.pem"]), str(pki["server.key"]), client_ca_file=str(pki["ca.pem"]))
    client_tls = TlsOptions.from_files(pki["ca.pem"], pki["client.pem"], pki["client.key"])
    async with running_server(postgres_url, etcd_endpoint, tls=tls) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=client_tls) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            secret = (await admin.admin.issue_worker_credential(["acme"])).credential.secret
        out = await scenario("tls", {
            "address": running.address, "apiKey": api_key, "workerCredential": secret, "leadSeconds": 2,
            "tls": {"ca": str(pki["ca.pem"]), "cert": str(pki["client.pem"]), "key": str(pki["client.key"])},
        })  # fmt: skip
    [execution] = out["executions"]
    assert execution["status"] == "SUCCEEDED" and execution["attempts"][0]["workerId"] == "ts-tls"
    assert len(out["invocations"]) == 1
    assert out["refusals"] == {"withoutCertificate": "UNAVAILABLE", "plaintext": "UNAVAILABLE"}


async def test_client_errors_carry_the_code_and_the_field(built_sdk, cluster) -> None:
    _, config = cluster
    wrong = await scenario("wrong-key", config)
    assert wrong["codeName"] == "UNAUTHENTICATED" and wrong["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]
    invalid = await scenario("invalid-cron", config)
    assert invalid["codeName"] == "INVALID_ARGUMENT"
    assert [v["field"] for v in invalid["fieldViolations"]] == ["job.schedule.cron.expression"]
    assert "61" in invalid["fieldViolations"][0]["description"]
    assert invalid["message"].startswith("INVALID_ARGUMENT: job.schedule.cron.expression: ")
    assert invalid["jobsAfter"] == 0, "a rejected job writes nothing"


async def test_create_jobs_splits_a_batch_keeps_the_order_and_is_idempotent_per_job(built_sdk, cluster) -> None:
    _, config = cluster
    out = await scenario("batch", {**config, "count": 1001, "badIndex": 1000})
    first, again = out["first"], out["again"]
    assert [r["requestId"] for r in first] == [f"ts-batch-{i}" for i in range(1001)]
    assert all(r["created"] and r["name"] == f"batch-{i}" for i, r in enumerate(first[:1000]))
    bad = first[1000]
    assert bad["codeName"] == "INVALID_ARGUMENT", bad
    assert [v["field"] for v in bad["fieldViolations"]] == ["job.schedule.cron.expression"]
    assert "jobId" not in bad
    assert len({r["jobId"] for r in first[:1000]}) == 1000
    # The same request ids again: the jobs already created, none twice; the bad one refused again.
    assert [(r["jobId"], r["created"]) for r in again[:1000]] == [(r["jobId"], False) for r in first[:1000]]
    assert again[1000]["codeName"] == "INVALID_ARGUMENT"
    assert out["listed"] == 1000


async def test_update_jobs_and_delete_jobs_answer_each_item(built_sdk, cluster) -> None:
    _, config = cluster
    out = await scenario("batchChanges", config)
    ids = out["ids"]
    assert out["updated"][:3] == [{"name": f"renamed-{job_id}", "version": 2} for job_id in ids]
    assert out["updated"][3]["codeName"] == "FAILED_PRECONDITION"
    assert out["deleted"][0] == {"canceled": 0}
    assert [d["codeName"] for d in out["deleted"][1:]] == ["NOT_FOUND", "NOT_FOUND"]
    assert out["left"] == sorted(f"renamed-{job_id}" for job_id in (ids[0], ids[2]))


async def test_preview_of_an_unsaved_cron_job_in_a_zone(built_sdk, cluster) -> None:
    _, config = cluster
    out = await scenario("preview", config)
    assert [f["localTime"] for f in out["fires"]] == [
        "2027-03-27T02:30:00+00:00",
        "2027-03-28T02:30:00+01:00",
        "2027-03-29T02:30:00+01:00",
    ]
    assert out["tzdataVersion"]


async def test_the_examples_run_a_job_in_the_example_worker(built_sdk, cluster) -> None:
    """examples/worker/run (the echo-ts worker) serves the job that
    create-and-history.js creates, and SIGTERM stops it cleanly."""
    _, config = cluster
    env = {**os.environ, "NODE_OPTIONS": "", "TICKWHEEL_ADDRESS": config["address"]}
    worker = await asyncio.create_subprocess_exec(
        str(SDK / "examples" / "worker" / "run"), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**env, "TICKWHEEL_WORKER_CREDENTIAL": config["workerCredential"]},
    )
    try:
        banner = (await asyncio.wait_for(worker.stderr.readline(), 120)).decode()
        assert "serving echo-ts" in banner, banner
        example = await asyncio.create_subprocess_exec(
            _tool("node"), "dist/examples/create-and-history.js", cwd=SDK,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**env, "TICKWHEEL_API_KEY": config["apiKey"], "TICKWHEEL_HANDLER": "echo-ts"},
        )
        stdout, stderr = await asyncio.wait_for(example.communicate(), SCENARIO_TIMEOUT)
        text = stdout.decode()
        assert example.returncode == 0, text + stderr.decode()
        assert "next runs at 20" in text
        assert "SUCCEEDED after 1 attempt(s)" in text, text
        worker_id = banner.split()[1]
        assert f"attempt 1 (delivery 1) on {worker_id}" in text, text
    finally:
        if worker.returncode is None:
            worker.terminate()
        events, errors = await asyncio.wait_for(worker.communicate(), 30)
    assert worker.returncode == 0, errors.decode()
    assert "worker stopped" in errors.decode()
    assert [json.loads(line)["event"] for line in events.decode().splitlines()] == ["started", "finished"]
