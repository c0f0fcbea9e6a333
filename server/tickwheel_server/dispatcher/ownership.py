"""Partition ownership: which partitions this server dispatches, won in the
lease store and fenced in the SQL store.

Keys (:mod:`tickwheel_server.lease.keys`; ``key_prefix`` defaults to
``/tickwheel/``): ``<key_prefix>members/<server id>`` says this server takes
part in ownership, under its session, so it vanishes with the session (apart
from ``/tickwheel/servers/``, so that a draining server can leave the member
set while it still serves its workers); ``<key_prefix>partitions/<n>`` holds
the owner of partition ``n`` (value: its server id), created by
compare-and-create under the owner's session, its create revision the
owner's fencing epoch.

What each server does (all members run the same deterministic plan):

1. Follow both prefixes (:mod:`~tickwheel_server.dispatcher.ownership_view`).
2. Compute the assignment
   (:func:`~tickwheel_server.policy.ownership.assign_partitions`) from the
   live members and the current holders: balanced to within one partition,
   and *sticky* (members keep what they hold up to their quota), so a join
   or a leave moves only the partitions that must move.
3. Release (``resign``) what it holds beyond its share; ``try_acquire`` the
   partitions of its share that nobody holds; wait (by watch) for those that
   another member still holds and is about to release.
4. Raise each newly won partition's epoch in the SQL store to the ownership's
   fencing revision (:mod:`~tickwheel_server.dispatcher.ownership_fence`);
   only then is the partition reported in :meth:`PartitionOwnership.owned`.
   A raise refused because the store already holds a higher epoch means the
   ownership is stale: it is resigned, never used.

Timing: a member that dies stops renewing its session; when the lease store
expires it (one session TTL), its member key and partition keys are deleted in
one revision, every survivor's watch sees it and they acquire at once. A tick
(default 1 s) re-runs the plan while something is unsettled (a raise that
failed, a partition still held by someone else), so a partition is never
without an owner for longer than one session TTL plus a tick. A member frozen
rather than dead may be in the middle of a claim whose row locks the raise
waits for: the claim's transaction may sit idle one session TTL at most
(:mod:`~tickwheel_server.store.partitions`, "A frozen holder"), so the
database ends it, and the raise goes through, about when the lease expires.

Draining (:meth:`~PartitionOwnership.drain`, DrainServer before a rolling
restart): the server deletes its member key, then resigns every partition
key. The other members' watches see the member leave (their plans now
give its partitions to them, held: they wait) and then each key's deletion
(they acquire at once, at higher epochs). Until :meth:`~PartitionOwnership.stop`
it plans with an empty share, never rejoins, also under a new session, and
resigns any key the lease store still shows under its name.

Losing the session empties :meth:`~PartitionOwnership.owned` at once (it checks
``session.lost``) and cancels the component's work; it then waits for
:meth:`~PartitionOwnership.reset_session`. The SQL epoch check stops a deposed
owner that has not noticed yet.

Known limit: a member that stays registered (its session alive) but never
acquires its share leaves that share unowned; the component restarts its own
work after an unexpected error, and a process too wedged to do so cannot renew
its session either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel.shared.clock import Clock

from ..lease import keys
from ..lease.base import LeaseStore, Session
from ..lease.types import LeaseStoreClosed, LeaseStoreError, Ownership, SessionLost
from ..policy.ownership import OwnershipPlan, plan_ownership
from ..store.partitions import PartitionStore
from ..telemetry.outages import OutageLog, log_failure
from .ownership_fence import EpochFence
from .ownership_holdings import Holdings, OwnershipChange
from .ownership_view import RETRY_CAP, RETRY_INITIAL, OwnershipView

log = logging.getLogger(__name__)

DEFAULT_KEY_PREFIX = keys.ROOT
DEFAULT_TICK = 1.0


@dataclass(frozen=True)
class OwnershipConfig:
    """Where ownership lives in the lease store, and how often it re-plans."""

    key_prefix: str = DEFAULT_KEY_PREFIX
    """Root of the member and partition keys; ends with ``/``. Tests use a
    per-test prefix to share one etcd."""
    tick: float = DEFAULT_TICK
    """Seconds between re-plans while something is unsettled (a failed raise,
    a partition of our share still held by another member). Changes seen by
    the watches re-plan at once, whatever the tick."""
    acquire_concurrency: int = 32
    """At most this many ``try_acquire`` calls in flight at once."""

    def __post_init__(self) -> None:
        if not self.key_prefix.startswith("/") or not self.key_prefix.endswith("/"):
            raise ValueError(f"key_prefix must start and end with '/', got {self.key_prefix!r}")
        if not self.tick > 0:
            raise ValueError(f"tick must be > 0 seconds, got {self.tick!r}")
        if self.acquire_concurrency < 1:
            raise ValueError("acquire_concurrency must be >= 1")

    @property
    def members_prefix(self) -> str:
        return keys.members_prefix(self.key_prefix)

    @property
    def partitions_prefix(self) -> str:
        return keys.partitions_prefix(self.key_prefix)

    def member_key(self, server_id: str) -> str:
        return keys.member_key(server_id, self.key_prefix)

    def partition_key(self, partition: int) -> str:
        return keys.partition_key(partition, self.key_prefix)

    def wake_key(self, server_id: str) -> str:
        return keys.wake_key(server_id, self.key_prefix)


class PartitionOwnership:
    """Wins, keeps, rebalances and fences this server's partitions.

    Contract:

    * :meth:`owned` is the partitions this server may dispatch, with the epoch
      to pass to :func:`~tickwheel_server.store.partitions.check_epochs`. A
      partition appears only after its epoch was raised in the store; it is
      never reported while the session is lost or after it was replaced.
    * Every change of :meth:`owned` bumps :attr:`generation`, wakes
      :meth:`wait_changed` and calls the listeners (synchronously, in the event
      loop: keep them short) with an :class:`OwnershipChange`. ``lost`` is
      announced before the key is resigned.
    * Session lost: :meth:`owned` is empty at once; the change is announced
      when the component's task runs; nothing more happens until
      :meth:`reset_session`.
    * :meth:`stop` leaves the member set, resigns every partition (so others
      take them at once) and stops; ``release=False`` just stops (the keys go
      when the session ends).
    """

    def __init__(
        self,
        leases: LeaseStore,
        session: Session,
        store: PartitionStore,
        *,
        server_id: str,
        partition_count: int,
        clock: Clock,
        config: OwnershipConfig | None = None,
    ) -> None:
        problem = keys.server_id_problem(server_id)
        if problem is not None:
            raise ValueError(f"server_id {server_id!r}: {problem}")
        if partition_count < 1:
            raise ValueError(f"partition_count must be >= 1, got {partition_count}")
        self.server_id = server_id
        self.partition_count = partition_count
        self.config = config or OwnershipConfig()
        self._leases = leases
        self._fence = EpochFence(store, leases, server_id, clock)
        self._clock = clock
        self.outages = OutageLog(log, "partition ownership", clock, then="trying again next tick")
        self._session_replaced = asyncio.Event()
        self._holdings = Holdings(server_id, session)
        self._refused: set[int] = set()  # stale raise; not retried before the next tick
        self._plan: OwnershipPlan | None = None
        self._unsettled = True
        self._dirty = asyncio.Event()
        self._view = self._new_view()
        self._task: asyncio.Task[None] | None = None
        self._work: asyncio.Task[None] | None = None
        self._stopping = False
        self._draining = False
        self._reconciling = asyncio.Lock()  # a drain waits for a reconcile in progress, never interleaves

    # -- reading ------------------------------------------------------------------

    def owned(self) -> dict[int, int]:
        """Partition -> epoch of every partition this server owns now (see the
        class contract)."""
        return self._holdings.owned()

    @property
    def session(self) -> Session:
        """The session ownership is held under (bind claim work to its scope)."""
        return self._holdings.session

    @property
    def generation(self) -> int:
        """Bumped on every change of :meth:`owned`."""
        return self._holdings.generation

    @property
    def plan(self) -> OwnershipPlan | None:
        """The latest plan (diagnostics)."""
        return self._plan

    @property
    def draining(self) -> bool:
        """True once :meth:`drain` was called (until the process ends)."""
        return self._draining

    def members(self) -> list[str]:
        """The live members as last seen, sorted."""
        return sorted(self._view.members)

    def wake_key(self, server_id: str) -> str:
        """The wake key of ``server_id`` (:mod:`~tickwheel_server.dispatcher.wakeup`)."""
        return self.config.wake_key(server_id)

    def holder(self, partition: int) -> str | None:
        """The server id holding ``partition``'s key as last seen (None: nobody)."""
        return self._view.holders.get(partition)

    async def wait_changed(self, after: int) -> int:
        """Wait until :attr:`generation` is greater than ``after``; return it."""
        return await self._holdings.wait_changed(after)

    def add_listener(self, listener: Callable[[OwnershipChange], None]) -> Callable[[], None]:
        """Call ``listener`` on every change; returns a function that removes it."""
        return self._holdings.add_listener(listener)

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Start taking part (returns at once; watch :meth:`wait_changed`)."""
        if self._task is not None:
            raise RuntimeError("PartitionOwnership already started")
        self._task = asyncio.create_task(self._supervise(), name=f"partition-ownership-{self.server_id}")

    async def reset_session(self, session: Session) -> None:
        """Continue under ``session`` (the app opened it after the previous one
        was lost). Everything held under the previous session is dropped at
        once; the caller closes that session, which deletes its keys."""
        if session is self._holdings.session:
            return
        self._holdings.session = session
        self._drop_all("session replaced")
        work = self._work
        if work is not None and not work.done():
            work.cancel()
        self._session_replaced.set()

    async def drain(self) -> int:
        """Give up every partition for good, for a rolling restart: leave the
        member set, then resign every partition key, so the other members
        take them at once at higher epochs; from then on acquire nothing,
        under this session or a later one, until :meth:`stop`.

        Returns how many partition keys it resigned. ``lost`` is announced
        (listeners called, :meth:`owned` empty) before any key is resigned.
        Waits for a reconcile in progress to finish first, so nothing it
        wins afterwards is kept. Idempotent: a second call resigns nothing
        and returns 0. If the lease store cannot be reached the keys are
        resigned by the next reconciles (or go with the session)."""
        if self._draining:
            return 0
        self._draining = True
        async with self._reconciling:
            self._plan = OwnershipPlan(frozenset(), frozenset(), frozenset(), frozenset())
            held = self._drop_all("draining")
            session = self._holdings.session
            released = 0
            if not session.lost.is_set():
                try:
                    await self._leases.delete(self.config.member_key(self.server_id))
                    resigned = await asyncio.gather(*(self._leases.resign(ownership) for ownership in held))
                    released = sum(1 for done in resigned if done)
                except LeaseStoreError as error:
                    log.warning("draining: %s; resigning again at the next tick", error)
            self._dirty.set()
        log.info("server %s drains: left the member set and resigned %d partitions", self.server_id, released)
        return released

    async def stop(self, *, release: bool = True) -> None:
        """Stop. With ``release``, first leave the member set and resign every
        partition so that the other members take them without waiting for the
        session to expire. Idempotent."""
        if self._stopping:
            return
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        # A cancelled store call keeps running in its thread; let it finish
        # (bounded by its retries) so no connection outlives the component.
        await self._fence.settle()
        held = self._drop_all("stopped")
        session = self._holdings.session
        if release and not session.lost.is_set():
            try:
                await self._leases.delete(self.config.member_key(self.server_id))
                await asyncio.gather(*(self._leases.resign(ownership) for ownership in held))
            except LeaseStoreError as error:
                log.warning("could not release partitions on stop (%s); they go when the session ends", error)

    # -- the work -----------------------------------------------------------------

    async def _supervise(self) -> None:
        backoff = BackoffSleeper(self._clock, initial=RETRY_INITIAL, cap=RETRY_CAP)
        while True:
            self._session_replaced.clear()
            session = self._holdings.session
            if session.lost.is_set():
                self._drop_all("session lost")
                log.warning(
                    "server %s: session %x lost (%s); owning nothing until a new session",
                    self.server_id, session.id, session.lost_reason,
                )
                if self._holdings.session is session:
                    await self._session_replaced.wait()
                continue
            self._work = asyncio.create_task(
                self._session_work(session), name=f"partition-ownership-work-{session.id:x}"
            )
            try:
                await self._work
            except SessionLost:
                continue
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                continue  # reset_session cancelled the work
            except LeaseStoreClosed:
                self._drop_all("lease store closed")
                return
            except LeaseStoreError as error:
                level = logging.WARNING if error.retryable else logging.ERROR
                log.log(level, "partition ownership: %s; retrying", error)
                await backoff.sleep()
            except Exception as error:
                log_failure(log, "partition ownership failed", error, then="releasing and starting again")
                await self._release_everything(session)
                await backoff.sleep()
            else:  # pragma: no cover - the work only ends by raising
                backoff.reset()
            finally:
                self._work = None

    async def _session_work(self, session: Session) -> None:
        async with session.scope():
            self._holdings.keep_session()
            if not self._draining:
                await self._leases.put(self.config.member_key(self.server_id), self.server_id, session=session)
            self._view = view = self._new_view()
            tasks = [
                asyncio.create_task(view.follow_members()),
                asyncio.create_task(view.follow_holders()),
                asyncio.create_task(self._ticker()),
                asyncio.create_task(self._reconcile_loop(session, view)),
            ]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    task.result()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    def _new_view(self) -> OwnershipView:
        return OwnershipView(
            self._leases,
            self._clock,
            key_prefix=self.config.key_prefix,
            partition_count=self.partition_count,
            changed=self._dirty.set,
            holders_read=self._holders_read,
            holder_deleted=self._holder_deleted,
        )

    def _holders_read(self, created: Mapping[int, int], revision: int) -> None:
        # Keys we won at or before `revision` must be in a snapshot read after it.
        for partition, ownership in list(self._holdings.held.items()):
            if ownership.fencing_revision <= revision and created.get(partition) != ownership.fencing_revision:
                self._forget(partition, "partition key gone")

    def _holder_deleted(self, partition: int, revision: int) -> None:
        ownership = self._holdings.held.get(partition)
        # A delete after our key's creation can only be of our key.
        if ownership is not None and revision > ownership.fencing_revision:
            self._forget(partition, "partition key deleted")

    async def _ticker(self) -> None:
        while True:
            await self._clock.sleep(self.config.tick)
            self._refused.clear()
            if self._unsettled:
                self._dirty.set()

    async def _reconcile_loop(self, session: Session, view: OwnershipView) -> None:
        await view.ready()
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                async with self._reconciling:
                    if self._draining:
                        await self._reconcile_draining(session, view)
                    else:
                        await self._reconcile(session, view)
            except LeaseStoreError as error:
                if not error.retryable:
                    raise
                self._unsettled = True
                self.outages.failed("reconciling the partitions held", error)
            else:
                self.outages.ok()

    async def _reconcile(self, session: Session, view: OwnershipView) -> None:
        if self.server_id not in view.members:
            # Our member key went (deleted by hand?) while our session lives: rejoin.
            await self._leases.put(self.config.member_key(self.server_id), self.server_id, session=session)
            view.members.add(self.server_id)
        holdings = self._holdings
        plan = plan_ownership(self.server_id, view.members, self.partition_count, view.holders, holdings.held)
        self._plan = plan

        if plan.release:
            holdings.disown(plan.release, "rebalance")
            leaving = {p: holdings.held[p] for p in sorted(plan.release) if p in holdings.held}
            await asyncio.gather(*(self._leases.resign(ownership) for ownership in leaving.values()))
            for partition, ownership in leaving.items():
                if holdings.held.get(partition) is ownership:
                    del holdings.held[partition]

        wanted = sorted(plan.acquire - self._refused)
        step = self.config.acquire_concurrency
        for start in range(0, len(wanted), step):
            chunk = wanted[start : start + step]
            won = await asyncio.gather(
                *(self._leases.try_acquire(self.config.partition_key(p), self.server_id, session) for p in chunk)
            )
            for partition, ownership in zip(chunk, won):
                if ownership is not None and partition not in holdings.held:
                    holdings.held[partition] = ownership

        raised_ok = await self._raise_epochs(plan)
        self._unsettled = not (plan.settled and raised_ok and holdings.fenced == set(holdings.held))

    async def _reconcile_draining(self, session: Session, view: OwnershipView) -> None:
        """While draining: out of the member set, and no partition key under
        our name (a resign that failed, a key won by a reply we never saw)."""
        strays = sorted(p for p, holder in view.holders.items() if holder == self.server_id)
        if self.server_id in view.members:
            await self._leases.delete(self.config.member_key(self.server_id))
        for partition in strays:
            ownership = self._holdings.held.pop(partition, None)
            if ownership is None:
                # Adopted only if it is this session's; an earlier session's key goes with that lease.
                ownership = await self._leases.try_acquire(self.config.partition_key(partition), self.server_id, session)
            if ownership is not None:
                await self._leases.resign(ownership)
        self._unsettled = bool(strays)

    async def _raise_epochs(self, plan: OwnershipPlan) -> bool:
        """Raise the epoch of every held, unfenced partition of our share;
        announce those that took effect; resign those refused as stale. False
        if the store could not be reached (retried next tick)."""
        holdings = self._holdings
        pending = {
            partition: ownership
            for partition, ownership in holdings.held.items()
            if partition not in holdings.fenced and partition in plan.target
        }
        if not pending:
            return True
        took = await self._fence.raise_epochs(pending)
        if took is None:
            return False
        raised: dict[int, Ownership] = {}
        refused: dict[int, Ownership] = {}
        for partition, ownership in pending.items():
            if holdings.held.get(partition) is not ownership:
                continue  # lost while raising
            if partition in took:
                raised[partition] = ownership
            else:
                refused[partition] = ownership
                del holdings.held[partition]
                self._refused.add(partition)
        holdings.fence(raised)
        if refused:
            await self._fence.explain_refused(sorted(refused))
            await asyncio.gather(*(self._leases.resign(ownership) for ownership in refused.values()))
        return True

    async def _release_everything(self, session: Session) -> None:
        held = self._drop_all("ownership restarting")
        if not session.lost.is_set():
            try:
                await asyncio.gather(*(self._leases.resign(ownership) for ownership in held))
            except LeaseStoreError:
                pass  # they go when the session ends

    # -- state changes ------------------------------------------------------------

    def _forget(self, partition: int, reason: str) -> None:
        self._holdings.forget(partition, reason)
        self._unsettled = True

    def _drop_all(self, reason: str) -> list[Ownership]:
        self._unsettled = True
        return self._holdings.drop_all(reason)
