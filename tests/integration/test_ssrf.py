"""HTTP targets cannot reach internal addresses (issue 6, SSRF).

With the configuration of `tickwheel server` (nothing allow-listed):

* a URL naming a refused address is refused when the job is written, by a
  real `tickwheel server` process, with INVALID_ARGUMENT on
  `job.target.http.url`, and nothing is written;
* a host name that passes that check but resolves to a refused address is
  refused by the worker after resolution: the execution ends dead on its
  first attempt with an error naming the address and the rule, and the
  target never sees a request. A stub resolver stands in for DNS here
  (names under the reserved `.test` domain answered with internal
  addresses, as a hostile DNS server would); `localhost` is also resolved
  for real;
* a redirect is not followed to a refused address: the first hop is
  allow-listed, the address it redirects to is not, and nothing reaches it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tickwheel import AsyncClient, Client, TickwheelError, builders
from tickwheel.v1 import job_pb2, worker_pb2

from tests.support.server import running_server, start_server_process
from tickwheel_server.dev import run_dev
from tickwheel.shared.targets import DEFAULT_POLICY, LOOPBACK_NETWORKS, TargetPolicy
from tickwheel_worker import HandlerRegistry, Worker, WorkerConfig
from tickwheel_worker.http_target import HttpCall, build_request

WAIT = 20.0


class Recorder:
    """A real HTTP server on ``host`` that records every request: ``/hook``
    answers 200, ``/redirect`` answers 302 to ``location``."""

    def __init__(self, host: str = "127.0.0.1", location: str = "") -> None:
        self.requests: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.requests.append(self.path)
                if self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", location)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


NAMES = {
    "loopback.ssrf.test": ["127.0.0.1"],
    "v6-loopback.ssrf.test": ["::1"],
    "metadata.ssrf.test": ["169.254.169.254"],
    "ten.ssrf.test": ["10.1.2.3"],
    "home.ssrf.test": ["192.168.1.10"],
    "mapped.ssrf.test": ["::ffff:127.0.0.1"],
    "mixed.ssrf.test": ["10.0.0.1", "127.0.0.1"],
}


@pytest.fixture
def hostile_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names in NAMES resolve to internal addresses; everything else as usual."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0):  # noqa: A002
        if host not in NAMES:
            return real(host, port, family, type, proto, flags)
        answers = []
        for address in NAMES[host]:
            if ":" in address:
                answers.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, int(port), 0, 0)))
            else:
                answers.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port))))
        return answers

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


# -- write time: a real `tickwheel server` process ---------------------------

REFUSED_URLS = [
    ("http://127.0.0.1:8080/hook", "127.0.0.1 is loopback (127.0.0.0/8)"),
    ("http://[::1]:8080/hook", "::1 is loopback (::1/128)"),
    ("http://169.254.169.254/latest/meta-data/iam/", "169.254.169.254 is link-local"),
    ("http://10.0.0.8/hook", "10.0.0.8 is private (10.0.0.0/8)"),
    ("https://192.168.1.1/hook", "192.168.1.1 is private (192.168.0.0/16)"),
    ("http://[::ffff:169.254.169.254]/", "carries 169.254.169.254, which is link-local"),
    ("http://2130706433/", "127.0.0.1 is loopback"),
    ("http://[fd00::1]/", "fd00::1 is private"),
    ("http://0.0.0.0:9000/", "0.0.0.0 is unspecified"),
    ("http://localhost:8080/hook", "localhost always resolves to loopback"),
]


def test_tickwheel_server_refuses_internal_target_urls_when_a_job_is_written(tmp_path) -> None:
    server = start_server_process(
        tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}", "--etcd", "memory", "--migrate"
    )
    try:
        with Client(server.address, admin_token=server.admin_token) as admin:
            api_key = admin.admin.create_tenant("acme").api_key.secret
        at = datetime.now(timezone.utc) + timedelta(hours=1)
        with Client(server.address, api_key) as client:
            for url, reason in REFUSED_URLS:
                with pytest.raises(TickwheelError) as refused:
                    client.create_job(builders.once_job("hook", at, url=url))
                assert refused.value.code_name == "INVALID_ARGUMENT", url
                (violation,) = refused.value.field_violations
                assert violation.field == "job.target.http.url"
                assert reason in violation.description and "--allow-target-network" in violation.description, url

            job = client.create_job(builders.once_job("hook", at, url="https://example.com/hook")).job
            moved = job_pb2.Job(id=job.id, version=job.version, target=builders.http_target("http://169.254.169.254/"))
            with pytest.raises(TickwheelError) as refused:
                client.update_job(moved, update_mask=["target"])
            assert refused.value.code_name == "INVALID_ARGUMENT"
            assert [v.field for v in refused.value.field_violations] == ["job.target.http.url"]

            # Nothing was written: one job, unchanged.
            (stored,) = client.list_jobs().jobs
            assert (stored.id, stored.version) == (job.id, job.version)
            assert stored.target.http.url == "https://example.com/hook"
    finally:
        assert server.terminate() == 0, server.log()


# -- call time: a real server and worker -------------------------------------


async def wait_finished(client: AsyncClient, job_id: str):
    """The job's one execution once it succeeded or died."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        executions = (await client.list_executions(job_id)).executions
        finished = (job_pb2.EXECUTION_STATUS_SUCCEEDED, job_pb2.EXECUTION_STATUS_DEAD)
        done = [e for e in executions if e.status in finished]
        if done:
            return done[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"{job_id} did not finish: {executions}")


