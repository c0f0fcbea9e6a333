"""Requests, responses and the routes of the server's HTTP endpoint.

Components register GET routes on one :class:`Router` before the endpoint
starts: the console's pages and JSON (``web.console``), and whatever else
the server serves over HTTP (``/metrics``). A route's pattern is a path whose
segments are literal or ``{name}``; ``{name}`` matches exactly one non-empty
segment, percent-decoded (so ``%2F`` inside a segment never splits it), and
reaches the handler as ``request.params[name]``. HEAD is answered wherever
GET is, without the body; any other method is 405.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

_PARAM = re.compile(r"^\{([a-z_][a-z0-9_]*)\}\Z")
_LITERAL = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@-]+\Z")
ALLOWED_METHODS = ("GET", "HEAD")


@dataclass(frozen=True)
class Request:
    """One parsed HTTP request (the endpoint takes no request bodies)."""

    method: str
    target: str
    """The request target as sent: path and query, still percent-encoded."""
    path: str
    """The path part of ``target``, still percent-encoded."""
    query: Mapping[str, str]
    """Query parameters, decoded; a parameter given twice is refused (400) before any handler runs."""
    headers: Mapping[str, str]
    """Header names in lower case; a repeated header's values joined with ``", "``."""
    params: Mapping[str, str] = field(default_factory=dict)
    """The route's ``{name}`` segments, decoded."""
    peer: str = ""

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass(frozen=True)
class Response:
    """What a handler returns. The endpoint adds ``Content-Length``,
    ``Date``, ``Connection`` and the security headers; a header named here
    replaces the endpoint's default of that name (``Cache-Control`` is
    ``no-store`` unless the handler says otherwise)."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> "Response":
        body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return cls(status, body, "application/json", headers)

    @classmethod
    def text(cls, text: str, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> "Response":
        return cls(status, text.encode(), "text/plain; charset=utf-8", headers)


class HttpError(Exception):
    """Raised by the endpoint or a handler: answered with ``status`` and a
    plain-text ``message`` (handlers that answer JSON build their own
    error responses)."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers

    def response(self) -> Response:
        return Response.text(self.message + "\n", self.status, self.headers)


Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class _Route:
    pattern: str
    segments: tuple[tuple[bool, str], ...]
    """(is a parameter, literal text or parameter name) per segment."""
    handler: Handler


def _segments(path: str) -> list[str]:
    """The segments of an absolute path (``/a/b`` → ``["a", "b"]``; ``/`` → ``[]``)."""
    if not path.startswith("/"):
        raise ValueError(f"not an absolute path: {path!r}")
    return [] if path == "/" else path[1:].split("/")


class Router:
    """GET routes by path pattern; see the module docstring."""

    def __init__(self) -> None:
        self._routes: list[_Route] = []

    def get(self, pattern: str, handler: Handler) -> None:
        """Serve GET (and HEAD) on ``pattern`` with ``handler``. ValueError
        for a malformed pattern, or one that would match the same paths as
        a route already registered (two components claiming one path)."""
        parsed: list[tuple[bool, str]] = []
        for segment in _segments(pattern):
            match = _PARAM.match(segment)
            if match:
                parsed.append((True, match.group(1)))
            elif _LITERAL.match(segment) and segment not in (".", ".."):
                parsed.append((False, segment))
            else:
                raise ValueError(f"route {pattern!r}: bad segment {segment!r}")
        names = [name for is_param, name in parsed if is_param]
        if len(names) != len(set(names)):
            raise ValueError(f"route {pattern!r}: a parameter name appears twice")
        for route in self._routes:
            if len(route.segments) == len(parsed) and all(
                a[0] or b[0] or a[1] == b[1] for a, b in zip(route.segments, parsed)
            ):
                raise ValueError(f"route {pattern!r} overlaps {route.pattern!r}")
        self._routes.append(_Route(pattern, tuple(parsed), handler))

    def resolve(self, path: str) -> tuple[Handler, dict[str, str]]:
        """The handler for a request path (percent-encoded) and its decoded
        parameters. HttpError 404 when no route matches, 400 when a segment
        does not decode (bad UTF-8, a control character, ``.`` or ``..``)."""
        raw = _segments(path)
        for route in self._routes:
            if len(route.segments) != len(raw):
                continue
            params: dict[str, str] = {}
            for (is_param, text), segment in zip(route.segments, raw):
                if is_param:
                    if not segment:
                        break
                    params[text] = _decode(segment)
                elif segment != text:
                    break
            else:
                return route.handler, params
        raise HttpError(404, "not found")

    @property
    def patterns(self) -> list[str]:
        return [route.pattern for route in self._routes]


def _decode(segment: str) -> str:
    try:
        text = unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise HttpError(400, "a path segment is not valid UTF-8") from None
    if text in (".", "..") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise HttpError(400, "a path segment holds a control character or is a dot segment")
    return text
