"""Hostile HTTP targets against a real server and a real `tickwheel worker`
process, on the embedded stores and on PostgreSQL + etcd.

A target that answers with a body that never ends (a gigabyte announced,
or endless chunks), that drips its body a byte at a time, sends a thousand
headers, a status line of 60 KiB with terminal control sequences, a
redirect to the cloud metadata address or to itself, a ``Location`` of
60 KiB, a body of invalid UTF-8 with escape sequences and forged log
lines, or a ``Retry-After`` of 5 000 digits. The worker runs one slot, so
a call that hung would hold up every job after it. For every job:

- its one execution ends, in the terminal state the answer calls for,
  after exactly one attempt (no retry: ``max_attempts=1``; a redirect is
  never followed, so the target saw exactly one request for it);
- the stored error of its attempt is at most 2 048 characters, each
  printable: every control character the target sent (ESC, BEL, CR, LF,
  C1, DEL) arrives escaped (``\\x1b``), never raw;
- neither the worker's log nor the server's holds the target's control bytes.

A job that drips its body or its head past its timeout, whose target
sends ``100 Continue`` for ever, or whose https target never answers the
TLS handshake, ends TIMED_OUT and frees the slot for the
next job.

DNS rebinding: a name whose lookups answer an allowed address first and a
refused one after (or the other way round) is looked up once an attempt,
and the worker connects to the address it checked: the allowed target is
called, the refused one never.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tickwheel import AsyncClient, builders
from tickwheel.shared.targets import TargetPolicy
from tickwheel.v1 import execution_pb2, job_pb2

from tests.support.polling import eventually
from tests.support.server import running_server, start_worker_process
from tests.support.workers import running_worker
from tickwheel_worker import HandlerRegistry
from tickwheel_worker.resolver import Resolver

WAIT = 60.0
ERROR_MAX_CHARS = 2048
"""What the worker reports at most of an HTTP attempt's error (``http_target.ERROR_MAX_CHARS``)."""
CONTROL = b"\x1b]0;owned\x07\x1b[2J\r\n"
"""A terminal retitle, a bell, a screen clear and a forged line break."""

DEAD = job_pb2.EXECUTION_STATUS_DEAD
SUCCEEDED = job_pb2.EXECUTION_STATUS_SUCCEEDED
FAILED = execution_pb2.ATTEMPT_STATUS_FAILED
TIMED_OUT = execution_pb2.ATTEMPT_STATUS_TIMED_OUT
ATTEMPT_SUCCEEDED = execution_pb2.ATTEMPT_STATUS_SUCCEEDED


def _send_forever(sock: socket.socket, head: bytes, block: bytes, stop: threading.Event, pause: float = 0.0) -> None:
    sock.sendall(head)
    while not stop.is_set():
        sock.sendall(block)
        if pause:
            stop.wait(pause)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


