"""Wake-ups: a write that makes something due before the owner's next claim
asks the owner of its partition to claim now, instead of at its next tick;
a write that made executions ready now (a trigger, a backfill) asks it to
hand out now as well.

The dispatcher claims every tick; a one-off created due now, an update that
moves a job's next run to now, a resume whose next fire is due would wait
up to one tick of the server owning the job's partition, counted against
lateness. After such a write commits, the API calls :meth:`Wakeup.due` once
per request with each written job's (job id, next due instant). A due
instant within ``within`` seconds makes the holder of the job's partition
(hashed for those only; the holder as this server's ownership view last
saw it) worth waking:

* the holder is this server: :meth:`Dispatcher.wake
  <tickwheel_server.dispatcher.dispatcher.Dispatcher.wake>` in process;
* another server: a put on that server's wake key
  (:func:`~tickwheel_server.lease.keys.wake_key`, under this server's
  session, so it vanishes with it), which the holder follows by watch
  (:meth:`Wakeup.follow`) and turns into its own ``Dispatcher.wake``.

A trigger or backfill (``ready=True``: its executions exist, ready now, and
no claim will see them) wakes the holder's hand-out round instead
(``ready``, the gateway's ready wake, which merges a flood of them into at
most one round per gap: :meth:`.Gateway.wake_ready
<tickwheel_server.gateway.gateway.Gateway.wake_ready>`; the put's value then ends in
:data:`READY`, or :data:`BOTH` when a claim's wake was merged into the same
put): the holder's wheel would otherwise not know of them, and they would
wait for the hand-out's sweep. It does not wake the claim, which would
find nothing, and which would borrow the workers' credit the round needs
(:mod:`~tickwheel_server.gateway.claimed`).

CockroachDB has no LISTEN/NOTIFY, so the wake travels through what every
server already shares: the lease store (etcd, or the in-process store of
``tickwheel dev``). The key is per *server*, not per partition or job: a
batch of 1 000 jobs over every partition of a fleet of N servers is at most
N - 1 puts. A put to a server that had none for a window goes out at once;
later ones within the window are merged into one put at its end. The
window is ``spacing`` × (N - 1), at most ``max_window``: however many
servers write due-now jobs without pause, a server receives about one wake
per ``spacing`` (its dispatcher's wake gap: more would not bring more
claims), and the whole fleet puts about N / ``spacing`` times a second
(2 N (N - 1) beyond the cap). What is pending is a set of server ids:
bounded by the members.

A wake is only a hint: the claim it brings forward still reads only rows
due by then (never early), fenced as every claim; a wake lost (etcd down,
a holder moved, a put refused) only means the next tick. The dispatcher
bounds how often wakes can make it claim (its ``wake_gap``), so a tenant
writing due-now jobs in a loop cannot make the servers spin.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable
from typing import Protocol

from tickwheel.shared.backoff import BackoffSleeper, kept_running
from tickwheel.shared.clock import Clock
from tickwheel.shared.ids import partition_of, to_us

from ..lease.base import LeaseStore, Session
from ..lease.types import EventType, LeaseStoreClosed, LeaseStoreError, SessionLost, WatchCompacted
from ..telemetry.outages import OutageLog
from .ownership_view import RETRY_CAP, RETRY_INITIAL

log = logging.getLogger(__name__)

DEFAULT_SPACING = 0.05
"""Seconds between the wakes a server receives from all the others together
(the dispatcher's wake gap); see the module docstring."""
DEFAULT_MAX_WINDOW = 0.5
"""Seconds: the longest a wake is held back for merging, whatever the fleet."""
CLAIM, ROUND = 1, 2
"""What a wake asks of its holder (a set of them): a claim, a hand-out round."""
READY = " ready"
"""The end of a wake put's value (the sender's server id) that asks for a hand-out round, not a claim."""
BOTH = " claim ready"
"""The end of a wake put's value that asks for both; a value with neither asks for a claim."""


class Holders(Protocol):
    """What the wake-up needs of partition ownership."""

    server_id: str
    partition_count: int

    def holder(self, partition: int) -> str | None:
        """The server id holding ``partition`` as last seen (None: nobody)."""

    def wake_key(self, server_id: str) -> str:
        """The wake key of ``server_id``."""

    def members(self) -> list[str]:
        """The live members as last seen."""


class Wakeup:
    """Sends wake-ups to the holders of partitions made due, and follows this
    server's own wake key; see the module docstring.

    ``local`` wakes this server's dispatcher, ``ready`` its hand-out
    (gateway); ``session`` returns this
    server's session now (puts are made under it; none while it is lost);
    ``within`` is how soon (seconds) a due instant must be to be worth a
    wake: the dispatcher's tick and then some, as anything later is claimed
    by a tick into the timer wheel before its instant anyway.
    """

    def __init__(
        self,
        leases: LeaseStore,
        ownership: Holders,
        clock: Clock,
        *,
        local: Callable[[], None],
        ready: Callable[[], None] = lambda: None,
        session: Callable[[], Session | None],
        within: float,
        spacing: float = DEFAULT_SPACING,
        max_window: float = DEFAULT_MAX_WINDOW,
    ) -> None:
        if not within > 0 or not 0 <= spacing <= max_window:
            raise ValueError("within must be > 0 and 0 <= spacing <= max_window seconds")
        self._leases = leases
        self._ownership = ownership
        self._clock = clock
        self.outages = OutageLog(log, "wake key", clock, then="a wake missed meanwhile is the next tick's")
        self._local = local
        self._ready = ready
        self._session = session
        self._within_us = math.ceil(within * 1e6)
        self._spacing = spacing
        self._max_window = max_window
        self._pending: dict[str, int] = {}
        """Target -> what its wake asks for (:data:`CLAIM`, :data:`ROUND`, both)."""
        self._sent_at: dict[str, float] = {}
        """Target -> monotonic instant of its last put, pruned once a window old."""
        self._kick = asyncio.Event()
        self.puts = 0
        """Wake puts made (counted when sent, whether or not they landed)."""
        self.received = 0
        """Wakes seen on this server's own key."""
        self.local_wakes = 0
        self.following = asyncio.Event()
        """Set once this server's wake key is watched (wakes put before are not seen)."""

    # -- the writer's side ----------------------------------------------------------

    def due(self, dues: Iterable[tuple[str, int | None]], *, ready: bool = False) -> None:
        """After a write committed: ``dues`` is (job id, next due instant in
        µs since the epoch, None for none) of each job written. Wakes the
        holders of the partitions of those due within ``within`` (only their
        ids are hashed) to claim; ``ready``: the write made executions of
        those jobs ready now, and the holders' hand-out is woken instead.
        Returns at once (puts go out from :meth:`run`)."""
        limit = to_us(self._clock.now()) + self._within_us
        count = self._ownership.partition_count
        partitions = {partition_of(job_id, count) for job_id, due_us in dues if due_us is not None and due_us <= limit}
        if not partitions:
            return
        me = self._ownership.server_id
        kind = ROUND if ready else CLAIM
        local = False
        for partition in partitions:
            holder = self._ownership.holder(partition)
            if holder is None:
                continue  # nobody holds it: its next owner claims it when it wins it
            if holder == me:
                local = True
            else:
                self._pending[holder] = self._pending.get(holder, 0) | kind
        if local:
            self.local_wakes += 1
            self._wake(kind)
        if self._pending:
            self._kick.set()

    async def run(self) -> None:
        """Follow this server's wake key and send the pending puts, until
        cancelled. Either part that fails unexpectedly is logged and started
        again (wakes meanwhile are the next tick's)."""
        async with asyncio.TaskGroup() as group:
            for part in (self._send_forever, self.follow):
                group.create_task(
                    kept_running(part, self._clock, log, "wake-ups", initial=RETRY_INITIAL, cap=RETRY_CAP)
                )

    async def _send_forever(self) -> None:
        while True:
            await self._kick.wait()
            now = self._clock.monotonic()
            window = self.window()
            self._sent_at = {t: at for t, at in self._sent_at.items() if at + window > now}
            ready = {t: self._pending[t] for t in self._pending if t not in self._sent_at}
            if not ready:  # every pending target had its put this window: merge into one at its end
                await self._clock.sleep(min(self._sent_at[t] for t in self._pending) + window - now)
                continue
            for target in ready:
                del self._pending[target]
                self._sent_at[target] = now
            if not self._pending:
                self._kick.clear()
            self.puts += len(ready)
            await asyncio.gather(*(self._put(target, ready[target]) for target in sorted(ready)))

    def window(self) -> float:
        """Seconds within which puts to one server are merged: ``spacing``
        × the other members, at most ``max_window``."""
        others = max(1, len(self._ownership.members()) - 1)
        return min(self._max_window, self._spacing * others)

    def _wake(self, kind: int) -> None:
        if kind & CLAIM:
            self._local()
        if kind & ROUND:
            self._ready()

    async def _put(self, target: str, kind: int) -> None:
        session = self._session()
        if session is None or session.lost.is_set():
            return  # no session: the target's next tick
        value = self._ownership.server_id + {CLAIM: "", ROUND: READY}.get(kind, BOTH)
        try:
            await self._leases.put(self._ownership.wake_key(target), value, session=session)
        except (LeaseStoreError, SessionLost) as error:
            log.debug("wake-up of %s not sent (%s): it claims at its next tick", target, error)

    # -- the holder's side ------------------------------------------------------------

    async def follow(self) -> None:
        """Watch this server's wake key; each put wakes the dispatcher.
        Rides out lease store errors (a wake missed meanwhile is the next
        tick); ends when the store closes."""
        key = self._ownership.wake_key(self._ownership.server_id)
        backoff = BackoffSleeper(self._clock, initial=RETRY_INITIAL, cap=RETRY_CAP)
        while True:
            try:
                async with self._leases.watch(key) as events:
                    backoff.reset()
                    self.outages.ok()
                    self.following.set()
                    async for event in events:
                        if event.type is EventType.PUT:
                            self.received += 1
                            value = bytes(event.value)
                            both = value.endswith(BOTH.encode())
                            self._wake(CLAIM | ROUND if both else ROUND if value.endswith(READY.encode()) else CLAIM)
            except WatchCompacted:
                continue  # from now on: what was missed is the next tick's
            except LeaseStoreClosed:
                return
            except LeaseStoreError as error:
                self.outages.failed("following this server's wake key", error)
                await backoff.sleep()
