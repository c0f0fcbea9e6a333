"""TLS and mutual TLS on the server and its clients (issue 6).

A throwaway CA, a server certificate (for ``localhost`` and 127.0.0.1) and
client certificates are made with the ``openssl`` command for the module; a
second CA signs a client certificate the server must not accept. Real
servers (in process, and a `tickwheel server` child process configured by
its flags) round-trip with the Python SDK (sync and async), the tenant CLI,
grpcurl and a worker; a plaintext client, a client that does not trust the
server, and under mutual TLS a client without a certificate or with one
from another CA are refused.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tickwheel import AsyncClient, Client, TickwheelError, TlsOptions, builders
from tickwheel.v1 import job_pb2

from tests.integration.test_ssrf import wait_finished
from tests.support.server import running_server, start_server_process
from tickwheel_server.cli.main import main as tickwheel_cli
from tickwheel_server.app import TickwheelServer
from tickwheel_server.config import ConfigError, ServerConfig, TlsConfig, add_server_arguments, load_server_config
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig, register_builtins
from tickwheel_worker.cli import UsageError, build_parser, config_from_args

GRPCURL = str(Path(sys.executable).with_name("grpcurl"))
WAIT = 20.0


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path
    """A client certificate signed by another CA."""
    rogue_key: Path

    def tls(self, *, client: bool = False, rogue: bool = False) -> TlsOptions:
        if rogue:
            return TlsOptions.from_files(self.ca, self.rogue_cert, self.rogue_key)
        if client:
            return TlsOptions.from_files(self.ca, self.client_cert, self.client_key)
        return TlsOptions.from_files(self.ca)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(folder: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip


def _leaf(folder: Path, name: str, ca: str, extensions: str) -> None:
    (folder / f"{name}.ext").write_text(extensions)
    _openssl(
        "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=folder,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
        "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=folder,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests need the openssl command")
    folder = tmp_path_factory.mktemp("pki")
    _ca(folder, "ca")
    _ca(folder, "rogue-ca")
    _leaf(folder, "server", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _leaf(folder, "client", "ca", "extendedKeyUsage=clientAuth\n")
    _leaf(folder, "rogue", "rogue-ca", "extendedKeyUsage=clientAuth\n")
    return Pki(
        ca=folder / "ca.pem", server_cert=folder / "server.pem", server_key=folder / "server.key",
        client_cert=folder / "client.pem", client_key=folder / "client.key",
        rogue_cert=folder / "rogue.pem", rogue_key=folder / "rogue.key",
    )  # fmt: skip


def server_tls(pki: Pki, *, mutual: bool) -> TlsConfig:
    return TlsConfig(str(pki.server_cert), str(pki.server_key), str(pki.ca) if mutual else "")


def refused(call) -> TickwheelError:
    """The error of a call the server must refuse at the TLS handshake."""
    with pytest.raises(TickwheelError) as error:
        call()
    assert error.value.code_name == "UNAVAILABLE", error.value
    return error.value


async def refused_async(call) -> TickwheelError:
    with pytest.raises(TickwheelError) as error:
        await call()
    assert error.value.code_name == "UNAVAILABLE", error.value
    return error.value


def one_off(name: str) -> job_pb2.Job:
    return builders.once_job(name, datetime.now(timezone.utc) + timedelta(hours=1), handler="echo")


# -- a server with TLS -------------------------------------------------------


async def test_tls_round_trip_with_the_async_client_and_refusals(tmp_path, pki) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}", tls=server_tls(pki, mutual=False)) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=pki.tls()) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
        async with AsyncClient(running.address, api_key, tls=pki.tls()) as client:
            job = (await client.create_job(one_off("over-tls"))).job
            assert (await client.get_job(job.id)).job.name == "over-tls"

        async with AsyncClient(running.address, api_key, retries=0, timeout=5) as plaintext:
            await refused_async(lambda: plaintext.get_job(job.id))
        # System roots do not include the test CA.
        async with AsyncClient(running.address, api_key, tls=TlsOptions(), retries=0, timeout=5) as untrusting:
            await refused_async(lambda: untrusting.get_job(job.id))


def test_tls_round_trip_with_the_sync_client_against_tickwheel_server_flags(tmp_path, pki) -> None:
    server = start_server_process(
        tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}", "--etcd", "memory", "--migrate",
        "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
    )  # fmt: skip
    try:
        with Client(server.address, admin_token=server.admin_token, tls=pki.tls()) as admin:
            api_key = admin.admin.create_tenant("acme").api_key.secret
        with Client(server.address, api_key, tls=pki.tls()) as client:
            job = client.create_job(one_off("over-tls")).job
            assert [j.id for j in client.list_jobs().jobs] == [job.id]
        with Client(server.address, api_key, retries=0, timeout=5) as plaintext:
            refused(lambda: plaintext.list_jobs())
    finally:
        assert server.terminate() == 0, server.log()


async def test_a_worker_connects_over_tls_and_runs_a_job(tmp_path, pki) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}", tls=server_tls(pki, mutual=False)) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=pki.tls()) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            secret = (await admin.admin.issue_worker_credential(["acme"])).credential.secret
        registry = HandlerRegistry()
        register_builtins(registry)
        worker = Worker(WorkerConfig(address=running.address, credential=secret, handlers=registry, http=False,
                                     root_certificates=pki.ca.read_bytes()))  # fmt: skip
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(worker.connected.wait(), WAIT)
            async with AsyncClient(running.address, api_key, tls=pki.tls()) as client:
                job = builders.once_job("echo", datetime.now(timezone.utc), handler="echo", payload=b"hi")
                job_id = (await client.create_job(job)).job.id
                deadline = asyncio.get_running_loop().time() + WAIT
                statuses: list[int] = []
                while job_pb2.EXECUTION_STATUS_SUCCEEDED not in statuses:
                    assert asyncio.get_running_loop().time() < deadline, statuses
                    await asyncio.sleep(0.1)
                    statuses = [e.status for e in (await client.list_executions(job_id)).executions]
        finally:
            await worker.stop(1.0)
            await asyncio.gather(task, return_exceptions=True)


# -- mutual TLS ----------------------------------------------------------------


async def test_mutual_tls_round_trip_and_clients_without_a_good_certificate_are_refused(tmp_path, pki) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}", tls=server_tls(pki, mutual=True)) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=pki.tls(client=True)) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
        async with AsyncClient(running.address, api_key, tls=pki.tls(client=True)) as client:
            job = (await client.create_job(one_off("mutual"))).job
            assert (await client.get_job(job.id)).job.id == job.id

        for tls in (pki.tls(), pki.tls(rogue=True), None):  # no certificate, another CA's, plaintext
            async with AsyncClient(running.address, api_key, tls=tls, retries=0, timeout=5) as other:
                await refused_async(lambda: other.get_job(job.id))


async def test_health_and_reflection_work_over_mutual_tls(tmp_path, pki) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}", tls=server_tls(pki, mutual=True)) as running:
        credentials = pki.tls(client=True).channel_credentials()
        async with grpc.aio.secure_channel(running.address, credentials) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=WAIT)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        tls_flags = ["-cacert", str(pki.ca), "-cert", str(pki.client_cert), "-key", str(pki.client_key)]
        listed = await asyncio.to_thread(
            subprocess.run, [GRPCURL, *tls_flags, running.address, "list"], capture_output=True, text=True, timeout=WAIT
        )
        assert listed.returncode == 0, listed.stderr
        assert {"tickwheel.v1.SchedulerService", "grpc.health.v1.Health"} <= set(listed.stdout.split())
        without_cert = await asyncio.to_thread(
            subprocess.run, [GRPCURL, "-cacert", str(pki.ca), running.address, "list"],
            capture_output=True, text=True, timeout=WAIT,
        )  # fmt: skip
        assert without_cert.returncode != 0


def test_the_tenant_cli_over_mutual_tls(tmp_path, pki, capsys, monkeypatch) -> None:
    for name in ("TICKWHEEL_ADDRESS", "TICKWHEEL_API_KEY", "TICKWHEEL_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    server = start_server_process(
        tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}", "--etcd", "memory", "--migrate",
        "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key), "--tls-client-ca", str(pki.ca),
    )  # fmt: skip
    try:
        tls = ["--ca-cert", str(pki.ca), "--client-cert", str(pki.client_cert), "--client-key", str(pki.client_key)]
        base = ["--address", server.address, "--json", "--timeout", "5"]
        admin = ["--admin-token", server.admin_token, "admin", "tenant"]
        assert tickwheel_cli([*base, *tls, *admin, "create", "acme"]) == 0
        created = capsys.readouterr().out
        assert '"acme"' in created
        assert tickwheel_cli([*base, "--ca-cert", str(pki.ca), *admin, "list"]) == 1  # no client certificate
        assert "UNAVAILABLE" in capsys.readouterr().err
    finally:
        assert server.terminate() == 0, server.log()


# -- configuration -----------------------------------------------------------


def server_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(["--store", "sqlite://", "--etcd", "memory", *argv])


ENV = {"TICKWHEEL_ADMIN_TOKEN": "t" * 20}


def test_server_tls_from_flags_environment_and_file(tmp_path, pki) -> None:
    assert load_server_config(server_args(), ENV).tls is None
    flags = load_server_config(server_args("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)), ENV)
    assert flags.tls == TlsConfig(str(pki.server_cert), str(pki.server_key)) and not flags.tls.mutual
    env = {**ENV, "TICKWHEEL_TLS_CERT": str(pki.server_cert), "TICKWHEEL_TLS_KEY": str(pki.server_key),
           "TICKWHEEL_TLS_CLIENT_CA": str(pki.ca)}  # fmt: skip
    assert load_server_config(server_args(), env).tls.mutual
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text(f'[tls]\ncert_file = "{pki.server_cert}"\nkey_file = "{pki.server_key}"\n')
    from_file = load_server_config(server_args("--config", str(config_file)), ENV)
    assert from_file.tls == TlsConfig(str(pki.server_cert), str(pki.server_key))
    # A flag completes the file's settings: the client CA turns on mutual TLS.
    assert load_server_config(server_args("--config", str(config_file), "--tls-client-ca", str(pki.ca)), ENV).tls.mutual


def test_bad_server_tls_settings_stop_the_server_naming_them(tmp_path, pki) -> None:
    with pytest.raises(ConfigError, match="go together"):
        load_server_config(server_args("--tls-cert", str(pki.server_cert)), ENV)
    with pytest.raises(ConfigError, match="go together"):
        load_server_config(server_args("--tls-client-ca", str(pki.ca)), ENV)
    with pytest.raises(ConfigError, match="tls.cert_file/tls.key_file"):  # the key of another certificate
        load_server_config(server_args("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.client_key)), ENV)
    with pytest.raises(ConfigError, match=r"tls.key_file \(--tls-key\): .* is not a readable file"):
        load_server_config(server_args("--tls-cert", str(pki.server_cert), "--tls-key", str(tmp_path / "nope")), ENV)
    with pytest.raises(ConfigError, match="tls.client_ca_file"):
        load_server_config(
            server_args("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
                        "--tls-client-ca", str(pki.server_key)),
            ENV,
        )  # fmt: skip
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text('[tls]\ncertificate = "server.pem"\n')
    with pytest.raises(ConfigError, match=r"unknown settings in \[tls\]: \['certificate'\]"):
        load_server_config(server_args("--config", str(config_file)), ENV)


def test_tickwheel_worker_tls_flags(pki, monkeypatch) -> None:
    monkeypatch.delenv("TICKWHEEL_ALLOW_TARGET_NETWORKS", raising=False)
    common = ["--address", "127.0.0.1:1", "--credential", "c"]
    config = config_from_args(build_parser().parse_args(
        [*common, "--tls-ca", str(pki.ca), "--tls-cert", str(pki.client_cert), "--tls-key", str(pki.client_key)]
    ))  # fmt: skip
    assert config.tls and config.root_certificates == pki.ca.read_bytes()
    assert (config.certificate_chain, config.private_key) == (pki.client_cert.read_bytes(), pki.client_key.read_bytes())
    with pytest.raises(UsageError, match="--tls-cert and --tls-key go together"):
        config_from_args(build_parser().parse_args([*common, "--tls-cert", str(pki.client_cert)]))
    with pytest.raises(UsageError, match="--tls-ca: cannot read"):
        config_from_args(build_parser().parse_args([*common, "--tls-ca", "/nonexistent/ca.pem"]))
    with pytest.raises(UsageError, match="PEM"):
        config_from_args(build_parser().parse_args([*common, "--tls-ca", str(pki.server_cert.with_suffix(".ext"))]))


def test_tls_options_refuse_what_is_not_pem(pki) -> None:
    with pytest.raises(ValueError, match="root_certificates: not PEM"):
        TlsOptions(root_certificates=b"not a certificate")
    with pytest.raises(ValueError, match="private_key: not PEM"):
        TlsOptions(certificate_chain=pki.client_cert.read_bytes(), private_key=pki.client_cert.read_bytes())
    assert "PRIVATE" not in repr(pki.tls(client=True))


async def test_a_worker_connects_over_mutual_tls(tmp_path, pki) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}", tls=server_tls(pki, mutual=True)) as running:
        async with AsyncClient(running.address, admin_token=running.admin_token, tls=pki.tls(client=True)) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            secret = (await admin.admin.issue_worker_credential(["acme"])).credential.secret
        registry = HandlerRegistry()
        register_builtins(registry)
        worker = Worker(WorkerConfig(
            address=running.address, credential=secret, handlers=registry, http=False,
            root_certificates=pki.ca.read_bytes(), certificate_chain=pki.client_cert.read_bytes(),
            private_key=pki.client_key.read_bytes(),
        ))
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(worker.connected.wait(), WAIT)
            async with AsyncClient(running.address, api_key, tls=pki.tls(client=True)) as client:
                job = builders.once_job("echo", datetime.now(timezone.utc), handler="echo")
                execution = await wait_finished(client, (await client.create_job(job)).job.id)
            assert execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED
        finally:
            await worker.stop(1.0)
            await asyncio.gather(task, return_exceptions=True)


async def test_a_server_waiting_for_etcd_answers_health_over_its_tls_only(tmp_path, pki) -> None:
    """The placeholder a start serves while it waits (tickwheel_server/waiting.py)
    binds with the server's TLS: NOT_SERVING to a client with a good
    certificate, nothing to a plaintext one."""
    config = ServerConfig(
        store=f"sqlite:///{tmp_path / 'store.db'}", etcd="127.0.0.1:1", admin_token="twa_" + "x" * 32,
        listen="127.0.0.1:0", migrate=True, tls=server_tls(pki, mutual=True),
    )
    server = TickwheelServer(config)
    starting = asyncio.create_task(server.start())
    try:
        await asyncio.wait({starting, asyncio.ensure_future(server.waiting.wait())}, timeout=WAIT,
                           return_when=asyncio.FIRST_COMPLETED)
        assert not starting.done(), starting.exception()
        assert server.waiting_for == "etcd at 127.0.0.1:1"
        port = server.waiting_port
        address = f"127.0.0.1:{port}"
        credentials = pki.tls(client=True).channel_credentials()
        async with grpc.aio.secure_channel(address, credentials) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=WAIT)
            assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
        async with grpc.aio.insecure_channel(address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as plaintext:
                await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=WAIT)
            assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
    with socket.socket() as probe:  # the port was freed: a new listener takes it (past its closed connections)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        probe.listen()
