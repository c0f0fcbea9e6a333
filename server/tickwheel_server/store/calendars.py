"""Business-day calendars: the rows of ``calendars``, their request ids and the per-tenant count.

The store treats a calendar's definition (``spec``, the serialised
``tickwheel.v1.Calendar`` without name and output-only fields) as opaque
bytes: the API validates it before any call here. Every method is scoped to
one tenant; another tenant's calendar is indistinguishable from a missing
one (NotFound).

Creates of one tenant take the tenant row's lock first (READ COMMITTED on
PostgreSQL, ``row_locked``), so the count that decides the
:data:`MAX_CALENDARS` quota is read after every earlier create of the
tenant committed: the quota holds exactly, across servers. (CockroachDB and
SQLite keep their serializable transactions, where the count is exact
anyway.) Creates are rare, so serialising them per tenant costs nothing
that matters; nothing else takes that lock per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwheel.shared.ids import from_us, to_us

from ..alerts.catalogue import calendar_runs_changed_alert
from ..jobspec import DefinitionCache
from ..schedule.businessdays import BusinessCalendar
from ..errors import AlreadyExists, FailedPrecondition, NotFound, QuotaExceeded, VersionConflict
from . import requests
from .alerts import AlertStore
from .base import SqlStore
from . import calendaruse
from .calendaruse import Redecided, RunChange, jobs_naming, present_calendars
from .calendarwalk import Walk, begin_walk, end_walk, release_walk, stale_walks, walk_page
from .claim_calendars import CalendarCache, decode_calendar
from .tables import calendars, tenants

MAX_CALENDARS = 1000
"""The most calendars a tenant may have (the contract's ``max_calendars``)."""
DECODED_CALENDARS = 32
"""Decoded calendars a store keeps for the API's previews (:meth:`CalendarStore.decoded`):
few, as one of 10 000 holidays and half-days, with its search tables, is
megabytes; a tenant cycling through many calendars pays a decode a call,
as every call did before."""

WALK_HOLD = 30.0
"""Seconds a calendar change's walker holds its walk past its last page:
the reaper's duty resumes a walk not written for this long (its server died)."""

RESUMED_PAGES = 20
"""Pages of a walk the reaper's duty goes on with per pass (:meth:`CalendarStore.resume_walks`)."""

_SUMMARY = (
    calendars.c.tenant, calendars.c.name, calendars.c.time_zone, calendars.c.business_days,
    calendars.c.holiday_count, calendars.c.half_day_count, calendars.c.version, calendars.c.created_at, calendars.c.updated_at,
)  # fmt: skip


@dataclass(frozen=True)
class CalendarDefinition:
    """What a create or an update stores: the validated definition and what is derived from it."""

    spec: bytes
    time_zone: str
    business_days: int
    """A bit mask: bit ``n - 1`` set when ISO weekday ``n`` is a business day."""
    holiday_count: int
    half_day_count: int


@dataclass(frozen=True)
class CalendarRecord:
    """A stored calendar. ``spec`` is empty when read by :meth:`CalendarStore.list`."""

    tenant: str
    name: str
    spec: bytes
    time_zone: str
    business_days: int
    """A bit mask: bit ``n - 1`` set when ISO weekday ``n`` is a business day."""
    holiday_count: int
    half_day_count: int
    version: int
    created_at: datetime
    updated_at: datetime


def _record(row) -> CalendarRecord:
    return CalendarRecord(
        tenant=row.tenant, name=row.name, spec=getattr(row, "spec", b"") or b"", time_zone=row.time_zone,
        business_days=row.business_days, holiday_count=row.holiday_count, half_day_count=row.half_day_count,
        version=row.version,
        created_at=from_us(row.created_at), updated_at=from_us(row.updated_at),
    )  # fmt: skip


def _read(conn: Connection, tenant: str, name: str) -> CalendarRecord | None:
    row = conn.execute(sa.select(calendars).where(calendars.c.tenant == tenant, calendars.c.name == name)).first()
    return None if row is None else _record(row)


class CalendarStore(SqlStore):
    """Calendars of every tenant; every method is scoped to one tenant."""

    def __init__(
        self, engine, clock, *, max_calendars: int = MAX_CALENDARS, alerts: AlertStore | None = None,
        walk_hold: float = WALK_HOLD,
    ) -> None:
        super().__init__(engine, clock)
        if max_calendars < 1:
            raise ValueError("max_calendars must be >= 1")
        if not walk_hold > 0:
            raise ValueError(f"walk_hold must be > 0 seconds, got {walk_hold}")
        self._hold_us = int(walk_hold * 1_000_000)
        """A walker's hold on its walk (:mod:`.calendarwalk`), renewed by each page."""
        self.pages = 0
        """Pages walked by this store (each its own transaction)."""
        self.max_calendars = max_calendars
        self._alerts = alerts
        """Raises ``calendar_runs_changed`` when an update moves or drops created runs."""
        self._decoded = CalendarCache(DECODED_CALENDARS)

    async def create(
        self, tenant: str, name: str, definition: CalendarDefinition, request_id: str
    ) -> tuple[CalendarRecord, bool]:
        """Create calendar ``name`` unless ``request_id`` was seen for this
        tenant within :data:`~.requests.REQUEST_RETENTION`.

        Returns (the calendar, True) when created; (the calendar the first
        request created, False) on a repeat, which writes nothing. Raises,
        with nothing written: NotFound("tenant") for an unknown tenant,
        NotFound("calendar") on a repeat whose calendar was deleted since
        (or replaced by another of the same name), AlreadyExists when the
        tenant has a calendar of that name, QuotaExceeded
        (``max_calendars``) when it has :attr:`max_calendars` of them.
        A request id older than the retention is a new request (the
        retention runner prunes its row). Committed before it returns.
        """
        now_us = to_us(self.clock.now())

        def fn(conn: Connection) -> tuple[CalendarRecord, bool]:
            lock = sa.select(tenants.c.name).where(tenants.c.name == tenant)
            if self.caps.row_locks:
                lock = lock.with_for_update()
            if conn.execute(lock).first() is None:
                raise NotFound("tenant", tenant)
            seen = requests.target_of(conn, tenant, requests.CALENDAR, request_id, now_us)
            if seen is not None:
                first = _read(conn, tenant, seen)
                row = conn.execute(
                    sa.select(calendars.c.request_id).where(calendars.c.tenant == tenant, calendars.c.name == seen)
                ).scalar()
                if first is None or row != request_id:
                    raise NotFound("calendar", seen)
                return first, False
            if _read(conn, tenant, name) is not None:
                raise AlreadyExists("calendar", name)
            count = conn.execute(
                sa.select(sa.func.count()).select_from(calendars).where(calendars.c.tenant == tenant)
            ).scalar_one()
            if count >= self.max_calendars:
                raise QuotaExceeded(
                    tenant, "max_calendars", self.max_calendars, "the tenant has as many calendars as it may"
                )
            conn.execute(calendars.insert().values(
                tenant=tenant, name=name, spec=definition.spec, time_zone=definition.time_zone,
                business_days=definition.business_days, holiday_count=definition.holiday_count,
                half_day_count=definition.half_day_count, request_id=request_id, version=1, created_at=now_us, updated_at=now_us,
            ))  # fmt: skip
            requests.record(conn, self.caps, tenant, requests.CALENDAR, [request_id], [name], now_us)
            created_at = from_us(now_us)
            return CalendarRecord(
                tenant=tenant, name=name, spec=definition.spec, time_zone=definition.time_zone,
                business_days=definition.business_days, holiday_count=definition.holiday_count,
                half_day_count=definition.half_day_count, version=1,
                created_at=created_at, updated_at=created_at,
            ), True  # fmt: skip

        return await self._tx(fn, row_locked=True)

    async def get(self, tenant: str, name: str) -> CalendarRecord:
        """The calendar with its definition, or NotFound (also for another tenant's)."""

        def fn(conn: Connection) -> CalendarRecord:
            found = _read(conn, tenant, name)
            if found is None:
                raise NotFound("calendar", name)
            return found

        return await self._tx(fn, idempotent=True)

    async def list(self, tenant: str, *, after_name: str = "", limit: int = 100) -> list[CalendarRecord]:
        """Up to ``limit`` of ``tenant``'s calendars named after ``after_name``,
        by name, without their definitions (``spec`` empty): a range scan on
        the primary key ``(tenant, name)`` with a LIMIT."""
        if not tenant or limit < 1:
            raise ValueError("tenant is required and limit must be >= 1")

        def fn(conn: Connection) -> list[CalendarRecord]:
            rows = conn.execute(
                sa.select(*_SUMMARY)
                .where(calendars.c.tenant == tenant, calendars.c.name > after_name)
                .order_by(calendars.c.name)
                .limit(limit)
            ).all()
            return [_record(row) for row in rows]

        return await self._tx(fn, idempotent=True)

    async def decoded(self, tenant: str, name: str) -> BusinessCalendar:
        """The calendar as the business-day arithmetic computes with it,
        decoded once per version (a bounded cache: one read of the version
        when it holds it), so a preview's cost does not grow with the
        calendar's dates; NotFound when the tenant has no such calendar, or
        its definition does not decode."""
        found = await self._tx(lambda conn: self._decoded.load(conn, {(tenant, name)}), idempotent=True)
        if (tenant, name) not in found:
            raise NotFound("calendar", name)
        return found[tenant, name]

    async def present(self, tenant: str, names: set[str]) -> set[str]:
        """Those of ``names`` that are calendars of ``tenant`` (another tenant's are not)."""
        return await self._tx(lambda conn: present_calendars(conn, tenant, names), idempotent=True)

    async def update(
        self, tenant: str, name: str, expected_version: int, definition: CalendarDefinition
    ) -> CalendarRecord:
        """:meth:`update_with_runs` without its report."""
        return (await self.update_with_runs(tenant, name, expected_version, definition))[0]

    async def update_with_runs(
        self, tenant: str, name: str, expected_version: int, definition: CalendarDefinition,
        *, counted: Callable[[int], None] | None = None,
    ) -> tuple[CalendarRecord, Redecided]:
        """Store ``definition`` at ``expected_version`` + 1, if the calendar
        is still at ``expected_version``: VersionConflict otherwise, NotFound
        when there is no such calendar of the tenant (nothing written). The
        definition commits at once, with its walk (:mod:`.calendarwalk`);
        then the created runs of the tenant's jobs naming the calendar are
        decided again under it a page of jobs per transaction
        (:func:`~.calendaruse.redecide_page`) until the walk ends, and when
        any changed, the ``calendar_runs_changed`` alert is raised (with an
        alert store) in the walk's last transaction. A walk this update
        supersedes (an older version's, not finished) stops at its next page
        and raises its own alert with what it changed so far. Returns the
        walk's report: not ``finished`` if a newer update superseded it
        meanwhile (the counts so far). ``counted`` is told the fires each
        page computes (see :func:`~.calendaruse.redecide_page`; every
        attempt of a page's transaction counts)."""
        now = self.clock.now()
        now_us = to_us(now)

        def fn(conn: Connection) -> CalendarRecord:
            changed = conn.execute(
                calendars.update()
                .where(calendars.c.tenant == tenant, calendars.c.name == name,
                       calendars.c.version == expected_version)
                .values(spec=definition.spec, time_zone=definition.time_zone, business_days=definition.business_days,
                        holiday_count=definition.holiday_count, half_day_count=definition.half_day_count,
                        version=calendars.c.version + 1, updated_at=now_us)
            ).rowcount  # fmt: skip
            found = _read(conn, tenant, name)
            if found is None:
                raise NotFound("calendar", name)
            if not changed:
                raise VersionConflict(f"calendar {name!r}", expected_version, found.version)
            superseded = begin_walk(conn, tenant, name, found.version, now_us, self._hold_us)
            if superseded is not None:
                self._raise_changed(conn, tenant, name, *superseded, now)
            return found

        found = await self._tx(fn, row_locked=True)
        report = await self.walk(Walk(tenant, name, found.version, ""), definition.spec, counted=counted)
        return found, report

    async def walk(
        self, walk: Walk, spec: bytes | None = None, *, counted: Callable[[int], None] | None = None,
        pages: int | None = None,
    ) -> Redecided:
        """Walk ``walk`` page by page, each page its own transaction, until
        it ends or is taken over (see :func:`.calendarwalk.walk_page`), or
        ``pages`` were walked (the walk is then left for the next
        :meth:`resume_walks`); the calendar's definition ``spec`` is read
        when not given."""
        if spec is None:
            spec = await self._tx(lambda conn: conn.execute(
                sa.select(calendars.c.spec).where(calendars.c.tenant == walk.tenant, calendars.c.name == walk.calendar)
            ).scalar(), idempotent=True)  # fmt: skip
            if spec is None:
                return Redecided(finished=False)
        decoded: list[BusinessCalendar] = []

        def calendar() -> BusinessCalendar:
            if not decoded:
                decoded.append(decode_calendar(spec))
            return decoded[0]

        definitions = DefinitionCache(max_entries=calendaruse.PAGE)
        current: Walk | None = walk
        report = Redecided(finished=False)
        while current is not None:
            at = self.clock.now()

            def page(conn: Connection, current: Walk = current, at=at) -> tuple[Walk | None, Redecided]:
                following, report = walk_page(conn, self.caps, current, calendar, to_us(at), self._hold_us,
                                              definitions, counted)  # fmt: skip
                if report.finished:
                    self._raise_changed(conn, walk.tenant, walk.calendar, walk.version, report, at)
                return following, report

            current, report = await self._tx(page, row_locked=True)
            self.pages += 1
            if pages is not None and current is not None:
                pages -= 1
                if pages <= 0:
                    await self._tx(lambda conn, left=current: release_walk(conn, left))
                    break
        if report.changed_count and self._alerts is not None:
            self._alerts.nudge()
        return report

    async def resume_walks(self, limit: int = 10, pages: int = RESUMED_PAGES) -> int:
        """The reaper's duty: go on with up to ``limit`` walks whose walker
        has not written them for its hold (its server died), ``pages`` pages
        each at most (the rest on the next pass), so the reaper's pass stays
        bounded; how many walks it went on with."""
        stale = await self._tx(lambda conn: stale_walks(conn, to_us(self.clock.now()), limit), idempotent=True)
        for walk in stale:
            await self.walk(walk, pages=pages)
        return len(stale)

    def _raise_changed(self, conn: Connection, tenant: str, name: str, version: int, report: Redecided, now) -> None:
        if report.changed_count and self._alerts is not None:
            self._alerts.raise_many_in(conn, [calendar_runs_changed_alert(
                tenant=tenant, calendar=name, version=version, changed=report.changed_count,
                runs=[_shown(change) for change in report.first],
            )], now=now)  # fmt: skip

    async def delete(self, tenant: str, name: str, version: int = 0) -> None:
        """Delete the calendar; ``version`` 0 means whatever its version.
        NotFound when the tenant has no such calendar, VersionConflict when
        ``version`` is not the stored one, FailedPrecondition naming how many
        when jobs of the tenant name it (nothing written). Its request id
        stays remembered, so a repeat of the create answers NotFound."""

        def fn(conn: Connection) -> None:
            naming = jobs_naming(conn, tenant, name)
            if naming:
                raise FailedPrecondition(
                    f"calendar {name!r}", f"{naming} job{'s' if naming != 1 else ''} name it: change or delete "
                    f"{'them' if naming != 1 else 'it'} first", kind="CALENDAR_IN_USE",
                )  # fmt: skip
            condition = [calendars.c.tenant == tenant, calendars.c.name == name]
            if version:
                condition.append(calendars.c.version == version)
            if conn.execute(calendars.delete().where(*condition)).rowcount:
                end_walk(conn, tenant, name)
                return
            found = _read(conn, tenant, name)
            if found is None:
                raise NotFound("calendar", name)
            raise VersionConflict(f"calendar {name!r}", version, found.version)

        await self._tx(fn, row_locked=True)


def _shown(change: RunChange) -> str:
    """One changed run as the alert lists it."""
    new = "dropped" if change.new_due_at_us is None else f"due {from_us(change.new_due_at_us).isoformat()}"
    return f"{change.execution_id}: due {from_us(change.old_due_at_us).isoformat()} → {new}"