ANSWERS: dict[str, Callable[[socket.socket, threading.Event], None]] = {
    "/huge": lambda s, stop: _send_forever(
        s, b"HTTP/1.1 500 Oops\r\nContent-Length: 1073741824\r\n\r\n", CONTROL * 4096, stop),
    "/endless-chunks": lambda s, stop: _send_forever(
        s, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", _chunk(b"x" * 4096), stop),
    "/drip": lambda s, stop: _send_forever(
        s, b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", b"d", stop, pause=0.1),
    "/headers": lambda s, stop: s.sendall(
        b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, CONTROL.strip()) for i in range(1000))
        + b"Content-Length: 0\r\n\r\n"),
    "/reason": lambda s, stop: s.sendall(
        b"HTTP/1.1 500 " + CONTROL.strip() + b"R" * 60_000 + b"\x85\x9b\xff\x7f\r\nContent-Length: 0\r\n\r\n"),
    "/bad-status": lambda s, stop: s.sendall(b"XTTP/1.1 " + CONTROL.strip() + b"S" * 60_000 + b"\r\n\r\n"),
    "/metadata": lambda s, stop: s.sendall(
        b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/iam/\r\nContent-Length: 0\r\n\r\n"),
    "/loop": lambda s, stop: s.sendall(b"HTTP/1.1 307 Again\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n"),
    "/location": lambda s, stop: s.sendall(
        b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1/" + CONTROL.strip() + b"L" * 60_000
        + b"\r\nContent-Length: 0\r\n\r\n"),
    "/body": lambda s, stop: s.sendall(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2000\r\n\r\n"
        + (b"\xff\xfe\xc3" + CONTROL + b"2026-12-07 INFO forged line\x00\x9b" * 40)[:2000]),
    "/retry-after": lambda s, stop: s.sendall(
        b"HTTP/1.1 503 Busy\r\nRetry-After: " + b"9" * 5000 + b"\r\nContent-Length: 0\r\n\r\n"),
    "/drip-head": lambda s, stop: _send_forever(s, b"HTTP/1.1 200 OK\r\n", b"X", stop, pause=0.1),
    "/continues": lambda s, stop: _send_forever(s, b"", b"HTTP/1.1 100 Continue\r\n\r\n", stop, pause=0.01),
    "/ok": lambda s, stop: s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
}
"""What the target answers on each path (the request is read first)."""

EXPECTED = {
    # path: (execution status, attempt status, what the error starts with)
    "/huge": (DEAD, FAILED, "HTTP 500 Oops: \\x1b]0;owned\\x07\\x1b[2J"),
    "/endless-chunks": (SUCCEEDED, ATTEMPT_SUCCEEDED, ""),
    "/drip": (DEAD, TIMED_OUT, "attempt still running at its deadline"),
    "/headers": (DEAD, FAILED, "connection error: HTTPException: got more than 100 headers"),
    "/reason": (DEAD, FAILED, "HTTP 500 \\x1b]0;owned\\x07\\x1b[2JRRR"),
    "/bad-status": (DEAD, FAILED, "connection error: BadStatusLine:"),
    "/metadata": (DEAD, FAILED, "HTTP 302 Found: redirect to http://169.254.169.254/latest/meta-data/iam/ not followed"),
    "/loop": (DEAD, FAILED, "HTTP 307 Again: redirect to /loop not followed"),
    "/location": (DEAD, FAILED, "HTTP 302 Found: redirect to http://127.0.0.1/\\x1b]0;owned\\x07\\x1b[2JLLL"),
    "/body": (DEAD, FAILED, "HTTP 500 Internal Server Error: \ufffd\ufffd\ufffd\\x1b]0;owned\\x07\\x1b[2J\\r\\n2026"),
    "/retry-after": (DEAD, FAILED, "HTTP 503 Busy"),
    "/drip-head": (DEAD, TIMED_OUT, "attempt still running at its deadline"),
    "/continues": (DEAD, TIMED_OUT, "attempt still running at its deadline"),
    "/tls-silent": (DEAD, TIMED_OUT, "attempt still running at its deadline"),
}
TLS_SILENT = "/tls-silent"
"""Called over https: the TLS handshake is never answered."""
TIMEOUT_OF = {"/drip": 2, "/drip-head": 2, "/continues": 2, TLS_SILENT: 2}
"""Job timeouts (seconds) of the answers that never end; the others have 120."""


class HostileTarget:
    """A TCP server on 127.0.0.1 that reads each request's head and body and
    answers it as :data:`ANSWERS` says, one thread a connection; records the
    paths requested."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.paths: list[str] = []
        self.stop = threading.Event()
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(sock,), daemon=True).start()

    def _answer(self, sock: socket.socket) -> None:
        with sock, contextlib.suppress(OSError):
            sock.settimeout(30)
            data = b""
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next((int(v) for n, _, v in (line.partition(":") for line in lines[1:])
                           if n.strip().lower() == "content-length"), 0)  # fmt: skip
            while len(body) < length:
                body += sock.recv(65536)
            path = lines[0].split(" ")[1]
            self.paths.append(path)
            ANSWERS[path](sock, self.stop)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def target() -> Iterator[HostileTarget]:
    hostile = HostileTarget()
    yield hostile
    hostile.close()


async def test_hostile_targets_end_once_bounded_and_escaped_and_never_hold_the_slot(
    store_and_etcd, target: HostileTarget, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store, etcd = store_and_etcd
    async with running_server(store, etcd, allow_target_networks=("127.0.0.0/8",)) as server:
        await _run_hostile_jobs(server, target, tmp_path)
    # The server's log (its alerts name each dead execution) holds none of the target's control bytes.
    logged = [r.getMessage() for r in caplog.records]
    assert not [m for m in logged if "\x1b" in m or "\x07" in m], [m[:200] for m in logged if "\x1b" in m][:3]


async def _run_hostile_jobs(server, target: HostileTarget, tmp_path: Path) -> None:
    api_key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    with contextlib.ExitStack() as stack:
        start_worker_process(stack, tmp_path, server.address, credential, "w-hostile", "--slots", "1",
                             "--allow-target-network", "127.0.0.0/8")  # fmt: skip
        async with AsyncClient(server.address, api_key) as client:
            now = datetime.now(timezone.utc)
            jobs = {}
            for i, path in enumerate(EXPECTED):
                # An https URL: the target reads the TLS hello as a request head that never ends.
                url = target.url(path).replace("http://", "https://") if path == TLS_SILENT else target.url(path)
                job = builders.once_job(
                    f"hostile-{i}", now, url=url, retry=builders.retry_policy(max_attempts=1),
                    timeout=TIMEOUT_OF.get(path, 120),
                )
                jobs[path] = (await client.create_job(job)).job.id

            async def finished() -> dict[str, execution_pb2.Execution] | None:
                ended = {}
                for path, job_id in jobs.items():
                    executions = (await client.list_executions(job_id)).executions
                    if len(executions) != 1 or executions[0].status not in (DEAD, SUCCEEDED):
                        return None
                    ended[path] = executions[0]
                return ended

            ended = await eventually(finished, "every hostile job's execution ended", timeout=WAIT)
        log = (tmp_path / "worker-w-hostile.log").read_bytes()

    for path, (status, attempt_status, starts) in EXPECTED.items():
        execution = ended[path]
        assert (execution.status, execution.attempt, len(execution.attempts)) == (status, 1, 1), (path, execution)
        (attempt,) = execution.attempts
        assert attempt.status == attempt_status, (path, attempt)
        error = attempt.error
        assert error.startswith(starts), (path, error[:300])
        assert len(error) <= ERROR_MAX_CHARS, (path, len(error))
        assert error.isprintable(), (path, [c for c in error if not c.isprintable()][:10])
    # Every path asked once: nothing retried, no redirect followed.
    assert sorted(target.paths) == sorted(set(EXPECTED) - {TLS_SILENT}), target.paths
    assert b"\x1b" not in log and b"\x07" not in log, log[-2000:]


async def test_a_name_is_looked_up_once_and_the_checked_address_is_the_one_called(tmp_path: Path) -> None:
    allowed, internal = HostileTarget("127.0.0.1"), HostileTarget("127.0.0.2")
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list:
        # The first answer of each name is what it says; every later one the other address.
        first = host.startswith("allowed-first")
        address = "127.0.0.1" if first == (host not in lookups) else "127.0.0.2"
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    try:
        async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as server:
            api_key = await server.create_tenant("acme")
            credential = await server.issue_worker_credential(["acme"], http=True)
            async with running_worker(
                server.address, credential, HandlerRegistry(), slots=1, resolver=Resolver(rebinding),
                address_policy=TargetPolicy.allowing(["127.0.0.1/32"]),
            ), AsyncClient(server.address, api_key) as client:
                now = datetime.now(timezone.utc)
                urls = {
                    "allowed-first.rebind.test": f"http://allowed-first.rebind.test:{allowed.port}/ok",
                    "refused-first.rebind.test": f"http://refused-first.rebind.test:{internal.port}/ok",
                }
                ids = {}
                for name, url in urls.items():
                    job = builders.once_job(name, now, url=url, retry=builders.retry_policy(max_attempts=1))
                    ids[name] = (await client.create_job(job)).job.id

                async def ended() -> dict | None:
                    found = {n: (await client.list_executions(i)).executions for n, i in ids.items()}
                    done = all(len(e) == 1 and e[0].status in (DEAD, SUCCEEDED) for e in found.values())
                    return {n: e[0] for n, e in found.items()} if done else None

                executions = await eventually(ended, "both executions ended", timeout=WAIT)
    finally:
        allowed.close()
        internal.close()
    assert executions["allowed-first.rebind.test"].status == SUCCEEDED
    refused = executions["refused-first.rebind.test"]
    assert refused.status == DEAD and "127.0.0.2 is loopback" in refused.attempts[0].error, refused
    assert sorted(lookups) == sorted(urls)  # one lookup an attempt: never again to connect
    assert allowed.paths == ["/ok"] and internal.paths == []
