"""tzdata updates: recorded zone fingerprints and the recompute of stored cursors.

Every server records, at start, the zone fingerprints of the tzdata release
it runs (:meth:`TzdataStore.record`). A job stores the release that computed
its cursor (``jobs.tzdata_version``). When the release changes,
:meth:`TzdataStore.recompute` finds the zones whose rules differ between each
job's recorded release and the current one (all zones when the old release's
fingerprints were never recorded) and recomputes, in bounded batches, the
cursors of the active jobs in those zones only.

The new cursor is the first occurrence, under the new rules, at or after
``min(now, old cursor)``, and strictly after the job's latest created
occurrence: starting from ``now`` finds an occurrence the new rules moved
earlier (before the old cursor), starting from the old cursor when it is
behind keeps the occurrences the dispatcher has not created yet (its misfire
rules decide them), and an occurrence that already has an execution row is
never created twice. Executions already created under the old rules are left
as they are.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple
from datetime import datetime, timedelta

import sqlalchemy as sa
from google.protobuf.message import DecodeError
from sqlalchemy.engine import Connection
from tickwheel.v1 import job_pb2

from tickwheel.shared.ids import from_us, to_us

from ..errors import InvalidArgument
from ..jobspec import schedule_of
from ..schedule import Engine, ScheduleError, UnknownZoneError
from .base import SqlStore, one_of
from .engine import capabilities
from .calendarcursor import rekey_previous
from .isolation import status_in
from .tables import executions, job_cursors, jobs, tzdata_versions

PLAN_PAGE = 10_000
"""Active jobs per statement of the recompute's walk for the (zone, release) pairs in use."""
from .timeline import GROUPS, in_group

log = logging.getLogger("tickwheel.tzdata")

MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class ShiftedRun:
    """A job whose cursor moved; ``new_next_run_at`` None: the schedule ended."""

    job_id: str
    tenant: str
    old_next_run_at: datetime | None
    new_next_run_at: datetime | None
    old_version: str = ""
    """The tzdata release that had computed the old cursor."""


