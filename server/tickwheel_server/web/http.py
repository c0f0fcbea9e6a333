"""The server's HTTP/1.1 endpoint, on asyncio streams.

Small on purpose: GET and HEAD on the routes of a :class:`Router`, no
request bodies, keep-alive, and limits on everything a client controls
(head size and header count, idle time, concurrent connections in all and
from one address, connections turned away at once), so that a slow or
hostile client costs a bounded amount. TLS when given an SSL
context (the server uses the certificate of its gRPC port).

Every response carries the security headers a page of credentials needs: a
strict Content-Security-Policy (scripts and styles only from this origin,
no inline code, Trusted Types required so that no script can hand a string
to an HTML sink), ``nosniff``, no framing, no referrer; and
``Cache-Control: no-store`` unless the handler chose a caching policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from dataclasses import dataclass, replace
from email.utils import format_datetime
from http import HTTPStatus
from urllib.parse import parse_qsl

from tickwheel.shared.clock import Clock, SystemClock

from ..auth import failures
from .router import ALLOWED_METHODS, HttpError, Request, Response, Router

log = logging.getLogger("tickwheel.http")

MAX_HEAD_BYTES = 16 * 1024
"""Request line and headers together; more is 431."""
MAX_HEADERS = 100
MAX_CONNECTIONS = 256
"""Connections served at once; one more is answered 503 and closed."""
MAX_CONNECTIONS_PER_PEER = 32
"""Connections served at once from one client address (an IPv6 one by its
/64); one more is answered 503 and closed. A browser opens six, a scraper
one: one address cannot take the :data:`MAX_CONNECTIONS` from the rest."""
MAX_TURNING_AWAY = 64
"""Connections being answered 503 at once (each for at most
:data:`LINGER_SECONDS`); one more past the limits is closed unanswered, so
a flood of connections holds no more descriptors than these beyond the
connections served."""
IDLE_TIMEOUT = 30.0
"""Seconds a connection may take to send a request's head, and may stay idle between requests."""
WRITE_TIMEOUT = 30.0
"""Seconds a client may take to read a response before the connection is dropped."""
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024
"""After an error response, what is still read from the client before closing (see ``_linger``)."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_VERSION = re.compile(r"^HTTP/1\.[01]\Z")
_UNSAFE_HEADER_VALUE = re.compile(r"[\r\n\x00]")
_NO_BODY = frozenset({204, 304})


def split_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) → (host, port); ValueError otherwise."""
    host, sep, port = listen.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{listen!r} is not HOST:PORT")
    return host, int(port)


def _peer_key(peername) -> str:
    """The address a connection's limit is counted under: its client's IP
    address, an IPv6 one by its /64 (as failed authentications are)."""
    if not isinstance(peername, tuple) or not peername:
        return "unknown"
    host = str(peername[0])
    return failures.peer_key(f"ipv6:[{host}]:0" if ":" in host else f"ipv4:{host}:0")


def server_ssl_context(cert_file: str, key_file: str, client_ca_file: str = "") -> ssl.SSLContext:
    """An SSL context serving ``cert_file``/``key_file``; with a client CA,
    clients must present a certificate that chains to it (mutual TLS)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["http/1.1"])
    return context


def parse_head(head: bytes, peer: str = "") -> tuple[Request, bool]:
    """The request in a head (request line and headers, through the blank
    line) and whether the connection may be kept alive after answering it.
    HttpError for what cannot be answered: 400 malformed, 413 a body, 431
    too many headers, 505 a version other than HTTP/1.0 or 1.1."""
    text = head.decode("latin-1").lstrip("\r\n")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if not _TOKEN.match(method):
        raise HttpError(400, "malformed method")
    if not _VERSION.match(version):
        raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if not target.startswith("/") or any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in target):
        raise HttpError(400, "the request target must be a path (origin form)")
    headers: dict[str, str] = {}
    count = 0
    for line in lines[1:]:
        if not line:
            continue
        count += 1
        if count > MAX_HEADERS:
            raise HttpError(431, f"more than {MAX_HEADERS} header fields")
        if line[0] in " \t":
            raise HttpError(400, "obsolete line folding in a header")
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name):
            raise HttpError(400, "malformed header field")
        name, value = name.lower(), value.strip(" \t")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if version == "HTTP/1.1" and "host" not in headers:
        raise HttpError(400, "HTTP/1.1 requests need a Host header")
    if "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("0", ""):
        raise HttpError(413, "this endpoint takes no request bodies")
    path, _, query_text = target.partition("?")
    query: dict[str, str] = {}
    try:
        pairs = parse_qsl(query_text, keep_blank_values=True, errors="strict", max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise HttpError(400, "malformed query string") from None
    for key, value in pairs:
        if key in query:
            raise HttpError(400, f"query parameter {key!r} is given more than once")
        query[key] = value
    tokens = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    keep_alive = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens
    return Request(method=method, target=target, path=path, query=query, headers=headers, peer=peer), keep_alive


@dataclass(eq=False)
class _Connection:
    accepted: asyncio.Task
    """The task asyncio runs for the connection: it ends once the connection is closed."""
    task: asyncio.Task | None = None
    """Serves the connection's requests in turn; cancelled to drop the connection."""
    busy: bool = False
    """A request is being answered (``stop`` lets it finish within the grace)."""


