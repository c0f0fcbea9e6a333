"""HTTP targets against a local http.server on 127.0.0.1, directly and through the Worker."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tickwheel.v1 import job_pb2, worker_pb2
from tickwheel_worker import HandlerRegistry
from tickwheel_worker.http_target import (
    HttpCall,
    build_request,
    classify_status,
    parse_retry_after,
)
from tests.unit.worker.worker_fakes import LOOPBACK, WAIT, FakeWorkerService, StartWorker, make_assignment

OUTCOME = worker_pb2.ResultOutcome


class TargetServer:
    """Records every request; the path decides the response."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release_slow = threading.Event()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.requests.append(
                    {"method": self.command, "path": self.path, "headers": self.headers, "body": body}
                )
                path = self.path.split("?")[0]
                if path == "/slow":
                    recorder.release_slow.wait(10)
                status, extra, reply = {
                    "/ok": (200, {}, b"charged"),
                    "/created": (201, {}, b""),
                    "/fail": (500, {}, b"database exploded"),
                    "/nul": (500, {}, b"bad\x00bytes\x00"),
                    "/missing": (404, {}, b"no such thing"),
                    "/timeout": (408, {}, b""),
                    "/throttled": (429, {"Retry-After": "2"}, b""),
                    "/busy": (503, {"Retry-After": "7"}, b"try later"),
                    "/moved": (302, {"Location": "http://elsewhere.example/"}, b""),
                    "/slow": (200, {}, b"late"),
                }.get(path, (418, {}, b"?"))
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    def url(self, path: str) -> str:
        return self.base + path

    def __enter__(self) -> TargetServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_slow.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[TargetServer]:
    with TargetServer() as server:
        yield server


def request_for(url: str, method: str = "", headers: dict[str, str] | None = None, payload: bytes = b"{}") -> Any:
    return build_request(
        job_pb2.HttpTarget(url=url, method=method, headers=headers or {}),
        execution_id="job_9:2027-03-28T02:30:00Z",
        attempt=2,
        delivery=3,
        scheduled_at="2027-03-28T02:30:00Z",
        traceparent="",
        payload=payload,
        user_agent="tickwheel-worker/test",
    )


async def test_worker_sends_the_tickwheel_headers_and_succeeds_on_2xx(
    fake_server: FakeWorkerService, start_worker: StartWorker, target: TargetServer
) -> None:
    await start_worker(HandlerRegistry())
    stream = await fake_server.stream(0)
    http = job_pb2.HttpTarget(
        url=target.url("/ok?x=1"),
        headers={"X-Api-Key": "k-1", "Idempotency-Key": "forged", "Tickwheel-Attempt": "99", "Content-Type": "application/json"},
    )
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    await stream.assign(make_assignment(
        "job_9:2027-03-28T02:30:00Z", http=http, payload=b'{"amount": 5}', attempt=2, delivery=3,
        traceparent=traceparent,
    ))
    result = await stream.wait_result("job_9:2027-03-28T02:30:00Z")

    assert result.outcome == OUTCOME.RESULT_OUTCOME_SUCCEEDED, result.error
    assert result.output == b"charged"
    (request,) = target.requests
    headers = request["headers"]
    assert (request["method"], request["path"], request["body"]) == ("POST", "/ok?x=1", b'{"amount": 5}')
    assert headers.get_all("Idempotency-Key") == ["job_9:2027-03-28T02:30:00Z"]
    assert headers.get_all("Tickwheel-Attempt") == ["2"]
    assert headers["Tickwheel-Delivery"] == "3"
    assert headers["Tickwheel-Scheduled-At"] == "2027-03-28T02:30:00Z"
    assert headers["traceparent"] == traceparent
    assert headers["X-Api-Key"] == "k-1"
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("tickwheel-worker/")


@pytest.mark.parametrize(
    ("path", "outcome", "status"),
    [
        ("/created", OUTCOME.RESULT_OUTCOME_SUCCEEDED, 201),
        ("/fail", OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE, 500),
        ("/missing", OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT, 404),
        ("/timeout", OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE, 408),
        ("/throttled", OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE, 429),
        ("/moved", OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT, 302),
    ],
)
def test_status_classification_against_a_real_server(
    target: TargetServer, path: str, outcome: int, status: int
) -> None:
    result = HttpCall(request_for(target.url(path)), timeout=WAIT, address_policy=LOOPBACK).run()
    assert (result.outcome, result.status) == (outcome, status)
    if path == "/fail":
        assert result.error == "HTTP 500 Internal Server Error: database exploded"
    if path == "/moved":
        assert "http://elsewhere.example/" in result.error and len(target.requests) == 1
    if path == "/throttled":
        assert result.retry_after == timedelta(seconds=2)


def test_a_500_with_nul_bytes_in_its_body_reports_an_error_without_nul(target: TargetServer) -> None:
    result = HttpCall(request_for(target.url("/nul")), timeout=WAIT, address_policy=LOOPBACK).run()
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE
    assert result.error == "HTTP 500 Internal Server Error: bad\ufffdbytes\ufffd"


def test_503_with_retry_after_is_retryable_with_the_delay(target: TargetServer) -> None:
    result = HttpCall(request_for(target.url("/busy")), timeout=WAIT, address_policy=LOOPBACK).run()
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE
    assert result.retry_after == timedelta(seconds=7)
    assert result.output == b"try later"


def test_get_sends_no_body_and_other_methods_do(target: TargetServer) -> None:
    HttpCall(request_for(target.url("/ok"), method="GET"), timeout=WAIT, address_policy=LOOPBACK).run()
    HttpCall(request_for(target.url("/ok"), method="put"), timeout=WAIT, address_policy=LOOPBACK).run()
    get, put = target.requests
    assert (get["method"], get["body"], get["headers"]["Content-Length"]) == ("GET", b"", None)
    assert (put["method"], put["body"]) == ("PUT", b"{}")