class TzdataStore(SqlStore):
    """The ``tzdata_versions`` table and the cursor recompute over ``jobs``."""

    async def record(self, version: str, fingerprints: Mapping[str, str]) -> bool:
        """Record ``version``'s fingerprints unless already there; True if inserted."""
        now_us = to_us(self.clock.now())
        text = json.dumps(dict(sorted(fingerprints.items())), separators=(",", ":"))

        def fn(conn: Connection) -> bool:
            exists = conn.execute(
                sa.select(tzdata_versions.c.version).where(tzdata_versions.c.version == version)
            ).first()
            if exists is not None:
                return False
            conn.execute(tzdata_versions.insert().values(version=version, fingerprints=text, recorded_at=now_us))
            return True

        return await self._tx(fn, idempotent=True)

    async def fingerprints(self, version: str) -> dict[str, str] | None:
        """The recorded fingerprints of ``version``, or None if never recorded."""

        def fn(conn: Connection) -> dict[str, str] | None:
            return _fingerprints(conn, version)

        return await self._tx(fn)

    async def recompute(
        self,
        engine: Engine,
        current_version: str,
        zones: set[str] | None,
        now: datetime,
        dry_run: bool,
        batch: int = 500,
        plan_page: int = PLAN_PAGE,
    ) -> tuple[int, list[ShiftedRun]]:
        """Recompute stored cursors against ``engine`` (the release ``current_version``).

        ``zones`` None: active jobs recorded with another release, in the
        zones whose rules differ between that release and the current one.
        ``zones`` given: every active job in those zones, whatever its release.
        Each batch (at most ``batch`` jobs, a range scan of ``jobs_active_zone``
        paged by id) is one transaction: moved cursors are written with one
        batched UPDATE, and jobs whose cursor stayed only get
        ``tzdata_version``. ``dry_run`` writes nothing. Returns (jobs
        examined, the shifted runs).

        With ``zones`` None, the (zone, release) pairs in use are found by a
        walk of ``jobs_active_zone`` in pages of ``plan_page`` jobs, each a
        LIMITed range continuing after the last (its own transaction: no
        snapshot held over the walk), rather than one DISTINCT over every
        active job.
        """
        if batch < 1 or plan_page < 1:
            raise ValueError("batch and plan_page must be >= 1")
        current_prints: dict[str, str | None] = {}

        def current_print(zone: str) -> str | None:
            if zone not in current_prints:
                try:
                    current_prints[zone] = engine.zones.get(zone).fingerprint()
                except (UnknownZoneError, ValueError):
                    current_prints[zone] = None
            return current_prints[zone]

        old_prints: dict[str, dict[str, str] | None] = {}

        def changed(conn: Connection, zone: str, version: str) -> bool:
            if version not in old_prints:
                old_prints[version] = _fingerprints(conn, version)
            old = old_prints[version]
            # Unknown old release: every zone may have changed.
            return old is None or old.get(zone) != current_print(zone) or current_print(zone) is None

        def in_use(conn: Connection, after: tuple[str, str] | None) -> tuple[set[tuple[str, str]], tuple | None]:
            # One page of the active jobs in (zone, id) order: the pairs not
            # at this release, and where the next page starts (None: the last).
            query = sa.select(jobs.c.time_zone, jobs.c.id, jobs.c.tzdata_version).where(
                status_in(jobs.c.state, "active")
            )
            if after is not None:
                query = query.where(sa.tuple_(jobs.c.time_zone, jobs.c.id) > sa.tuple_(*after))
            rows = conn.execute(query.order_by(jobs.c.time_zone, jobs.c.id).limit(plan_page)).all()
            pairs = {(row.time_zone, row.tzdata_version) for row in rows if row.tzdata_version != current_version}
            return pairs, (rows[-1].time_zone, rows[-1].id) if len(rows) == plan_page else None

        def plan(conn: Connection) -> list[str]:
            return sorted({zone for zone, version in pairs if changed(conn, zone, version)})

        if zones is not None:
            candidate_zones = sorted(zones)
        else:
            pairs: set[tuple[str, str]] = set()
            after: tuple[str, str] | None = None
            while True:
                found, after = await self._tx(partial(in_use, after=after))
                pairs |= found
                if after is None:
                    break
            candidate_zones = await self._tx(plan)
        examined = 0
        shifted: list[ShiftedRun] = []
        now_us = to_us(now)
        for zone in candidate_zones:
            after_id = ""
            while True:

                def one_batch(conn: Connection, zone: str = zone, after_id: str = after_id):
                    return self._batch(
                        conn, engine, current_version, zone, after_id, zones is not None, now, now_us, dry_run,
                        batch, changed,
                    )

                count, last_id, moved = await self._tx(one_batch)
                examined += count
                shifted.extend(moved)
                if count < batch:
                    break
                after_id = last_id
        return examined, shifted

    def _batch(
        self,
        conn: Connection,
        engine: Engine,
        current_version: str,
        zone: str,
        after_id: str,
        every_version: bool,
        now: datetime,
        now_us: int,
        dry_run: bool,
        batch: int,
        changed,
    ) -> tuple[int, str, list[ShiftedRun]]:
        # A page of ``jobs_active_zone`` (what a job write left active),
        # then its cursors by primary key: a job the claim completed since
        # is passed over here, and its ``jobs.state`` brought up to its
        # cursor's, so the index sheds it (bounded: the page's rows).
        query = (
            sa.select(jobs.c.id, jobs.c.tenant, jobs.c.spec, jobs.c.tzdata_version)
            .where(jobs.c.time_zone == zone, jobs.c.id > after_id, status_in(jobs.c.state, "active"))
            .order_by(jobs.c.id)
            .limit(batch)
        )
        if not every_version:
            query = query.where(jobs.c.tzdata_version != current_version)
        found = conn.execute(query).all()
        if not found:
            return 0, after_id, []
        cursors = {
            row.job_id: row
            for row in conn.execute(
                sa.select(
                    job_cursors.c.job_id, job_cursors.c.state, job_cursors.c.next_due_at, job_cursors.c.run_count,
                    sa.func.coalesce(job_cursors.c.next_nominal_at, job_cursors.c.next_run_at).label("next_run_at"),
                ).where(one_of(self.caps, job_cursors.c.job_id, [row.id for row in found]))
            )
        }
        rows = [_Due(*row, *cursors[row.id][2:]) for row in found if _state(cursors, row.id) == "active"]
        ended: dict[str, list[str]] = {}
        for row in found:
            state = _state(cursors, row.id)
            if state not in (None, "active"):
                ended.setdefault(state, []).append(row.id)
        for state, ids in ended.items() if not dry_run else ():
            conn.execute(
                jobs.update().where(one_of(self.caps, jobs.c.id, ids), status_in(jobs.c.state, "active")).values(state=state)
            )
        if not rows:
            return len(found), found[-1].id, []
        to_check = [row for row in rows if every_version or changed(conn, zone, row.tzdata_version)]
        last_created = _last_created(conn, [row.id for row in to_check])
        moved_rows: list[dict] = []
        checked = {row.id for row in to_check}
        # Same rules for this zone in the job's release: only the tag is stale.
        stayed: list[str] = [row.id for row in rows if row.id not in checked]
        shifted: list[ShiftedRun] = []
        for row in to_check:
            try:
                schedule = schedule_of(job_pb2.Job.FromString(bytes(row.spec)), row.id)
                start = now_us if row.next_run_at is None else min(now_us, row.next_run_at)
                after = from_us(start) - MICROSECOND
                created = last_created.get(row.id)
                if created is not None and created >= to_us(after):
                    after = from_us(created)
                fire = engine.next_fire(schedule, after, row.run_count)
            except (InvalidArgument, ScheduleError, ValueError, DecodeError) as error:
                log.warning("tzdata recompute: job %s (%s) left as it is: %s", row.id, zone, error)
                continue
            new_run = None if fire is None else to_us(fire.nominal_at)
            new_due = None if fire is None else to_us(fire.due_at)
            if new_run == row.next_run_at and new_due == row.next_due_at:
                stayed.append(row.id)
                continue
            shifted.append(ShiftedRun(row.id, row.tenant, _opt(row.next_run_at), _opt(new_run), row.tzdata_version))
            moved_rows.append(
                {"b_id": row.id, "b_run": new_run, "b_due": new_due,
                 "b_state": "active" if new_run is not None else "completed"}
            )
        if not dry_run:
            if moved_rows:
                conn.execute(
                    jobs.update()
                    .where(jobs.c.id == sa.bindparam("b_id"))
                    .values(state=sa.bindparam("b_state"), tzdata_version=current_version, updated_at=now_us),
                    moved_rows,
                )
                conn.execute(
                    job_cursors.update()
                    .where(job_cursors.c.job_id == sa.bindparam("b_id"))
                    .values(
                        next_run_at=sa.bindparam("b_run"), next_due_at=sa.bindparam("b_due"),
                        state=sa.bindparam("b_state"), next_nominal_at=None,
                    ),
                    moved_rows,
                )
                rekey_previous(conn, [row["b_id"] for row in moved_rows], now, tenant=None)
            if stayed:
                conn.execute(
                    jobs.update().where(one_of(self.caps, jobs.c.id, stayed)).values(tzdata_version=current_version)
                )
        return len(found), found[-1].id, shifted


