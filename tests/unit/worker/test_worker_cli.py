"""``tickwheel worker``: arguments, --dev, --handlers, and a real process stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import grpc
import pytest

from tickwheel.v1 import worker_pb2
from tickwheel_worker.cli import UsageError, build_parser, config_from_args, load_handlers, worker_main
from tickwheel_worker.handlers import HandlerRegistry
from tests.unit.worker.worker_fakes import WAIT, FakeWorkerService, make_assignment

REPO = Path(__file__).resolve().parents[3]


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return config_from_args(build_parser().parse_args(list(argv)))


def test_dev_folder_supplies_address_and_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TICKWHEEL_ADDRESS", raising=False)
    monkeypatch.delenv("TICKWHEEL_WORKER_CREDENTIAL", raising=False)
    (tmp_path / "dev-credentials.json").write_text(json.dumps(
        {"address": "127.0.0.1:50051", "tenant": "dev", "api_key": "k", "worker_credential": "wc"}
    ))
    config = parse("--dev", str(tmp_path), "--slots", "3", "--no-http",
                   "--handlers", "tickwheel_worker.handlers:register_builtins")
    assert (config.address, config.credential, config.slots, config.http) == ("127.0.0.1:50051", "wc", 3, False)
    assert config.handlers.names() == ["echo"]
    assert parse("--dev", str(tmp_path), "--address", "other:1").address == "other:1"


def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TICKWHEEL_ADDRESS", raising=False)
    monkeypatch.delenv("TICKWHEEL_WORKER_CREDENTIAL", raising=False)
    cases = [
        (["--address", "a:1"], "no worker credential"),
        (["--dev", str(tmp_path)], "dev-credentials.json not found"),
        (["--address", "a:1", "--credential", "c", "--no-http"], "nothing to run"),
        (["--address", "a:1", "--credential", "c", "--slots", "0"], "slots"),
        (["--address", "a:1", "--credential", "c", "--handlers", "no_such_module_xyz:r"], "cannot import"),
    ]
    for argv, message in cases:
        assert worker_main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_handlers_accepts_a_registry_a_worker_or_a_callable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_jobs.py").write_text(textwrap.dedent('''
        from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig

        registry = HandlerRegistry()

        @registry.handler("a")
        def a(ctx): return "a"

        worker = Worker(WorkerConfig(address="ignored:1", credential="ignored"))

        @worker.handler("b")
        async def b(ctx): return "b"

        def setup(registry):
            registry.register("c", lambda ctx: "c")

        class nested:
            registry = registry

        not_handlers = 5
    '''))
    monkeypatch.chdir(tmp_path)  # the current directory is importable
    monkeypatch.setattr(sys, "path", list(sys.path))
    registry = HandlerRegistry()
    for spec in ["my_jobs:registry", "my_jobs:worker", "my_jobs:setup"]:
        load_handlers(spec, registry)
    assert registry.names() == ["a", "b", "c"]
    with pytest.raises(UsageError, match="already registered"):
        load_handlers("my_jobs:nested.registry", registry)
    with pytest.raises(UsageError, match="expected a HandlerRegistry"):
        load_handlers("my_jobs:not_handlers", registry)
    with pytest.raises(UsageError, match="no attribute"):
        load_handlers("my_jobs:missing", registry)
    with pytest.raises(UsageError, match="module:object"):
        load_handlers("my_jobs", registry)


async def test_a_worker_process_serves_and_stops_gracefully_on_sigterm(fake_server: FakeWorkerService) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "workers"), str(REPO / "server"),
                                                        str(REPO / "sdk" / "python")])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tickwheel_worker.cli",
        "--address", fake_server.address, "--credential", "proc-secret", "--slots", "3",
        "--handlers", "tickwheel_worker.handlers:register_builtins", "--worker-id", "proc-1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    try:
        stream = await fake_server.stream(0, timeout=15)
        assert (stream.hello.worker_id, list(stream.hello.handlers), stream.hello.slots) == ("proc-1", ["echo"], 3)
        assert stream.metadata["authorization"] == "Bearer proc-secret"
        await stream.assign(make_assignment("e:proc", payload=b"ping"))
        result = await stream.wait_result("e:proc")
        assert (result.outcome, result.output) == (worker_pb2.RESULT_OUTCOME_SUCCEEDED, b"ping")

        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), WAIT)
        assert process.returncode == 0, stderr.decode()
        assert b"SIGTERM" in stderr
        await asyncio.wait_for(stream.ended.wait(), WAIT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_the_credential_comes_from_a_file_the_environment_or_a_flag_in_that_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKWHEEL_WORKER_CREDENTIAL", raising=False)
    secret = tmp_path / "credential"
    secret.write_text("tww_from_file\n")
    assert parse("--address", "a:1", "--credential-file", str(secret)).credential == "tww_from_file"
    monkeypatch.setenv("TICKWHEEL_WORKER_CREDENTIAL", "tww_from_env")
    assert parse("--address", "a:1").credential == "tww_from_env"
    assert parse("--address", "a:1", "--credential-file", str(secret)).credential == "tww_from_file"
    assert parse("--address", "a:1", "--credential", "tww_flag", "--credential-file", str(secret)).credential == "tww_flag"


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read"), ("", "is empty"), ("\n  \n", "is empty"), ("a\nb\n", "more than one line"),
     (b"\xff\xfe", "not UTF-8"), ("x" * 70_000, "larger than")],
)
def test_a_bad_credential_file_is_a_usage_error_naming_the_option(tmp_path: Path, content, message) -> None:
    path = tmp_path / "credential"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=f"--credential-file: .*{message}"):
        parse("--address", "a:1", "--credential-file", str(path))


async def test_a_credential_given_as_a_flag_warns_and_a_file_does_not(
    fake_server: FakeWorkerService, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "workers"), str(REPO / "server"),
                                                        str(REPO / "sdk" / "python")])}
    env.pop("TICKWHEEL_WORKER_CREDENTIAL", None)
    secret = tmp_path / "credential"
    secret.write_text("file-secret\n")
    outputs = []
    for index, source in enumerate((["--credential", "flag-secret"], ["--credential-file", str(secret)])):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tickwheel_worker.cli", "--address", fake_server.address, *source,
            "--handlers", "tickwheel_worker.handlers:register_builtins", "--no-http", "--worker-id", f"w{index}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )
        try:
            stream = await fake_server.stream(index, timeout=15)
            outputs.append(stream.metadata["authorization"])
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), WAIT)
            outputs.append(stderr.decode())
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    flag_auth, flag_log, file_auth, file_log = outputs
    assert (flag_auth, file_auth) == ("Bearer flag-secret", "Bearer file-secret")
    assert "--credential on the command line is visible to every local user" in flag_log
    assert "--credential-file FILE or TICKWHEEL_WORKER_CREDENTIAL" in flag_log
    assert "visible to every local user" not in file_log


async def test_a_refused_credential_is_said_once_and_exits_1(fake_server: FakeWorkerService, tmp_path: Path) -> None:
    """The worker's ERROR line says why; the CLI adds no second copy of it."""
    fake_server.reject_status = grpc.StatusCode.UNAUTHENTICATED
    fake_server.reject_details = "credential revoked"
    secret = tmp_path / "credential"
    secret.write_text("revoked-secret\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "workers"), str(REPO / "server"),
                                                        str(REPO / "sdk" / "python")])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tickwheel_worker.cli", "--address", fake_server.address, "--credential-file",
        str(secret), "--handlers", "tickwheel_worker.handlers:register_builtins", "--no-http",
        "--worker-id", "refused-1", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = stderr.decode()
    assert process.returncode == 1, text
    assert text.count("UNAUTHENTICATED: credential revoked") == 1, text
    assert "ERROR" in text and "refused the worker refused-1" in text
    assert "revoked-secret" not in text