async def run_jobs(tmp_path, policy: Any, urls: list[str]) -> list:
    """Run one-off jobs calling ``urls`` on a server configured as `tickwheel
    server` is by default, with one worker using ``policy``; their executions."""
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as running:
        assert running.server.config.allow_target_networks == ()
        async with AsyncClient(running.address, admin_token=running.admin_token) as admin:
            api_key = (await admin.admin.create_tenant("acme")).api_key.secret
            worker_secret = (await admin.admin.issue_worker_credential(["acme"], http=True)).credential.secret
        worker = Worker(WorkerConfig(address=running.address, credential=worker_secret, handlers=HandlerRegistry(),
                                     slots=8, address_policy=policy))  # fmt: skip
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(worker.connected.wait(), WAIT)
            async with AsyncClient(running.address, api_key) as client:
                now = datetime.now(timezone.utc)
                jobs = [(await client.create_job(builders.once_job(f"hook-{i}", now, url=url))).job
                        for i, url in enumerate(urls)]  # fmt: skip
                return [await wait_finished(client, job.id) for job in jobs]
        finally:
            await worker.stop(1.0)
            await asyncio.gather(task, return_exceptions=True)


async def test_the_worker_refuses_names_that_resolve_to_internal_addresses(tmp_path, hostile_dns, recorder) -> None:
    port = recorder.port
    expected = {
        f"http://loopback.ssrf.test:{port}/hook": ["127.0.0.1 is loopback (127.0.0.0/8)"],
        f"http://v6-loopback.ssrf.test:{port}/hook": ["::1 is loopback (::1/128)"],
        "http://metadata.ssrf.test/latest/meta-data/": ["169.254.169.254 is link-local"],
        f"http://ten.ssrf.test:{port}/hook": ["10.1.2.3 is private (10.0.0.0/8)"],
        f"http://home.ssrf.test:{port}/hook": ["192.168.1.10 is private (192.168.0.0/16)"],
        f"http://mapped.ssrf.test:{port}/hook": ["::ffff:127.0.0.1 carries 127.0.0.1, which is loopback"],
        f"http://mixed.ssrf.test:{port}/hook": ["10.0.0.1 is private", "127.0.0.1 is loopback"],
    }
    executions = await run_jobs(tmp_path, DEFAULT_POLICY, list(expected))
    for (url, reasons), execution in zip(expected.items(), executions):
        # Dead on the first of five attempts: a refusal is a permanent failure.
        assert (execution.status, execution.attempt) == (job_pb2.EXECUTION_STATUS_DEAD, 1), url
        error = execution.attempts[0].error
        assert "target address policy refused every address of" in error, error
        for reason in reasons:
            assert reason in error, (url, error)
    assert recorder.requests == []


