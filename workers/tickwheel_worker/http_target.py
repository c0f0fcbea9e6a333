"""HTTP callback targets: build the request, send it, classify the response.

:class:`HttpCall` is blocking (``http.client``) and is run in a thread by the
attempt runner; :meth:`HttpCall.abort` may be called from any thread to break
it off when the deadline passes or the execution is canceled. Redirects are
never followed, to any address (a 3xx fails permanently, naming the
``Location``), and no environment proxy is used, so the request goes exactly
where the URL says and nowhere else.

Name lookups go through a :class:`~tickwheel_worker.resolver.Resolver`:
bounded by the call's timeout and by :meth:`HttpCall.abort` (a hung name
server no longer holds the call's thread, and its worker slot, past the
deadline), and refused at once (a retryable failure) to a tenant whose
abandoned lookups still under way reach a cap.

The address seam. ``address_policy(host, address) -> bool`` is called for
every address the host name resolves to, after DNS resolution and before
connecting; the connection is made to that checked address (never resolved
again), so DNS rebinding cannot slip past it. Addresses it refuses are
skipped; when it refuses all of them the attempt fails permanently, and the
error names each address with the rule that refused it when the policy has a
``refusal(address) -> str | None`` method (``tickwheel.shared.targets.TargetPolicy``
does: the worker's configured policy, which refuses loopback, link-local,
private and reserved ranges unless allow-listed).

What the target sends is hostile. Of its bytes only the body's first
16 KiB is read as output; an error quotes at most the first
:data:`ERROR_BODY_SNIPPET` bytes of the body, :data:`REASON_MAX_CHARS` of
the status line's reason and :data:`LOCATION_MAX_CHARS` of a redirect's
``Location``, each quoted (:mod:`tickwheel.shared.quoted`: every character
that is not printable escaped as Python writes it, ``\\x1b``; invalid UTF-8
becomes U+FFFD first), so that nothing a target wrote reaches a terminal,
a log line or a console as a control sequence; the whole error is at most
:data:`ERROR_MAX_CHARS`. A status line or header past ``http.client``'s
limits (64 KiB a line, 100 headers) fails the attempt retryably; a body
that never ends, or drips, is cut by the read's limit or the deadline's
abort. Each piece is cut before it is escaped, so quoting costs what the
bound allows, whatever the target sent.

The pure pieces (:func:`build_request`, :func:`classify_status`,
:func:`parse_retry_after`) are tested on their own.
"""

from __future__ import annotations

import concurrent.futures
import email.utils
import http.client
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Union
from urllib.parse import urlsplit

from tickwheel.shared.quoted import quoted
from tickwheel.v1 import job_pb2, worker_pb2
from tickwheel_worker.resolver import DEFAULT_RESOLVER, LookupTimeout, Resolver

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
AddressPolicy = Callable[[str, IPAddress], bool]
"""``(host name as in the URL, resolved address) -> allowed``."""

OUTPUT_MAX_BYTES = 16 * 1024
ERROR_BODY_SNIPPET = 512
REASON_MAX_CHARS = 128
"""What an error quotes of a status line's reason phrase (``http.client`` reads up to 64 KiB of it)."""
LOCATION_MAX_CHARS = 512
"""What an error quotes of a redirect's ``Location`` (a header line may be 64 KiB)."""
ERROR_MAX_CHARS = 2048
"""The longest error an HTTP attempt reports (the server keeps 4096 characters of any)."""
_RETRY_AFTER_DIGITS = 9
"""Delta-seconds of more digits is past :data:`MAX_RETRY_AFTER` anyway (and ``int`` refuses 4 300)."""
MAX_RETRY_AFTER = timedelta(hours=24)
"""A longer ``Retry-After`` is cut to this: no retry policy waits longer."""
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
# Headers a job's target may not set: Tickwheel's own, and framing headers
# http.client computes from the request.
_RESERVED = frozenset(
    {
        "idempotency-key",
        "traceparent",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
    }
)

SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED
FAILED_RETRYABLE = worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE
FAILED_PERMANENT = worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT
TIMED_OUT = worker_pb2.RESULT_OUTCOME_TIMED_OUT
CANCELED = worker_pb2.RESULT_OUTCOME_CANCELED


def allow_all_addresses(host: str, address: IPAddress) -> bool:
    """An address policy that allows every address (for tests and for
    workers whose network holds nothing a tenant may not reach)."""
    return True


class AddressRefused(OSError):
    """Every address the host resolved to was refused by the address policy."""


def _refusal(policy: AddressPolicy, host: str, address: IPAddress) -> str | None:
    """None when ``policy`` allows ``address``; else what to say about it."""
    if policy(host, address):
        return None
    explain = getattr(policy, "refusal", None)
    reason = explain(address) if callable(explain) else None
    return reason or f"{address} is refused"


@dataclass(frozen=True)
class HttpRequest:
    """One request, fully decided: what :class:`HttpCall` sends."""

    url: str
    method: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None


@dataclass(frozen=True)
class HttpOutcome:
    """How the call ended, in the terms of a worker result."""

    outcome: int
    """A ``ResultOutcome`` value."""
    error: str = ""
    output: bytes = b""
    """The response body, at most 16 KiB."""
    status: int | None = None
    """The HTTP status, None when no response arrived."""
    retry_after: timedelta | None = None
    """From ``Retry-After`` on a retryable response."""


def build_request(
    target: job_pb2.HttpTarget,
    *,
    execution_id: str,
    attempt: int,
    delivery: int,
    scheduled_at: str,
    traceparent: str,
    payload: bytes,
    user_agent: str,
) -> HttpRequest:
    """The request for one attempt. ValueError (a permanent failure) on a bad target.

    ``scheduled_at`` is the nominal instant in RFC 3339 UTC with ``Z``. The
    target's headers come first; any that name a Tickwheel header
    (``Idempotency-Key``, ``traceparent``, ``Tickwheel-*``) or a framing header
    are dropped, so they cannot be overridden. The payload is the body for
    every method but GET.
    """
    method = (target.method or "POST").upper()
    if method not in METHODS:
        raise ValueError(f"HTTP method {target.method!r} is not one of {', '.join(sorted(METHODS))}")
    parts = urlsplit(target.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"target URL {target.url!r} is not an absolute http or https URL")
    headers: list[tuple[str, str]] = [
        (name, value)
        for name, value in sorted(target.headers.items())
        if name.lower() not in _RESERVED and not name.lower().startswith("tickwheel-")
    ]
    own = {name.lower() for name, _ in headers}
    if "content-type" not in own:
        headers.append(("Content-Type", "application/octet-stream"))
    if "user-agent" not in own:
        headers.append(("User-Agent", user_agent))
    headers.append(("Idempotency-Key", execution_id))
    headers.append(("Tickwheel-Attempt", str(attempt)))
    headers.append(("Tickwheel-Delivery", str(delivery)))
    if scheduled_at:
        headers.append(("Tickwheel-Scheduled-At", scheduled_at))
    if traceparent:
        headers.append(("traceparent", traceparent))
    body = None if method == "GET" else bytes(payload)
    return HttpRequest(target.url, method, tuple(headers), body)


