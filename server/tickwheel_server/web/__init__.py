"""The server's HTTP endpoint and the web console it serves.

``HttpServer`` serves the GET routes of a ``Router``; components register
theirs on it (the console with :func:`install_console`; ``/metrics`` with
:func:`install_metrics`).
"""

from .console import install_console
from .http import HttpServer, server_ssl_context, split_listen
from .metrics import install_metrics
from .router import HttpError, Request, Response, Router

__all__ = [
    "HttpError",
    "HttpServer",
    "Request",
    "Response",
    "Router",
    "install_console",
    "install_metrics",
    "server_ssl_context",
    "split_listen",
]
