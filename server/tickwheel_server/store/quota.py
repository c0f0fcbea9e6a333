"""A tenant quota's slot rows: take, give back, deal again.

Two quotas keep their count this way: ``max_jobs`` in ``tenant_quota``
(:data:`JOBS`, each job naming its slot in ``jobs.quota_slot``) and
``max_pending_manual_runs`` in ``manual_quota`` (:data:`MANUAL_RUNS`, each
manual run not started naming its slot in ``executions.manual_slot``). The
rule is :mod:`tickwheel_server.policy.quota`'s. Every function runs inside
the caller's transaction, so a row and the unit that counts it are written
together or not at all.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..policy.quota import SLOTS, deal
from . import driver
from .engine import Capabilities
from .tables import manual_quota, tenant_quota, tenants


class Slots(NamedTuple):
    """One quota's slot rows: the table holding them, the tenant's limit,
    and the quota's name as a refusal names it."""

    table: sa.Table
    limit: sa.Column
    name: str

    @property
    def take_sql(self) -> str:
        """A take's one conditional update as driver SQL (PostgreSQL and
        CockroachDB): a fixed text psycopg prepares once per connection;
        SQLAlchemy would build and compile (or look up) the statement on
        every create. Parameters ``tenant``, ``slot``, ``want``."""
        return _TAKES[self.table.name]


JOBS = Slots(tenant_quota, tenants.c.max_jobs, "max_jobs")
MANUAL_RUNS = Slots(manual_quota, tenants.c.max_pending_manual_runs, "max_pending_manual_runs")

_TAKES = {
    table.name: (
        f"UPDATE {table.name} SET used = used + CAST(%(want)s AS BIGINT) "
        "WHERE tenant = %(tenant)s AND slot = CAST(%(slot)s AS INTEGER) "
        "AND used + CAST(%(want)s AS BIGINT) <= allowance"
    )
    for table in (tenant_quota, manual_quota)
}

TAKE_FIRST = "WITH taken AS (" + JOBS.take_sql + " RETURNING slot) "
"""A create's units taken in its jobs' insert (:func:`taken_in_insert`):
this CTE before the insert, and the insert's rows only ``WHERE EXISTS
(SELECT 1 FROM taken)``: no row inserted, the slot was dry. Parameters
``tenant``, ``slot``, ``want`` as :func:`take`'s."""


def _set_slot(rows: Slots):
    return (
        rows.table.update()
        .where(rows.table.c.tenant == sa.bindparam("b_tenant"), rows.table.c.slot == sa.bindparam("b_slot"))
        .values(used=sa.bindparam("b_used"), allowance=sa.bindparam("b_allowance"))
    )


class SlotPicker:
    """Which slot a create of this process takes its units from: one no
    other transaction of this process is using if there is one; among
    those, one this process used before (most recently first: a slot that
    ran dry was dealt a reserve for its next calls, see
    :data:`~tickwheel_server.policy.quota.RESERVE_CALLS`), else one at
    random (so servers spread over the slots too). Held for the whole
    transaction, retries included. Remembers at most :data:`SLOTS` slots of
    at most ``tenants`` tenants."""

    def __init__(self, rng: random.Random | None = None, *, tenants: int = 1024) -> None:
        self._rng = rng or random.Random()
        self._busy: dict[tuple[str, int], int] = {}
        self._recent: dict[str, list[int]] = {}
        """tenant -> slots this process used, most recent last (insertion order: the oldest tenant first)."""
        self._tenants = tenants
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, tenant: str) -> Iterator[int]:
        with self._lock:
            recent = self._recent.pop(tenant, [])
            self._recent[tenant] = recent  # now the most recently used tenant
            if len(self._recent) > self._tenants:
                del self._recent[next(iter(self._recent))]
            warm = [index for index in reversed(recent) if (tenant, index) not in self._busy]
            if warm:
                chosen = warm[0]
            else:
                free = [index for index in range(SLOTS) if (tenant, index) not in self._busy]
                chosen = self._rng.choice(free) if free else self._rng.randrange(SLOTS)
            if chosen in recent:
                recent.remove(chosen)
            recent.append(chosen)
            self._busy[(tenant, chosen)] = self._busy.get((tenant, chosen), 0) + 1
        try:
            yield chosen
        finally:
            with self._lock:
                left = self._busy.pop((tenant, chosen)) - 1
                if left:
                    self._busy[(tenant, chosen)] = left