def _state(cursors: dict, job_id: str) -> str | None:
    cursor = cursors.get(job_id)
    return None if cursor is None else cursor.state


class _Due(NamedTuple):
    """A job of the recompute's page with its cursor (the nominal instant as ``next_run_at``)."""

    id: str
    tenant: str
    spec: bytes
    tzdata_version: str
    next_due_at: int | None
    run_count: int
    next_run_at: int | None


def _opt(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


def _fingerprints(conn: Connection, version: str) -> dict[str, str] | None:
    text = conn.execute(
        sa.select(tzdata_versions.c.fingerprints).where(tzdata_versions.c.version == version)
    ).scalar()
    return None if text is None else json.loads(text)


def _last_created(conn: Connection, job_ids: Iterable[str]) -> dict[str, int]:
    """Latest nominal instant with an execution row, per job (triggers
    excluded). One statement: per job and status group, the newest row of
    the group's job index (``(job_id, nominal_at, id)``, descended to the
    first that is not a trigger, ``LIMIT 1``), so what it reads does not
    grow with the job's history (a minutely job ends about half a million
    executions a year); the running group's (``executions_busy``, not in
    nominal order) holds at most what runs of the job and its retries."""
    ids = list(job_ids)
    if not ids:
        return {}
    newest = [
        sa.select(executions.c.nominal_at)
        .where(executions.c.job_id == jobs.c.id, *in_group(group, by_job=True), executions.c.origin != "trigger")
        .order_by(executions.c.nominal_at.desc())
        .limit(sa.literal_column("1"))
        .scalar_subquery()
        for group in GROUPS
    ]
    latest: dict[str, int] = {}
    for job_id, *found in conn.execute(sa.select(jobs.c.id, *newest).where(one_of(capabilities(conn), jobs.c.id, ids))):
        found = [nominal for nominal in found if nominal is not None]
        if found:
            latest[job_id] = max(found)
    return latest
