"""``GET /metrics``: the server's metrics in the Prometheus text format (or
OpenMetrics, when the scraper's ``Accept`` header asks for it).

Only for the operator: the admin token as ``Authorization: Bearer …`` (a
Prometheus scrape job's ``authorization: {credentials_file: …}``), since
the figures name tenants. A tenant API key or a worker credential is 403.
"""

from __future__ import annotations

from ..auth.authenticator import Authenticator
from ..telemetry.metrics import Metrics
from .auth import require_admin
from .router import Request, Response, Router


def install_metrics(router: Router, *, auth: Authenticator, metrics: Metrics) -> None:
    """Register ``/metrics`` on ``router``."""

    async def scrape(request: Request) -> Response:
        await require_admin(auth, request)
        body, content_type = await metrics.exposition(request.headers.get("accept", ""))
        return Response(200, body, content_type)

    router.get("/metrics", scrape)
