"""Skipped occurrences: the ``skipped`` alert of a job whose misfire or
overlap policy, or backlog cap, skipped some of its occurrences, and its resolution.

Raised where the skip range is written, in the same transaction, so the
alert and the range commit together: by the dispatcher's claim for a misfire
or a backlog (:class:`~tickwheel_server.store.dispatch.DispatchStore` with an alert
store) and by the hand-out for an overlap (:func:`overlap_alerts`, through
the ``on_skip`` hook of :class:`~tickwheel_server.store.handout.HandoutStore`).
One alert per job (``skipped:<job id>``): while it is open, each further
range bumps its count and replaces its details with the latest range. A
paused job or tenant raises nothing: pausing is asked for.

It resolves once the job ran again: an occurrence nominally after the last
one skipped reached an end (succeeded, failed or dead; canceled does not
count), or the job is gone (deleted, or completed with nothing left to
run). A job that keeps overrunning its interval under the ``skip`` overlap
policy keeps one open alert (every run it finishes is older than the latest
skip), rather than opening and resolving one per cycle. :class:`SkipWatch`
checks the open ones (:mod:`tickwheel_server.store.skipped`) on one server of the cluster, the reaper's leader
(see :class:`~tickwheel_server.maintenance.reaper.Reaper`'s ``duties``), every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tickwheel.shared.ids import from_us

from ..policy.admission import Skip
from ..store.skipped import SCAN_LIMIT, SkipWatchStore
from .catalogue import NewAlert, skipped_alert

log = logging.getLogger(__name__)


def overlap_alerts(skipped: Iterable[Skip]) -> list[NewAlert]:
    """One ``skipped`` alert per job for the occurrences a hand-out round
    skipped under their job's overlap policy (the range they extend)."""
    by_job: dict[str, list[Skip]] = {}
    for item in skipped:
        by_job.setdefault(item.candidate.job_id, []).append(item)
    raised = []
    for job_id, items in by_job.items():
        nominal = [item.candidate.nominal_at for item in items]
        raised.append(
            skipped_alert(
                job_id=job_id, tenant=items[0].candidate.tenant, reason="overlap",
                from_at=from_us(min(nominal)), to_at=from_us(max(nominal)), count=len(items),
            )
        )  # fmt: skip
    return raised


class SkipWatch:
    """The cluster duty: one :meth:`check_once` per reaper pass."""

    def __init__(self, store: SkipWatchStore, *, limit: int = SCAN_LIMIT) -> None:
        self._store = store
        self._limit = limit

    async def check_once(self) -> int:
        """One pass; how many ``skipped`` alerts were resolved."""
        resolved = await self._store.resolve_ran(self._limit)
        if resolved:
            log.debug("resolved %d skipped-occurrence alerts: their jobs ran again", resolved)
        return resolved
