"""The web console's HTTP endpoint against hostile requests, on a real
server on the embedded stores and on PostgreSQL + etcd.

- Every route but the page's static files needs a credential: without one
  it is 401 with a challenge, and a worker credential is 403.
- The endpoint is read-only: POST, PUT, DELETE and PATCH are 405 on every
  route, so there is no state-changing request to forge (and a credential
  travels only in the ``Authorization`` header, never in a cookie a
  browser would attach to a forged request).
- Every response, errors included, carries the security headers
  (``nosniff``, ``X-Frame-Options: DENY``, the strict CSP, ``no-store``),
  and an error never echoes the request's markup as HTML: errors are
  ``text/plain`` or JSON.
- Every query parameter is bounded or refused naming itself: hostile
  values (NUL, a bidi override, 8 KiB, a number of 30 digits) are 400 or
  answer as a missing thing does, never 500, and nothing is logged at
  ERROR.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
from urllib.parse import quote

import pytest

from tests.support.server import running_server

ROUTES = [
    "/api/session", "/api/jobs", "/api/jobs/j", "/api/jobs/j/executions", "/api/jobs/j/lateness",
    "/api/jobs/j/preview", "/api/deadletters", "/api/cluster", "/metrics",
]  # fmt: skip
STATIC = ["/", "/console.js", "/console.css", "/favicon.svg"]
SECURITY = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "cache-control": None,  # present; static files may be cached (revalidated by ETag)
    "referrer-policy": "no-referrer",
}

HOSTILE = ["\x00", "\u202e", "<script>alert(1)</script>", "x" * 8000, "9" * 30, "-1", "%zz", "\ud800", "\u00b2"]
"""``\u00b2`` (superscript two) is a digit to ``str.isdigit()`` but not to ``int()``: a
page size of it answered 500 and logged a traceback."""


@pytest.fixture
async def console(store_and_etcd):
    store, etcd = store_and_etcd
    async with running_server(store, etcd, http_listen="127.0.0.1:0") as running:
        yield running


def fetch(port: int, method: str, path: str, headers: dict[str, str] | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def check_headers(path: str, headers: dict[str, str]) -> None:
    for name, value in SECURITY.items():
        assert name in headers, (path, name)
        assert value is None or headers[name] == value, (path, name, headers[name])
    assert "frame-ancestors 'none'" in headers["content-security-policy"], path
    assert headers["content-type"].split(";")[0] in (
        "application/json", "text/plain", "text/html", "text/javascript", "text/css", "image/svg+xml",
        "application/openmetrics-text",
    ), (path, headers["content-type"])  # fmt: skip


def query(name: str, value: str) -> str:
    return f"{name}={quote(value, safe='', errors='surrogatepass')}"


async def test_hostile_requests_get_bounded_answers_with_the_security_headers(console, caplog) -> None:
    caplog.set_level(logging.ERROR)
    port = console.server.http.port
    key = await console.create_tenant("acme")
    worker = await console.issue_worker_credential(["acme"])
    tenant = {"Authorization": f"Bearer {key}"}
    run = asyncio.get_running_loop().run_in_executor

    async def get(method: str, path: str, headers: dict[str, str] | None = None):
        status, answered, body = await run(None, fetch, port, method, path, headers)
        check_headers(path, answered)
        assert status < 500, (method, path, status, body[:300])
        if status >= 400:
            assert answered["content-type"].split(";")[0] in ("application/json", "text/plain"), (path, answered)
        return status, body

    for path in STATIC:
        assert (await get("GET", path))[0] == 200, path
    for path in ROUTES:
        assert (await get("GET", path))[0] == 401, path
        assert (await get("GET", path, {"Authorization": f"Bearer {worker}"}))[0] == 403, path
        assert (await get("GET", path, {"Authorization": "Bearer " + "x" * 8000}))[0] == 401, path
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert (await get(method, path, tenant))[0] in (405, 413), (method, path)

    parameters = {
        "/api/jobs": ["page_size", "page_token"],
        "/api/jobs/j/executions": ["page_size", "page_token"],
        "/api/jobs/j/preview": ["cron", "time_zone", "days"],
        "/api/deadletters": ["job_id", "page_size", "page_token"],
    }
    for path, names in parameters.items():
        for name in names:
            for value in HOSTILE:
                target = f"{path}?{query(name, value)}"
                status, body = await get("GET", target, tenant)
                assert status in (200, 400, 404), (target[:100], status, body[:200])
                assert b"<script>" not in body or body.startswith(b"{"), (target[:100], body[:200])
    # A NUL here reached PostgreSQL and answered 500: it is refused naming the parameter.
    status, body = await get("GET", "/api/deadletters?job_id=%00", tenant)
    assert status == 400 and json.loads(body)["error"]["fields"][0]["field"] == "job_id", body
    for job_id in HOSTILE:
        status, body = await get("GET", f"/api/jobs/{quote(job_id, safe='', errors='surrogatepass')}", tenant)
        assert status in (400, 404), (job_id[:20], status, body[:200])
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage()[:300] for r in errors]