class SlotDry(Exception):
    """:func:`take` found its slot dry on an engine with row locks: the
    caller rolls its transaction back and runs it again with ``deal=True``."""


SAVEPOINT_FROM = 64
"""From this many units :func:`take` tries its slot in a savepoint (two
round trips more, small beside the inserts of that many jobs) rather than
raising :class:`SlotDry` (which runs the caller's transaction again)."""


def take(
    conn: Connection, caps: Capabilities, tenant: str, slot: int, want: int, *, deal: bool = False, rows: Slots = JOBS
) -> int:
    """Take up to ``want`` units of the quota ``rows`` for ``tenant`` from
    ``slot``; returns how many were taken (fewer than ``want`` only when the
    tenant has fewer than that left under its limit, ``max_jobs`` for
    :data:`JOBS`).

    One conditional UPDATE of the slot's row when its allowance covers
    ``want``. Otherwise every slot of the tenant is read under row locks
    (in slot order), then ``max_jobs``, and dealt again
    (:func:`~tickwheel_server.policy.quota.deal`), written only when
    something changed: creates refused at the limit read and write nothing
    but their locks. Exact at READ COMMITTED too: the conditional update
    is evaluated on the row's latest version under its lock, and the deal
    reads ``max_jobs`` after taking every slot's lock, which a change of
    ``max_jobs`` takes to deal again (:func:`redeal`).

    A deal holds no slot's lock before it locks them all in slot order, so
    two deals never wait for each other in a cycle. But on PostgreSQL an
    update that waited for a concurrent deal and then found its slot dry
    keeps the slot's lock (the row's latest version is locked before the
    condition is checked again), and two such creates dealing at once
    deadlocked. So on an engine with row locks a dry slot's lock is let go
    before the deal: for ``want`` of :data:`SAVEPOINT_FROM` or more the
    update runs in a savepoint rolled back when it takes nothing; for fewer
    (where two round trips more per create would cost more than running
    the rare dry create again) :class:`SlotDry` is raised, and the
    caller's next transaction passes ``deal=True``: it deals at once,
    without the update.
    """
    if want <= 0:
        return 0
    if deal:
        return _deal(conn, caps, tenant, rows, slot=slot, want=want)
    if not caps.row_locks:
        if _take_from_slot(conn, caps, rows, tenant, slot, want):
            return want
        return _deal(conn, caps, tenant, rows, slot=slot, want=want)
    if want < SAVEPOINT_FROM:
        if _take_from_slot(conn, caps, rows, tenant, slot, want):
            return want
        raise SlotDry(tenant, slot)
    savepoint = conn.begin_nested()
    if _take_from_slot(conn, caps, rows, tenant, slot, want):
        savepoint.commit()
        return want
    savepoint.rollback()
    return _deal(conn, caps, tenant, rows, slot=slot, want=want)


def taken_in_insert(caps: Capabilities, want: int, *, deal: bool = False) -> bool:
    """Whether a create of ``want`` units takes them with
    :data:`TAKE_FIRST` in the statement inserting its jobs rather than with
    :func:`take`: where :func:`take` would run the conditional update
    alone and raise :class:`SlotDry` when it took nothing, which the
    caller then raises (one round trip less, the same answer)."""
    return caps.row_locks and not caps.is_sqlite and not deal and 0 < want < SAVEPOINT_FROM


def tried_in_insert(caps: Capabilities, want: int, *, deal: bool = False) -> bool:
    """Whether a create of ``want`` units takes them with :data:`TAKE_FIRST`
    in the statement inserting its jobs, that statement in a savepoint
    rolled back when the slot was dry (then dealt again: :func:`take` with
    ``deal``), where :func:`take` would run the conditional update in a
    savepoint of its own: two round trips fewer (the update's, the
    release's), the same answer."""
    return caps.row_locks and not caps.is_sqlite and not deal and want >= SAVEPOINT_FROM