def classify_status(status: int) -> int:
    """2xx SUCCEEDED; 408, 429, 5xx FAILED_RETRYABLE; anything else FAILED_PERMANENT."""
    if 200 <= status < 300:
        return SUCCEEDED
    if status in (408, 429) or 500 <= status < 600:
        return FAILED_RETRYABLE
    return FAILED_PERMANENT


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """``Retry-After`` as a delay from ``now``: delta-seconds or an HTTP date.

    A date in the past gives zero; an unparseable value gives None; more
    than :data:`MAX_RETRY_AFTER` gives that.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        digits = value.lstrip("0") or "0"
        if len(digits) > _RETRY_AFTER_DIGITS:
            return MAX_RETRY_AFTER
        return timedelta(seconds=min(int(digits), MAX_RETRY_AFTER // timedelta(seconds=1)))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):  # a year of eleven digits overflows
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return min(max(timedelta(0), when - now), MAX_RETRY_AFTER)


Resolve = Callable[[str, int], list]
"""``(host, port) -> getaddrinfo's list``: a call's bounded lookup (:meth:`HttpCall._resolve`)."""


def _open_checked_socket(
    host: str,
    port: int,
    timeout: float,
    policy: AddressPolicy,
    on_socket: Callable[[socket.socket], None],
    resolve: Resolve,
) -> socket.socket:
    """Resolve, check each address with ``policy``, connect to the first that works."""
    infos = resolve(host, port)
    refused: list[str] = []
    last_error: OSError | None = None
    for family, kind, proto, _, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        refusal = _refusal(policy, host, address)
        if refusal is not None:
            if refusal not in refused:  # getaddrinfo may list an address more than once
                refused.append(refusal)
            continue
        sock = socket.socket(family, kind, proto)
        on_socket(sock)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
    if last_error is not None:
        raise last_error
    if refused:
        raise AddressRefused(
            f"not called: the worker's target address policy refused every address of {host}: "
            f"{'; '.join(refused)} (a worker allows a network only with --allow-target-network)"
        )
    raise OSError(f"{host} resolved to no address")


class _CheckedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, timeout: float, policy: AddressPolicy,
                 on_socket: Callable[[socket.socket], None], resolve: Resolve) -> None:
        super().__init__(host, port, timeout=timeout)
        self._policy = policy
        self._on_socket = on_socket
        self._resolve = resolve

    def connect(self) -> None:
        self.sock = _open_checked_socket(self.host, self.port, self.timeout, self._policy, self._on_socket,
                                         self._resolve)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, timeout: float, policy: AddressPolicy,
                 on_socket: Callable[[socket.socket], None], resolve: Resolve, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._policy = policy
        self._on_socket = on_socket
        self._resolve = resolve

    def connect(self) -> None:
        sock = _open_checked_socket(self.host, self.port, self.timeout, self._policy, self._on_socket,
                                    self._resolve)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def _snippet(body: bytes) -> str:
    """The start of a response body for an error message (quoted; invalid UTF-8 as U+FFFD)."""
    text = quoted(body[:ERROR_BODY_SNIPPET].decode("utf-8", "replace").strip(), ERROR_BODY_SNIPPET)
    return f": {text}" if text else ""


def _exception_text(exc: BaseException) -> str:
    """An exception's text, which may quote the target's bytes, as an error carries it."""
    return quoted(str(exc), ERROR_BODY_SNIPPET)


class HttpCall:
    """One blocking HTTP attempt; :meth:`run` in a worker thread, :meth:`abort` from anywhere.

    ``timeout`` bounds each socket operation (connect, send, each read) and
    the name lookup: the runner passes the time left until the assignment's
    deadline, and aborts the call when the deadline passes, which bounds
    the whole call (an abort abandons a lookup under way too). The lookup
    goes through ``resolver`` under ``tenant``'s cap.
    """

    def __init__(
        self,
        request: HttpRequest,
        *,
        timeout: float,
        address_policy: AddressPolicy,
        ssl_context: ssl.SSLContext | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        resolver: Resolver = DEFAULT_RESOLVER,
        tenant: str = "",
    ) -> None:
        self.request = request
        self._resolver = resolver
        self._tenant = tenant
        self._lookup: concurrent.futures.Future[None] | None = None
        """What the lookup under way is waited on through: cancelled by :meth:`abort`."""
        self._timeout = max(timeout, 0.001)
        self._policy = address_policy
        self._ssl_context = ssl_context
        self._now = now
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._aborted = False

    def abort(self) -> None:
        """Break off the call; :meth:`run` then returns CANCELED soon. Thread-safe, idempotent."""
        with self._lock:
            self._aborted = True
            sockets = list(self._sockets)
            lookup = self._lookup
        if lookup is not None:
            lookup.cancel()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _waiting(self, lookup: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._lookup = lookup
            aborted = self._aborted
        if aborted:
            lookup.cancel()

    def _resolve(self, host: str, port: int) -> list:
        return self._resolver.resolve(self._tenant, host, port, self._timeout, self._waiting)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            aborted = self._aborted
        if aborted:
            sock.close()

    def run(self) -> HttpOutcome:
        """Send the request and classify what happened. Never raises."""
        try:
            outcome = self._run()
        except Exception as exc:  # noqa: BLE001 - every failure must become an outcome
            return HttpOutcome(FAILED_RETRYABLE, error=f"HTTP call failed: {type(exc).__name__}: {_exception_text(exc)}")
        if len(outcome.error) > ERROR_MAX_CHARS:
            outcome = replace(outcome, error=outcome.error[: ERROR_MAX_CHARS - 1] + "…")
        return outcome

    def _run(self) -> HttpOutcome:
        req = self.request
        try:
            parts = urlsplit(req.url)
            host = parts.hostname or ""
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            return HttpOutcome(FAILED_PERMANENT, error=f"bad target URL: {exc}")
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            context = self._ssl_context or ssl.create_default_context()
            conn = _CheckedHTTPSConnection(host, port, self._timeout, self._policy, self._track, self._resolve,
                                           context)
        else:
            conn = _CheckedHTTPConnection(host, port, self._timeout, self._policy, self._track, self._resolve)
        try:
            try:
                conn.putrequest(req.method, path, skip_accept_encoding=True)
                for name, value in req.headers:
                    conn.putheader(name, value)
                if req.body is not None:
                    conn.putheader("Content-Length", str(len(req.body)))
                conn.endheaders(req.body)
                response = conn.getresponse()
                body = response.read(OUTPUT_MAX_BYTES)
            except AddressRefused as exc:
                return HttpOutcome(FAILED_PERMANENT, error=str(exc))
            except LookupTimeout as exc:
                return HttpOutcome(TIMED_OUT, error=f"HTTP call to {host} timed out: {exc}")
            except TimeoutError:
                return HttpOutcome(TIMED_OUT, error=f"HTTP call to {host} timed out")
            except http.client.InvalidURL as exc:
                return HttpOutcome(FAILED_PERMANENT, error=f"invalid request: {exc}")
            # Before ValueError: a certificate failure is both; it counts as a connection error.
            except (OSError, http.client.HTTPException) as exc:
                if self._aborted:
                    return HttpOutcome(CANCELED, error="HTTP call aborted")
                # http.client quotes what the target sent (BadStatusLine: the whole line).
                return HttpOutcome(
                    FAILED_RETRYABLE, error=f"connection error: {type(exc).__name__}: {_exception_text(exc)}"
                )
            except ValueError as exc:  # http.client refuses a bad header name or value
                return HttpOutcome(FAILED_PERMANENT, error=f"invalid request: {_exception_text(exc)}")
        finally:
            conn.close()
        return self._classify(response, body)

    def _classify(self, response: http.client.HTTPResponse, body: bytes) -> HttpOutcome:
        status = response.status
        outcome = classify_status(status)
        if outcome == SUCCEEDED:
            return HttpOutcome(SUCCEEDED, output=body, status=status)
        reason = quoted(response.reason, REASON_MAX_CHARS)
        error = f"HTTP {status} {reason}{_snippet(body)}"
        if 300 <= status < 400:
            location = quoted(response.getheader("Location", "?"), LOCATION_MAX_CHARS)
            error = f"HTTP {status} {reason}: redirect to {location} not followed (redirects are never followed)"
        retry_after = None
        if outcome == FAILED_RETRYABLE:
            retry_after = parse_retry_after(response.getheader("Retry-After"), self._now())
        return HttpOutcome(outcome, error=error, output=body, status=status, retry_after=retry_after)

