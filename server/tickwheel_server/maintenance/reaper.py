"""The reaper: requeues executions stamped with an etcd session that no longer exists.

A server stamps every execution it hands out with its session (the
``owner`` column). When that server dies its session expires, and nobody
else holds its in-memory view of what its workers run. One server per
cluster (elected through the lease store under :data:`REAPER_KEY`) looks,
every ``interval``, at the sessions running executions are stamped with
(a probe a session of the ``executions_owner`` partial index:
:mod:`..store.session_walk`) and at the
sessions alive (the leased keys of live servers, one range read). An owner
that is not alive is given ``grace`` (default one session TTL) for its
workers to reconnect elsewhere and re-attach, which re-stamps the rows with
the new server's session; what is still stamped with it afterwards is
requeued in batches, same id, the next hand-out being delivery + 1. These
requeues do not count towards the poison cap: the server died, not
necessarily the worker.

Running executions of a dead session that the worker each was dealt to
said, saying hello again, it does not hold (a server started them ahead of
their instant and died before sending them: :mod:`..store.unheld`) are
given back at once too, delivery back and no attempt, as soon as their
owner is seen not alive: the grace is for workers that may hold a row,
and no worker holds these.

Executions a dead session had armed ahead of their instant (status
``armed``: no worker ever saw them) are put back to ``scheduled`` with no
grace, as soon as their owner is seen not alive (a probe a session of the
``executions_armed`` partial index): any server's next round hands them out.
That is safe even for a server that only lost its session and lives: its
start of an armed row is conditional on the row still being armed by its
current session, so it then sends nothing of what was disarmed.

The leader also runs the cluster's other periodic ``duties`` (such as the
"it didn't run" lateness check) once per pass: work one server should do.

The election only avoids duplicated work: every requeue is conditional on
the row still being ``running`` under the dead owner (and takes rows with
``SKIP LOCKED``), so two reapers at once, or a reaper racing a
re-attachment, can never requeue one delivery twice. A server whose own
session was lost re-stamps its rows under its new session (see
:meth:`RequeueStore.restamp <tickwheel_server.store.requeue.RequeueStore.restamp>`) well within the grace.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from tickwheel.shared.clock import Clock

from ..lease import LeaseStore, Session
from ..lease.keys import REAPER_KEY, SERVERS_PREFIX, session_name
from ..store.arming import ArmStore
from ..store.executions import Retry
from ..store.requeue import RequeueStore
from ..telemetry.outages import OutageLog
from .election import campaign, sleep_or

log = logging.getLogger(__name__)

class Reaper:
    def __init__(
        self,
        store: RequeueStore,
        leases: LeaseStore,
        session: Callable[[], Session],
        clock: Clock,
        *,
        server_id: str,
        grace: float,
        interval: float = 2.0,
        batch: int = 1000,
        on_requeued: Callable[[list[Retry]], None] | None = None,
        duties: Sequence[Callable[[], Awaitable[object]]] = (),
        arming: ArmStore | None = None,
        on_disarmed: Callable[[list[Retry]], None] | None = None,
    ) -> None:
        self._store = store
        self._arming = arming
        self._on_disarmed = on_disarmed
        self._leases = leases
        self._session = session
        self._clock = clock
        self.outages = OutageLog(log, "reaper", clock)
        self._server_id = server_id
        self.grace = grace
        self._interval = interval
        self._batch = batch
        self._on_requeued = on_requeued
        self._duties = list(duties)
        self._dead_since: dict[str, float] = {}
        self.leading = False
        self.reaped = 0
        self.released = 0
        """Running rows of dead sessions given back without the grace (:meth:`_release_unheld`)."""

    async def run(self) -> None:
        """Campaign for the reaper key; while leading, reap every ``interval``."""
        while True:
            ownership = await campaign(
                self._leases, REAPER_KEY, self._server_id, self._session, self._clock, retry=min(1.0, self._interval)
            )
            self.leading = True
            self._dead_since.clear()  # a new leader gives every dead owner the whole grace
            log.info("this server is the reaper (grace %g s)", self.grace)
            try:
                while not ownership.lost.is_set():
                    failed = False
                    try:
                        await self.reap_once()
                    except Exception as error:
                        failed = True
                        self.outages.failed("the reaper's pass", error)
                    for duty in self._duties:
                        try:
                            await duty()
                        except Exception as error:
                            failed = True
                            self.outages.failed(f"cluster duty {getattr(duty, '__qualname__', duty)}", error)
                    if not failed:
                        self.outages.ok()
                    await sleep_or(self._clock, self._interval, ownership.lost)
            finally:
                self.leading = False
            log.info("this server is no longer the reaper")

    async def _release_unheld(self, owner: str) -> int:
        """Give back at once, no grace, the dead ``owner``'s running rows that
        the worker each was dealt to said, saying hello again, it does not
        hold (started ahead and never sent: :mod:`..store.unheld`). Only
        those put back go to ``on_disarmed`` (the wheel); a run whose job
        is gone ended canceled and has nothing to wake. Returns how many ended either way."""
        count = canceled = 0
        while True:
            released = await self._store.release_unheld(owner, self._batch)
            count += len(released.back) + len(released.canceled)
            canceled += len(released.canceled)
            if released.back and self._on_disarmed is not None:  # given back as a disarm is: no attempt, no requeue
                self._on_disarmed(released.back)
            if released.picked < self._batch:
                break
        if count:
            gone = f"; {canceled} of them canceled, their job deleted" if canceled else ""
            log.warning("reaper: gave back %d unsent executions of expired session %s (their worker does not "
                        "hold them%s)", count, owner, gone)
        self.released += count
        return count

    async def reap_once(self) -> int:
        """One pass: disarm what dead owners armed, and requeue what they still
        hold past the grace; returns how many executions it requeued or disarmed."""
        owners = await self._store.running_owners()
        arming = await self._arming.armed_owners() if self._arming is not None else []
        if not owners and not arming:
            self._dead_since.clear()
            return 0
        live = {session_name(kv.lease) for kv in await self._leases.get_prefix(SERVERS_PREFIX) if kv.lease}
        disarmed = 0
        for owner in arming:
            if owner in live:
                continue
            while True:
                back = await self._arming.disarm_owner(owner, self._batch)
                disarmed += len(back)
                if back and self._on_disarmed is not None:
                    self._on_disarmed(back)
                if len(back) < self._batch:
                    break
        if disarmed:
            log.warning("reaper: disarmed %d executions armed by expired sessions", disarmed)
        now = self._clock.monotonic()
        for gone in set(self._dead_since) - set(owners):
            del self._dead_since[gone]
        reaped = 0
        for owner in owners:
            if owner in live:
                self._dead_since.pop(owner, None)
                continue
            disarmed += await self._release_unheld(owner)
            first_seen = self._dead_since.setdefault(owner, now)
            if now - first_seen < self.grace:
                continue
            reason = f"server session {owner} expired and no worker re-attached within {self.grace:g} s"
            count = 0
            while True:
                result = await self._store.reap_owner(owner, reason, self._batch)
                count += len(result.requeued)
                if result.requeued and self._on_requeued is not None:
                    self._on_requeued(result.requeued)
                if len(result.requeued) < self._batch:
                    break
            if count:
                log.warning("reaper: requeued %d executions of expired session %s", count, owner)
            reaped += count
            self._dead_since.pop(owner, None)
        self.reaped += reaped + disarmed
        return reaped + disarmed