async def test_the_same_names_are_called_when_the_worker_allows_their_network(tmp_path, hostile_dns, recorder) -> None:
    # The control for the test above: the resolver stub and the target work.
    loopback = TargetPolicy.allowing(LOOPBACK_NETWORKS)
    urls = [f"http://loopback.ssrf.test:{recorder.port}/hook", f"http://mapped.ssrf.test:{recorder.port}/hook"]
    executions = await run_jobs(tmp_path, loopback, urls)
    assert [e.status for e in executions] == [job_pb2.EXECUTION_STATUS_SUCCEEDED] * 2
    assert recorder.requests == ["/hook", "/hook"]


async def test_a_redirect_is_not_followed_to_a_refused_address(tmp_path, hostile_dns) -> None:
    # The second hop listens on 127.0.0.2; the worker allows only 127.0.0.1,
    # where the first hop listens.
    second = Recorder(host="127.0.0.2")
    first = Recorder(location=f"http://127.0.0.2:{second.port}/hook")
    try:
        only_first = TargetPolicy.allowing(["127.0.0.1/32"])
        (execution,) = await run_jobs(tmp_path, only_first, [f"http://loopback.ssrf.test:{first.port}/redirect"])
        assert (execution.status, execution.attempt) == (job_pb2.EXECUTION_STATUS_DEAD, 1)
        error = execution.attempts[0].error
        assert f"302 Found: redirect to http://127.0.0.2:{second.port}/hook not followed" in error, error
        assert first.requests == ["/redirect"]
        assert second.requests == []
    finally:
        first.close()
        second.close()


def test_localhost_resolved_for_real_is_refused_with_its_addresses_named(recorder) -> None:
    request = build_request(
        job_pb2.HttpTarget(url=f"http://localhost:{recorder.port}/hook"), execution_id="job_1:x", attempt=1,
        delivery=1, scheduled_at="", traceparent="", payload=b"", user_agent="test",
    )  # fmt: skip
    addresses = {info[4][0] for info in socket.getaddrinfo("localhost", recorder.port, type=socket.SOCK_STREAM)}
    outcome = HttpCall(request, timeout=WAIT, address_policy=DEFAULT_POLICY).run()
    assert outcome.outcome == worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT
    for address in addresses:
        assert f"{address} is loopback" in outcome.error, outcome.error
    assert recorder.requests == []
    allowed = HttpCall(request, timeout=WAIT, address_policy=TargetPolicy.allowing(LOOPBACK_NETWORKS)).run()
    assert allowed.outcome == worker_pb2.RESULT_OUTCOME_SUCCEEDED and recorder.requests == ["/hook"]


def test_tickwheel_server_allow_list_lets_its_networks_be_written(tmp_path) -> None:
    server = start_server_process(
        tmp_path, "--store", f"sqlite:///{tmp_path / 'store.db'}", "--etcd", "memory", "--migrate",
        "--allow-target-network", "10.0.0.0/8",
    )  # fmt: skip
    try:
        with Client(server.address, admin_token=server.admin_token) as admin:
            api_key = admin.admin.create_tenant("acme").api_key.secret
        at = datetime.now(timezone.utc) + timedelta(hours=1)
        with Client(server.address, api_key) as client:
            assert client.create_job(builders.once_job("lan", at, url="http://10.0.0.8/hook")).job.id
            with pytest.raises(TickwheelError) as refused:
                client.create_job(builders.once_job("meta", at, url="http://169.254.169.254/"))
            assert [v.field for v in refused.value.field_violations] == ["job.target.http.url"]
    finally:
        assert server.terminate() == 0, server.log()


async def test_tickwheel_dev_calls_a_target_on_loopback(tmp_path, recorder) -> None:
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_dev("127.0.0.1:0", tmp_path, ready=ready, stop=stop))
    try:
        await asyncio.wait_for(ready.wait(), WAIT)
        credentials = json.loads((tmp_path / "dev-credentials.json").read_text())
        async with AsyncClient(credentials["address"], credentials["api_key"]) as client:
            job = builders.once_job("local", datetime.now(timezone.utc), url=f"http://127.0.0.1:{recorder.port}/hook")
            execution = await wait_finished(client, (await client.create_job(job)).job.id)
        assert execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED
        assert recorder.requests == ["/hook"]
    finally:
        stop.set()
        await task