def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = HttpCall(request_for(f"http://127.0.0.1:{port}/"), timeout=WAIT, address_policy=LOOPBACK).run()
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE
    assert result.error.startswith("connection error") and result.status is None


def test_address_policy_sees_resolved_addresses_and_can_refuse(target: TargetServer) -> None:
    seen: list[tuple[str, Any]] = []

    def deny_loopback(host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        seen.append((host, address))
        return not address.is_loopback

    url = target.url("/ok").replace("127.0.0.1", "localhost")
    result = HttpCall(request_for(url), timeout=WAIT, address_policy=deny_loopback).run()
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT
    assert "refused" in result.error
    assert seen and all(host == "localhost" and address.is_loopback for host, address in seen)
    assert target.requests == []


def test_bad_targets_are_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="method"):
        request_for("http://127.0.0.1/", method="TRACE")
    with pytest.raises(ValueError, match="absolute http"):
        request_for("ftp://127.0.0.1/")
    with pytest.raises(ValueError, match="absolute http"):
        request_for("/relative")


async def test_a_hanging_target_is_abandoned_at_the_deadline(
    fake_server: FakeWorkerService, start_worker: StartWorker, target: TargetServer
) -> None:
    worker = await start_worker(HandlerRegistry(), slots=1)
    stream = await fake_server.stream(0)
    await stream.assign(make_assignment("e:slow", http=job_pb2.HttpTarget(url=target.url("/slow")), deadline_in=0.3))

    result = await stream.wait_result("e:slow")
    assert result.outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT
    # The call was aborted, so its thread ended and the slot came back.
    await stream.wait_for(lambda s: s.credit_total == 2)
    assert worker.in_flight() == []


async def test_a_worker_without_http_fails_http_targets_permanently(
    fake_server: FakeWorkerService, start_worker: StartWorker, target: TargetServer
) -> None:
    registry = HandlerRegistry()
    registry.register("noop", lambda ctx: None)
    await start_worker(registry, http=False)
    stream = await fake_server.stream(0)
    assert stream.hello.http is False
    await stream.assign(make_assignment("e:http", http=job_pb2.HttpTarget(url=target.url("/ok"))))
    result = await asyncio.wait_for(stream.wait_result("e:http"), WAIT)
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT and "HTTP" in result.error
    assert target.requests == []


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, "SUCCEEDED"), (204, "SUCCEEDED"), (299, "SUCCEEDED"), (301, "FAILED_PERMANENT"),
     (400, "FAILED_PERMANENT"), (401, "FAILED_PERMANENT"), (404, "FAILED_PERMANENT"),
     (408, "FAILED_RETRYABLE"), (409, "FAILED_PERMANENT"), (429, "FAILED_RETRYABLE"),
     (500, "FAILED_RETRYABLE"), (502, "FAILED_RETRYABLE"), (599, "FAILED_RETRYABLE")],
)
def test_classify_status(status: int, outcome: str) -> None:
    assert classify_status(status) == OUTCOME.Value(f"RESULT_OUTCOME_{outcome}")


NOW = datetime(2026, 10, 21, 7, 27, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", timedelta(seconds=7)),
        (" 0 ", timedelta(0)),
        ("Wed, 21 Oct 2026 07:28:00 GMT", timedelta(seconds=30)),
        ("Wed, 21 Oct 2026 07:00:00 GMT", timedelta(0)),  # in the past
        ("soon", None),
        ("-5", None),
        (None, None),
        ("9" * 40, timedelta(hours=24)),  # cut to what any retry policy may wait, never an overflow
        ("Fri, 31 Dec 9999 23:59:59 GMT", timedelta(hours=24)),
        ("\u0663", None),  # a digit, but not an ASCII one
        ("9" * 5000, timedelta(hours=24)),  # more digits than int() converts: no ValueError
        ("0" * 5000 + "7", timedelta(seconds=7)),
        ("Mon, 01 Jan 99999999999 00:00:00 GMT", None),  # a year that overflows: no OverflowError
    ],
)
def test_parse_retry_after(value: str | None, expected: timedelta | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_https_target_verifies_the_certificate_for_the_url_host(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a throwaway certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    server = TargetServer()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.server.socket = tls.wrap_socket(server.server.socket, server_side=True)
    server.thread.start()
    try:
        trusting = ssl.create_default_context(cafile=str(cert))
        port = server.server.server_address[1]
        ok = HttpCall(
            request_for(f"https://localhost:{port}/ok"), timeout=WAIT, address_policy=LOOPBACK, ssl_context=trusting
        ).run()
        assert (ok.outcome, ok.output) == (OUTCOME.RESULT_OUTCOME_SUCCEEDED, b"charged")
        # The certificate names localhost, not 127.0.0.1: the host name is checked.
        wrong = HttpCall(
            request_for(f"https://127.0.0.1:{port}/ok"), timeout=WAIT, address_policy=LOOPBACK, ssl_context=trusting
        ).run()
        assert wrong.outcome == OUTCOME.RESULT_OUTCOME_FAILED_RETRYABLE and "certificate" in wrong.error.lower()
    finally:
        server.server.shutdown()
        server.server.server_close()


def test_invalid_header_values_fail_permanently(target: TargetServer) -> None:
    bad = request_for(target.url("/ok"), headers={"X-Bad": "a\r\nInjected: 1"})
    result = HttpCall(bad, timeout=WAIT, address_policy=LOOPBACK).run()
    assert result.outcome == OUTCOME.RESULT_OUTCOME_FAILED_PERMANENT and "invalid request" in result.error
    assert target.requests == []

