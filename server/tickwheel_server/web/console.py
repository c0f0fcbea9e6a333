"""The web console, assembled onto a router: its page and its JSON API.

Read-only. A visitor signs in on the page with a tenant API key (the
tenant's jobs, their next runs, history, lateness and dead letters, and a
preview of what a schedule change would do to a job's runs) or the
admin token (the cluster); the page keeps the credential in the tab's
sessionStorage and sends it as ``Authorization: Bearer …`` to ``/api/``.
"""

from __future__ import annotations

from tickwheel.shared.clock import Clock
from tickwheel.shared.targets import TargetPolicy

from ..api.admin import AdminServicer
from ..api.decoding import STARTED, Starting
from ..auth.authenticator import Authenticator
from ..store.deadletters import DeadLetterStore
from ..store.history import HistoryStore
from ..store.jobs import JobStore
from .api import ConsoleApi
from .cluster import ClusterView
from .router import Router
from .static import StaticFiles


def install_console(
    router: Router,
    *,
    auth: Authenticator,
    jobs: JobStore,
    history: HistoryStore,
    dead_letters: DeadLetterStore,
    admin: AdminServicer,
    server_id: str,
    clock: Clock,
    target_policy: TargetPolicy,
    starting: Starting = STARTED,
) -> None:
    """Register the console's routes (``/``, its static files, ``/api/…``)
    on ``router``. ``admin`` answers the cluster view (its ClusterStatus);
    ``server_id`` is this server's; ``clock`` and ``target_policy`` check a
    previewed schedule change as UpdateJob does; ``/api/`` answers 503 until
    ``starting`` is done."""
    StaticFiles().routes(router)
    ConsoleApi(
        auth, jobs, history, dead_letters, ClusterView(admin, server_id), clock, target_policy, starting
    ).routes(router)
