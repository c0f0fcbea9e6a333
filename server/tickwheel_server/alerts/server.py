"""Alerts a server raises about itself: its open circuits and its clock skew.

Both are written off the hot paths: circuit changes are collected by the
breaker (:mod:`tickwheel_server.circuits`) and recorded here in one
transaction a pass; the clock-skew alert follows the gateway's fence
(:mod:`tickwheel_server.gateway.fence`), which calls it when the comparison
with the database's clock changes its verdict.
"""

from __future__ import annotations

import logging

from tickwheel.shared.clock import Clock

from ..circuits import CircuitBreaker
from ..policy.breaker import CircuitChange
from ..store.alerts import AlertStore
from ..telemetry.outages import OutageLog
from .catalogue import NewAlert, clock_skew_key

log = logging.getLogger("tickwheel.server")


async def record_circuits(breaker: CircuitBreaker, alerts: AlertStore, clock: Clock, interval: float = 1.0) -> None:
    """About every ``interval``: the circuits that opened or closed since the
    last pass are logged and their ``circuit_open`` alerts raised or resolved
    in one transaction, off the results' path; a failed write is tried again
    with the next pass's changes. Runs until cancelled."""
    pending: list[CircuitChange] = []
    outages = OutageLog(log, "circuit alerts", clock)
    while True:
        changes = breaker.take_changes()
        for change in changes:
            if change.opened:
                log.warning("circuit open for tenant %s's calls to %s: %s; retries pause %g s",
                            change.tenant, change.host, change.reason, change.open_for)
            else:
                log.info("circuit closed for tenant %s's calls to %s: %s", change.tenant, change.host,
                         change.reason)
        pending += changes
        if pending:
            try:
                await alerts.record_circuits(pending)
                pending = []
            except Exception as error:
                outages.failed(f"recording {len(pending)} circuit changes as alerts", error)
            else:
                outages.ok()
        await clock.sleep(interval)


class ClockSkewAlert:
    """The ``clock_skew`` alert of one server: raised (again) while its clock
    disagrees with the database's, or cannot be compared with it (the fence
    calls it so only once that lasted its grace); resolved once they agree."""

    def __init__(self, alerts: AlertStore, server_id: str) -> None:
        self._alerts = alerts
        self._server_id = server_id

    async def __call__(self, skew: float | None, ok: bool) -> None:
        key = clock_skew_key(self._server_id)
        if ok:
            if await self._alerts.get(key) is not None:
                await self._alerts.resolve(key)
            return
        if skew is None:
            summary = (f"server {self._server_id} cannot compare its clock with the database's (reads fail or "
                       "take too long): it hands nothing out until they are compared")
            details = {"skew_seconds": "unknown"}
        else:
            summary = (f"server {self._server_id}'s clock is {skew:+.3f} s off the database's: "
                       "it hands nothing out until they agree within 250 ms")
            details = {"skew_seconds": f"{skew:.3f}"}
        await self._alerts.raise_alert(
            NewAlert(key=key, kind="clock_skew", severity="critical", server_id=self._server_id, summary=summary,
                     details=details)
        )
