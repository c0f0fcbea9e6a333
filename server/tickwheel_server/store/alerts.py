"""The alerts table and its change feed's numbering (SQL only).

One alert per condition while it lasts. The raiser names the condition with
a deduplication key (the key builders and constructors of
:mod:`tickwheel_server.alerts.catalogue`, any ``<kind>:<subject>``):

- raising a key with no open alert opens one (a new id, ``count`` 1);
- raising it again while open bumps ``count`` and ``last_seen_at`` and takes
  the new severity, summary and details; the id, the kind and what it
  concerns (tenant, job, execution, server) stay those of the first raise;
- resolving sets ``resolved_at``; raising the key afterwards opens a new
  alert with a new id.

Writes come in two forms. :meth:`AlertStore.raise_in` and
:meth:`AlertStore.resolve_in` are synchronous and take the caller's
connection, so another store raises an alert in the same transaction as the
change it is about (an execution dead-lettered and its alert commit
together, or neither does). :meth:`AlertStore.raise_alert` and
:meth:`AlertStore.resolve` are their own transactions.

The change feed (what WatchAlerts follows, across servers): every write sets
``changed_at`` and clears ``seq``; :meth:`AlertStore.sequence` numbers those
rows from the one counter row in ``alert_feed``, in batches, holding that row
locked, so numbers are handed out in commit order and a reader following
``seq`` upwards never skips a change whichever server made it. The server
that numbers a change writes its log line (one per change entering the
feed, so repeats raised between two numberings share one line, with their
count) and wakes the watchers in its process; watchers elsewhere see it at
their next poll, once a second (one reader per server, shared by all its
watchers: :mod:`tickwheel_server.alerts.feed`).
:meth:`tickwheel_server.alerts.watch.AlertWatch.run` numbers continually
(each server runs it); :meth:`AlertStore.nudge` after a commit that raised
or resolved makes it number at once instead of at its next poll.

Resolved alerts stay listable until :meth:`AlertStore.prune` deletes them
(after the retention window), in bounded batches.

The webhook sink (:mod:`tickwheel_server.alerts.webhook`) is owed each alert's
raise and its resolve. ``notified`` records what was sent (``''``,
``'raised'``, ``'resolved'``; NULL for alerts from before it existed, never
sent): a new alert starts at ``''``, a repeat leaves it alone.
:meth:`AlertStore.owed` reads what is owed, :meth:`AlertStore.mark_notified`
records a delivery, conditionally, so state survives a restart and a
changed sender resends only what was not recorded.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us, ulid

from ..alerts.catalogue import (
    NOTIFY_STEPS, AlertPage, AlertRecord, NewAlert, Owed, checked_kinds, circuit_open_alert, circuit_open_key,
)  # fmt: skip
from .base import SqlStore, one_of
from .peertext import escaped_text
from .tables import alert_feed, alerts

if TYPE_CHECKING:
    from ..policy.breaker import CircuitChange

log = logging.getLogger("tickwheel.alerts")

FEED_ROW = 1
SEQUENCE_BATCH = 1000
"""Changes numbered per sequencing transaction."""
READ_BATCH = 500
"""Alerts a watcher reads per query."""
DEFAULT_POLL_INTERVAL = 1.0
"""Seconds between polls of the feed when nothing wakes the reader sooner."""
MAX_SUMMARY = 1024
MAX_DETAIL = 4096

_LOG_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "critical": logging.ERROR}

_OWED = sa.or_(alerts.c.notified == sa.literal_column("''"),
               sa.and_(alerts.c.notified == sa.literal_column("'raised'"), alerts.c.resolved_at.is_not(None)))
"""The predicate of ``alerts_webhook`` (migration 0012), word for word and with literal values, so
the planner uses the index in any plan (a generic plan cannot match a bound parameter to it)."""


def alert_from_row(row) -> AlertRecord:
    return AlertRecord(
        id=row.id,
        key=row.dedup_key,
        kind=row.kind,
        severity=row.severity,
        tenant=row.tenant,
        job_id=row.job_id,
        execution_id=row.execution_id,
        server_id=row.server_id,
        summary=escaped_text(row.summary),
        details={escaped_text(k): escaped_text(v) for k, v in json.loads(row.details).items()},
        raised_at=from_us(row.raised_at),
        last_seen_at=from_us(row.last_seen_at),
        count=row.count,
        resolved_at=None if row.resolved_at is None else from_us(row.resolved_at),
        changed_at=from_us(row.changed_at),
    )


def _details_text(details: Mapping[str, str]) -> str:
    return json.dumps(
        {escaped_text(str(k)): escaped_text(str(v))[:MAX_DETAIL] for k, v in details.items()},
        sort_keys=True, separators=(",", ":"),
    )


def _merged(batch: Sequence[NewAlert]) -> list[tuple[NewAlert, int]]:
    """One entry per key (the last raise wins, with how many raises it stands
    for): an upsert may not touch one row twice in one statement."""
    merged: dict[str, tuple[NewAlert, int]] = {}
    for alert in batch:
        _, times = merged.pop(alert.key, (alert, 0))
        merged[alert.key] = (alert, times + 1)
    return list(merged.values())


def _filters(caps, query, *, kinds: Iterable[str], tenant: str):
    wanted = checked_kinds(kinds)
    if wanted:
        query = query.where(one_of(caps, alerts.c.kind, wanted))
    if tenant:
        query = query.where(alerts.c.tenant == tenant)
    return query


class AlertStore(SqlStore):
    """The alerts table and its change feed. One per server process: the
    in-process wake-ups (:meth:`nudge`, :meth:`close`) reach the watchers of
    this instance only; other processes and instances see changes through
    the store at their next poll."""

    def __init__(self, engine, clock, *, poll_interval: float = DEFAULT_POLL_INTERVAL) -> None:
        super().__init__(engine, clock)
        if poll_interval <= 0:
            raise ValueError("poll_interval must be > 0")
        self.poll_interval = poll_interval
        self.read_batch = READ_BATCH
        self._changed = asyncio.Event()
        self._sequencing = asyncio.Lock()
        self._closed = False

    # --- writes inside another store's transaction ---------------------------------------

    def raise_in(self, conn: Connection, alert: NewAlert, *, now: datetime | None = None) -> AlertRecord:
        """Raise ``alert`` on ``conn``, inside the caller's transaction; the
        alert as it is now. See :meth:`raise_many_in`."""
        [raised] = self.raise_many_in(conn, [alert], now=now)
        return raised

    def raise_many_in(
        self, conn: Connection, batch: Sequence[NewAlert], *, now: datetime | None = None
    ) -> list[AlertRecord]:
        """Raise every alert of ``batch`` in ONE statement on ``conn`` (an
        upsert on the open alert of each key), inside the caller's
        transaction; returns the alerts as they are now, one per distinct
        key, in the order of each key's last raise.

        No effect outside the transaction (it may be retried): the change is
        logged and delivered once it is numbered in the feed after commit;
        call :meth:`nudge` after the commit to number it at once.
        """
        if not batch:
            return []
        now_us = to_us(now or self.clock.now())
        rows = []
        for alert, times in _merged(batch):
            rows.append(
                dict(
                    id="alr_" + ulid(now or self.clock.now()), dedup_key=alert.key, kind=alert.kind,
                    severity=alert.severity, tenant=alert.tenant, job_id=alert.job_id,
                    execution_id=alert.execution_id, server_id=alert.server_id,
                    summary=escaped_text(" ".join(alert.summary.split()))[:MAX_SUMMARY],
                    details=_details_text(alert.details),
                    raised_at=now_us, last_seen_at=now_us, count=times, resolved_at=None, changed_at=now_us,
                    seq=None, notified="",
                )
            )
        dialect = sqlite if self.caps.is_sqlite else postgresql
        insert = dialect.insert(alerts)
        upsert = insert.on_conflict_do_update(
            index_elements=[alerts.c.dedup_key],
            index_where=alerts.c.resolved_at.is_(None),
            set_=dict(
                severity=insert.excluded.severity,
                summary=insert.excluded.summary,
                details=insert.excluded.details,
                last_seen_at=insert.excluded.last_seen_at,
                count=alerts.c.count + insert.excluded.count,
                changed_at=insert.excluded.changed_at,
                seq=None,
            ),
        )
        returned = conn.execute(upsert.values(rows).returning(*alerts.c)).all()
        by_key = {row.dedup_key: alert_from_row(row) for row in returned}
        return [by_key[row["dedup_key"]] for row in rows]

    def resolve_in(self, conn: Connection, key: str, *, now: datetime | None = None) -> AlertRecord | None:
        """Resolve the open alert of ``key`` on ``conn``, inside the caller's
        transaction; the alert as resolved, or None when none was open."""
        resolved = self.resolve_many_in(conn, [key], now=now)
        return resolved[0] if resolved else None

    def resolve_many_in(
        self, conn: Connection, keys: Iterable[str], *, now: datetime | None = None
    ) -> list[AlertRecord]:
        """Resolve the open alerts of ``keys`` in ONE statement on ``conn``;
        the alerts resolved (keys with no open alert are skipped). As
        :meth:`raise_many_in`: delivered and logged once numbered."""
        wanted = sorted(set(keys))
        if not wanted:
            return []
        now_us = to_us(now or self.clock.now())
        returned = conn.execute(
            alerts.update()
            .where(one_of(self.caps, alerts.c.dedup_key, wanted), alerts.c.resolved_at.is_(None))
            .values(resolved_at=now_us, changed_at=now_us, seq=None)
            .returning(*alerts.c)
        ).all()
        return sorted((alert_from_row(row) for row in returned), key=lambda a: a.key)

    # --- writes on their own -------------------------------------------------------------

    async def raise_alert(self, alert: NewAlert) -> AlertRecord:
        """Raise ``alert`` in its own transaction (see :meth:`raise_many_in`),
        then number it in the feed: logged, and seen by this process's
        watchers, before this returns."""
        now = self.clock.now()
        raised = await self._tx(lambda conn: self.raise_in(conn, alert, now=now))
        await self.sequence_after_commit()
        return raised

    async def raise_many(self, batch: Sequence[NewAlert]) -> list[AlertRecord]:
        """Raise every alert of ``batch`` in one transaction of its own (see
        :meth:`raise_many_in`), then number them in the feed."""
        if not batch:
            return []
        now = self.clock.now()
        raised = await self._tx(lambda conn: self.raise_many_in(conn, batch, now=now))
        await self.sequence_after_commit()
        return raised

    async def resolve(self, key: str) -> AlertRecord | None:
        """Resolve the open alert of ``key`` in its own transaction; None when
        none was open. Numbered in the feed before this returns."""
        now = self.clock.now()
        resolved = await self._tx(lambda conn: self.resolve_in(conn, key, now=now))
        if resolved is not None:
            await self.sequence_after_commit()
        return resolved

    async def record_circuits(self, changes: Sequence["CircuitChange"]) -> None:
        """Raise the ``circuit_open`` alert of every circuit that opened and
        resolve those whose last change closed them, in one transaction
        (a circuit that opened and closed since the last call gets an alert
        raised and resolved); numbered in the feed before this returns."""
        if not changes:
            return
        now = self.clock.now()
        opened = [
            circuit_open_alert(tenant=c.tenant, host=c.host, reason=c.reason, opened_at=c.at, open_for=c.open_for)
            for c in changes if c.opened
        ]  # fmt: skip
        last = {circuit_open_key(c.tenant, c.host): c.opened for c in changes}
        closed = [key for key, is_open in last.items() if not is_open]

        def fn(conn: Connection) -> None:
            self.raise_many_in(conn, opened, now=now)
            self.resolve_many_in(conn, closed, now=now)

        await self._tx(fn)
        await self.sequence_after_commit()

    async def sequence_after_commit(self) -> None:
        """Number changes just committed (:meth:`sequence`); a failure is
        logged and left to the next poll, since the change itself stands."""
        try:
            await self.sequence()
        except Exception:  # committed already: the next poll numbers it
            log.warning("alert committed but not yet numbered in the feed; the next poll will", exc_info=True)
            self.nudge()

    # --- reads -----------------------------------------------------------------------------

    async def get(self, key: str) -> AlertRecord | None:
        """The open alert of ``key``, or None."""

        def fn(conn: Connection) -> AlertRecord | None:
            row = conn.execute(
                sa.select(alerts).where(alerts.c.dedup_key == key, alerts.c.resolved_at.is_(None))
            ).first()
            return None if row is None else alert_from_row(row)

        return await self._tx(fn)

    async def list(
        self,
        *,
        include_resolved: bool = False,
        kinds: Iterable[str] = (),
        tenant: str = "",
        before_key: tuple[datetime, str] | None = None,
        limit: int = 100,
    ) -> AlertPage:
        """One page of alerts, newest ``raised_at`` first (ties by id,
        descending): open ones only unless ``include_resolved``, of
        ``kinds`` (empty: all) and of ``tenant`` (empty: any). Paged by the
        key ``(raised_at, id)``: ``before_key`` is the previous page's
        :attr:`AlertPage.next_key`. One backwards range scan with a LIMIT on
        ``alerts_open``, ``alerts_raised`` or their per-tenant twins."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        query = _filters(self.caps, sa.select(alerts), kinds=kinds, tenant=tenant)
        if not include_resolved:
            query = query.where(alerts.c.resolved_at.is_(None))
        if before_key is not None:
            at, ident = to_us(before_key[0]), before_key[1]
            # The first conjunct bounds the index range; the second breaks ties on id.
            query = query.where(
                alerts.c.raised_at <= at, sa.or_(alerts.c.raised_at < at, alerts.c.id < ident)
            )
        query = query.order_by(alerts.c.raised_at.desc(), alerts.c.id.desc()).limit(limit + 1)

        def fn(conn: Connection) -> AlertPage:
            rows = conn.execute(query).all()
            return AlertPage(tuple(alert_from_row(row) for row in rows[:limit]), more=len(rows) > limit)

        return await self._tx(fn)

    async def prune(self, resolved_before: datetime, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` alerts resolved before ``resolved_before``
        (the retention window's start), oldest raised first; how many were
        deleted. Open alerts are never deleted. One bounded batch: a range
        scan on ``alerts_raised`` (an alert resolved before the cutoff was
        raised before it), so a caller repeats it while it returns
        ``limit``."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff = to_us(resolved_before)
        doomed = (
            sa.select(alerts.c.id)
            .where(alerts.c.raised_at < cutoff, alerts.c.resolved_at < cutoff)
            .order_by(alerts.c.raised_at)
            .limit(limit)
        )

        def fn(conn: Connection) -> int:
            ids = conn.execute(doomed).scalars().all()
            if ids:
                conn.execute(alerts.delete().where(one_of(self.caps, alerts.c.id, ids)))
            return len(ids)

        return await self._tx(fn)

    # --- the webhook's record --------------------------------------------------------------

    async def owed(
        self, *, limit: int = 100, not_before: datetime | None = None, stale_batch: int = 1000
    ) -> list[Owed]:
        """Up to ``limit`` alerts the webhook sink is owed a raise or a
        resolve, least recently changed first (a range scan on the partial
        index ``alerts_webhook``). With ``not_before``, alerts whose last
        change is older are first marked as sent without being sent (a sink
        turned on, or back after a long outage, is not flooded with history),
        oldest first, ``stale_batch`` a transaction until a batch is short
        (a write conditional on still being owed: a stopped walk loses
        nothing, the next read goes on); how many is logged."""
        if limit < 1 or stale_batch < 1:
            raise ValueError("limit and stale_batch must be >= 1")
        stale, marked = 0, stale_batch
        while not_before is not None and marked == stale_batch:
            marked = await self._tx(lambda conn: self._mark_stale(conn, to_us(not_before), stale_batch))
            stale += marked
        if stale:
            log.warning("alert webhook: %d alert changes older than %s not sent", stale, not_before)

        def fn(conn: Connection) -> list[Owed]:
            rows = conn.execute(
                sa.select(alerts).where(_OWED).order_by(alerts.c.changed_at, alerts.c.id).limit(limit)
            ).all()
            return [Owed(alert_from_row(row), row.notified) for row in rows]

        return await self._tx(fn)

    @staticmethod
    def _mark_stale(conn: Connection, cutoff_us: int, batch: int) -> int:
        """Mark up to ``batch`` owed alerts changed before ``cutoff_us`` as sent, oldest first; how many."""
        older = sa.and_(_OWED, alerts.c.changed_at < cutoff_us)
        picked = sa.select(alerts.c.id).where(older).order_by(alerts.c.changed_at, alerts.c.id).limit(batch)
        return conn.execute(
            alerts.update().where(alerts.c.id.in_(picked), older)
            .values(notified=sa.case((alerts.c.resolved_at.is_(None), "raised"), else_="resolved"))
        ).rowcount

    async def mark_notified(self, alert_id: str, sent: str, *, was: str) -> bool:
        """Record that the sink got the alert's ``sent`` event (``'raised'``
        or ``'resolved'``), if the record still says ``was``: False when
        another sender moved it meanwhile (or the alert was pruned)."""
        if sent not in NOTIFY_STEPS[1:] or was not in NOTIFY_STEPS or NOTIFY_STEPS.index(sent) <= NOTIFY_STEPS.index(was):
            raise ValueError(f"cannot move the webhook record from {was!r} to {sent!r}")

        def fn(conn: Connection) -> bool:
            moved = conn.execute(
                alerts.update().where(alerts.c.id == alert_id, alerts.c.notified == was).values(notified=sent)
            )
            return moved.rowcount == 1

        return await self._tx(fn)

    async def wait_changed(self, timeout: float) -> None:
        """Until this process raises or resolves an alert (and numbers it in
        the feed), or ``timeout`` seconds pass on the clock."""
        await self.wait_for(self._changed, timeout)

    # --- the change feed -------------------------------------------------------------------

    async def sequence(self) -> int:
        """Number every change not yet in the feed, in batches of
        :data:`SEQUENCE_BATCH` (one transaction each); log each change
        numbered and wake this process's watchers. Returns how many were
        numbered. Concurrent callers in one process take turns; across
        servers they queue on the counter row."""
        total = 0
        async with self._sequencing:
            while True:
                numbered = await self._tx(self._sequence_batch)
                if not numbered:
                    break
                total += len(numbered)
                for alert in numbered:
                    _log_change(alert)
                self._wake()
                if len(numbered) < SEQUENCE_BATCH:
                    break
        return total

    def _sequence_batch(self, conn: Connection) -> list[AlertRecord]:
        pending = (
            sa.select(alerts.c.id)
            .where(alerts.c.seq.is_(None))
            .order_by(alerts.c.changed_at, alerts.c.id)
            .limit(SEQUENCE_BATCH)
        )
        if conn.execute(pending.limit(1)).first() is None:
            return []  # nothing to number: no lock taken, nothing written
        counter = sa.select(alert_feed.c.seq).where(alert_feed.c.id == FEED_ROW)
        if self.caps.row_locks:
            counter = counter.with_for_update()
        base = conn.execute(counter).scalar()
        if base is None:
            dialect = sqlite if self.caps.is_sqlite else postgresql
            conn.execute(dialect.insert(alert_feed).values(id=FEED_ROW, seq=0).on_conflict_do_nothing())
            base = conn.execute(counter).scalar()
        # Read again under the counter's lock: what another sequencer numbered
        # meanwhile is gone from the partial index (or this attempt conflicts).
        ids = conn.execute(pending).scalars().all()
        if not ids:
            return []
        conn.execute(
            alerts.update().where(alerts.c.id == sa.bindparam("b_id")).values(seq=sa.bindparam("b_seq")),
            [dict(b_id=ident, b_seq=base + n) for n, ident in enumerate(ids, start=1)],
        )
        conn.execute(alert_feed.update().where(alert_feed.c.id == FEED_ROW).values(seq=base + len(ids)))
        rows = conn.execute(sa.select(alerts).where(one_of(self.caps, alerts.c.id, ids)).order_by(alerts.c.seq)).all()
        return [alert_from_row(row) for row in rows]

    def nudge(self) -> None:
        """Something committed a raise or a resolve: number it now. Cheap and
        safe to call from the event loop at any time."""
        self._wake()

    def close(self) -> None:
        """End the :class:`~tickwheel_server.alerts.watch.AlertWatch` loop and
        every watch over this store (the server is stopping): watchers return
        after what they have read."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, changed: asyncio.Event, timeout: float | None = None) -> None:
        """Until ``changed`` (a past :attr:`changed_event`) is set or
        ``timeout`` (default: a poll interval) passes on the clock."""
        if changed.is_set():
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(self.poll_interval if timeout is None else timeout))
        waiter = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waiter.cancel()

    @property
    def closed(self) -> bool:
        """:meth:`close` was called."""
        return self._closed

    @property
    def changed_event(self) -> asyncio.Event:
        """Set when this process next numbers a change (or :meth:`close`)."""
        return self._changed

    async def feed_position(self) -> int:
        """The highest number handed out in the change feed (0 before any)."""
        return await self._tx(
            lambda conn: conn.execute(sa.select(alert_feed.c.seq).where(alert_feed.c.id == FEED_ROW)).scalar() or 0
        )

    async def changes_after(self, cursor: int) -> list[tuple[int, AlertRecord]]:
        """Up to :attr:`read_batch` changes numbered after ``cursor``, in feed order."""
        return await self._tx(lambda conn: self._changes_after(conn, cursor))

    @staticmethod
    def _changes_after(conn: Connection, cursor: int) -> list[tuple[int, AlertRecord]]:
        rows = conn.execute(
            sa.select(alerts).where(alerts.c.seq > cursor).order_by(alerts.c.seq).limit(READ_BATCH)
        ).all()
        return [(row.seq, alert_from_row(row)) for row in rows]


def _log_change(alert: AlertRecord) -> None:
    """One line per change entering the feed, with the alert's fields as
    ``extra`` attributes for structured formatters."""
    if alert.resolved_at is not None:
        event, level = "resolved", logging.INFO
    else:
        event, level = ("raised" if alert.count == 1 else "seen again"), _LOG_LEVELS[alert.severity]
    log.log(
        level,
        "alert %s %s: kind=%s severity=%s key=%s tenant=%s job=%s execution=%s server=%s count=%d: %s",
        alert.id, event, alert.kind, alert.severity, alert.key, alert.tenant or "-", alert.job_id or "-",
        alert.execution_id or "-", alert.server_id or "-", alert.count, alert.summary,
        extra={
            "alert_id": alert.id, "alert_event": event, "alert_kind": alert.kind, "alert_key": alert.key,
            "tenant": alert.tenant, "job_id": alert.job_id, "execution_id": alert.execution_id,
            "server_id": alert.server_id,
        },
    )  # fmt: skip