def _take_from_slot(conn: Connection, caps: Capabilities, rows: Slots, tenant: str, slot: int, want: int) -> bool:
    """Whether ``slot`` covered ``want`` (then taken from it): one
    conditional update."""
    if caps.is_sqlite:
        table = rows.table
        return bool(conn.execute(
            table.update()
            .where(table.c.tenant == tenant, table.c.slot == slot, table.c.used + want <= table.c.allowance)
            .values(used=table.c.used + want)
        ).rowcount)  # fmt: skip
    return bool(driver.rowcount(conn, rows.take_sql, dict(tenant=tenant, slot=slot, want=want)))


def give_back(conn: Connection, tenant: str, counted: Mapping[int, int], *, rows: Slots = JOBS) -> None:
    """Give back units: ``counted`` maps a slot to how many of the
    tenant's units it counted that are gone (jobs deleted, manual runs
    started or ended). Each leaves its slot with its allowance (the unit
    returns to the pool at the next deal): were it left in the slot's
    allowance, a tenant whose limit was lowered under its count could take
    again before the count came under it. One statement, a parameter set
    per slot, in the order given (callers give slot order)."""
    give_back_all(conn, {(tenant, slot): count for slot, count in counted.items()}, rows=rows)


def give_back_all(conn: Connection, counted: Mapping[tuple[str, int], int], *, rows: Slots = JOBS) -> None:
    """:func:`give_back` for several tenants at once: ``counted`` maps a
    (tenant, slot) to its units gone, in the order to write them (tenant,
    then slot: the order a deal locks them in)."""
    table = rows.table
    parameters = [
        dict(b_tenant=tenant, b_slot=slot, b_count=count) for (tenant, slot), count in counted.items() if count
    ]
    if parameters:
        conn.execute(
            table.update()
            .where(table.c.tenant == sa.bindparam("b_tenant"), table.c.slot == sa.bindparam("b_slot"))
            .values(used=table.c.used - sa.bindparam("b_count"), allowance=table.c.allowance - sa.bindparam("b_count")),
            parameters,
        )


def redeal(conn: Connection, caps: Capabilities, tenant: str, *, rows: Slots = JOBS) -> None:
    """Spread the tenant's limit of the quota ``rows`` over its slots again
    (it changed in this transaction, or the tenant is new and has no rows
    yet)."""
    _deal(conn, caps, tenant, rows)


def counted(conn: Connection, tenant: str, *, rows: Slots = JOBS) -> int:
    """What the tenant's slots of the quota ``rows`` count: its jobs
    (:data:`JOBS`) or its manual runs not started (:data:`MANUAL_RUNS`)."""
    table = rows.table
    return int(
        conn.execute(sa.select(sa.func.coalesce(sa.func.sum(table.c.used), 0)).where(table.c.tenant == tenant)).scalar()
    )


def job_count(conn: Connection, tenant: str) -> int:
    """How many jobs the tenant has: what its slots count."""
    return counted(conn, tenant)


def _deal(conn: Connection, caps: Capabilities, tenant: str, rows: Slots, *, slot: int = 0, want: int = 0) -> int:
    table = rows.table
    # In slot order: two deals lock the rows in one order, never deadlock.
    query = (
        sa.select(table.c.slot, table.c.used, table.c.allowance).where(table.c.tenant == tenant).order_by(table.c.slot)
    )
    if caps.row_locks:
        query = query.with_for_update()
    found = {row.slot: (row.used, row.allowance) for row in conn.execute(query)}
    limit = conn.execute(sa.select(rows.limit).where(tenants.c.name == tenant)).scalar() or 0
    decision = deal({index: used for index, (used, _) in found.items()}, limit, slot=slot, want=want)
    changed = [
        dict(b_tenant=tenant, b_slot=index, b_used=used, b_allowance=allowance)
        for index, (used, allowance) in decision.slots.items()
        if index in found and found[index] != (used, allowance)
    ]
    missing = [
        dict(tenant=tenant, slot=index, used=used, allowance=allowance)
        for index, (used, allowance) in decision.slots.items()
        if index not in found
    ]
    if changed:
        conn.execute(_set_slot(rows), changed)
    if missing:
        conn.execute(table.insert(), missing)
    return decision.granted