class HttpServer:
    """Serves a :class:`Router` on ``listen`` (``HOST:PORT``; port 0 picks a
    free one, readable from :attr:`port` once started).

    ``stop`` stops accepting, closes idle connections at once, lets requests
    in progress finish within the grace, then drops what is left.
    """

    def __init__(
        self,
        router: Router,
        listen: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        clock: Clock | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_peer: int = MAX_CONNECTIONS_PER_PEER,
        idle_timeout: float = IDLE_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self._host, self._requested_port = split_listen(listen)
        self._router = router
        self._ssl = ssl_context
        self._clock = clock or SystemClock()
        self._max_connections = max_connections
        self._max_per_peer = max_connections_per_peer
        self._by_peer: dict[str, int] = {}
        """Connections served now, by client address (:func:`_peer_key`)."""
        self._turning_away = 0
        """Connections being answered 503 now."""
        self._idle_timeout = idle_timeout
        self._write_timeout = write_timeout
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._closing = False
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self._ssl is not None else "http"

    @property
    def address(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The endpoint's base URL, e.g. ``http://127.0.0.1:8080/``."""
        return f"{self.scheme}://{self.address}/"

    async def start(self) -> None:
        """Bind and serve; OSError when the address cannot be bound."""
        self._server = await asyncio.start_server(
            self._accept, self._host, self._requested_port, ssl=self._ssl, limit=MAX_HEAD_BYTES,
            reuse_address=True, start_serving=True,
        )  # fmt: skip
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self, grace: float = 5.0) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        connections = list(self._connections)
        for connection in connections:
            if not connection.busy:
                connection.task.cancel()
        if connections:
            _, pending = await asyncio.wait([c.accepted for c in connections], timeout=grace)
            for connection in connections:
                if connection.accepted in pending:
                    connection.task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection. Its requests are served by a task of their own,
        which ``stop`` may cancel: the task asyncio runs this in must end
        normally (asyncio logs one that ends cancelled as an error)."""
        peer = _peer_key(writer.get_extra_info("peername"))
        held = self._by_peer.get(peer, 0)
        if self._closing or len(self._connections) >= self._max_connections or held >= self._max_per_peer:
            if self._turning_away >= MAX_TURNING_AWAY:
                writer.transport.abort()  # a flood past the limits: closed unanswered, nothing held
                return
            self._turning_away += 1
            why = "too many connections from this address" if held >= self._max_per_peer else "too many connections"
            try:
                await self._write(writer, None, HttpError(503, f"{why}; retry later").response(), False)
                await self._linger(reader, writer)
            except (ConnectionError, TimeoutError, ssl.SSLError):
                pass
            finally:
                self._turning_away -= 1
                await _close(writer)
            return
        self._by_peer[peer] = held + 1
        connection = _Connection(asyncio.current_task())
        connection.task = asyncio.create_task(self._serve(reader, writer, connection))
        self._connections.add(connection)
        try:
            await asyncio.wait([connection.task])
        finally:
            connection.task.cancel()
            self._connections.discard(connection)
            left = self._by_peer[peer] - 1
            if left:
                self._by_peer[peer] = left
            else:
                del self._by_peer[peer]
            await _close(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection: _Connection) -> None:
        """Answer the connection's requests in turn until it closes, idles
        out, asks to close, sends what cannot be framed, or the endpoint stops."""
        peer = writer.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else ""
        try:
            while not self._closing:
                try:
                    async with asyncio.timeout(self._idle_timeout):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, TimeoutError):
                    return
                except asyncio.LimitOverrunError:
                    await self._write(writer, None, HttpError(431, "request head too large").response(), False)
                    await self._linger(reader, writer)
                    return
                connection.busy = True
                try:
                    request, keep_alive = parse_head(head, peer_text)
                except HttpError as error:
                    # What follows the head (a body, a malformed rest) cannot be framed: answer and close.
                    await self._write(writer, None, error.response(), False)
                    await self._linger(reader, writer)
                    return
                response = await self._respond(request)
                keep_alive = keep_alive and not self._closing
                await self._write(writer, request, response, keep_alive)
                connection.busy = False
                if not keep_alive:
                    return
        except (ConnectionError, TimeoutError, ssl.SSLError):
            pass

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Before closing after an error: end our side and read what the
        client still sends (up to :data:`LINGER_BYTES`, for at most
        :data:`LINGER_SECONDS`), so that closing with unread data does not
        reset the connection before the client has read our answer."""
        if writer.can_write_eof():
            writer.write_eof()
        received = 0
        with contextlib.suppress(TimeoutError, ConnectionError, ssl.SSLError):
            async with asyncio.timeout(LINGER_SECONDS):
                while received < LINGER_BYTES:
                    chunk = await reader.read(4096)
                    if not chunk:
                        return
                    received += len(chunk)

    async def _respond(self, request: Request) -> Response:
        try:
            handler, params = self._router.resolve(request.path)
            if request.method not in ALLOWED_METHODS:
                raise HttpError(405, f"{request.method} is not allowed here", (("Allow", ", ".join(ALLOWED_METHODS)),))
            response = await handler(replace(request, params=params))
        except HttpError as error:
            response = error.response()
        except Exception:
            log.exception("GET %s failed", request.path)
            response = HttpError(500, "internal error").response()
        log.debug("%s %s %s → %d", request.peer, request.method, request.path, response.status)
        return response

    async def _write(
        self, writer: asyncio.StreamWriter, request: Request | None, response: Response, keep_alive: bool
    ) -> None:
        try:
            encoded = self._encode(request, response, keep_alive)
        except ValueError:
            log.exception("a handler's response cannot be sent")
            encoded = self._encode(request, HttpError(500, "internal error").response(), keep_alive)
        writer.write(encoded)
        try:
            async with asyncio.timeout(self._write_timeout):
                await writer.drain()
        except TimeoutError:
            # A client that stopped reading: drop what is buffered for it
            # now (closing would keep it, and this task, until it reads).
            writer.transport.abort()
            raise

    def _encode(self, request: Request | None, response: Response, keep_alive: bool) -> bytes:
        """Status line, headers and (except for HEAD, 204 and 304) the body."""
        status = response.status
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        body = b"" if status in _NO_BODY else response.body
        headers: dict[str, tuple[str, str]] = {}

        def put(name: str, value: str) -> None:
            if _UNSAFE_HEADER_VALUE.search(value) or not _TOKEN.match(name):
                raise ValueError(f"unsafe response header {name!r}")
            headers[name.lower()] = (name, value)

        put("Date", format_datetime(self._clock.now(), usegmt=True))
        put("Server", "tickwheel")
        put("Cache-Control", "no-store")
        for name, value in SECURITY_HEADERS:
            put(name, value)
        if self._ssl is not None:
            put("Strict-Transport-Security", "max-age=31536000")
        if status not in _NO_BODY:
            put("Content-Type", response.content_type)
            put("Content-Length", str(len(body)))
        for name, value in response.headers:
            put(name, value)
        put("Connection", "keep-alive" if keep_alive else "close")
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in headers.values())]
        encoded = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if request is not None and request.method == "HEAD":
            return encoded
        return encoded + body


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


__all__ = ["HttpServer", "parse_head", "server_ssl_context", "split_listen"]
