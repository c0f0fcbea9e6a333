"""The claim with jobs it cannot dispatch (``DispatchStore.claim_due`` and
``review_quarantine``) on SQLite and PostgreSQL: a row this server cannot
read, or whose next fire it cannot compute, is left exactly as it was and
alerted once, and the rest of its partition is claimed in the same tick; the
alert resolves when the job can be dispatched again. And ``run_all`` over a
backlog longer than the claim's scan limit, through the store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2

from tickwheel_server.api.validate import normalise_job
from tickwheel_server.store.quarantine import Quarantine
from tickwheel.shared.ids import new_job_id, to_us
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.jobrecords import JobRecord, NewJob
from tests.support.jobrows import delete_job, job_row, write_job
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tables import alerts, executions, skips
from tickwheel_server.store.tenants import Tenant, TenantStore

NOW = datetime(2027, 1, 1, 1, 0, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
PARTITIONS = 4
OWNED = {p: 1 for p in range(PARTITIONS)}
PARTITION = 2
"""Every job of these tests is moved here: the bad one and the good ones share a partition."""


def cron_job() -> job_pb2.Job:
    job = job_pb2.Job(
        name="q", schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="* * * * *", time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")), payload=b"p",
    )
    job.jitter.exact = True
    return normalise_job(job, NOW - timedelta(days=1))


def spec_with(change) -> bytes:
    job = cron_job()
    change(job)
    return job.SerializeToString()


class World:
    def __init__(self, engine: sa.Engine, clock) -> None:
        self.engine = engine
        self.clock = clock
        self.jobs = JobStore(engine, clock, partition_count=PARTITIONS)
        self.alerts = AlertStore(engine, clock)
        self.dispatch = self.server()

    def server(self, **options) -> DispatchStore:
        """A dispatcher's store as one server process has it (its own quarantine)."""
        return DispatchStore(self.engine, self.clock, alerts=self.alerts, server_id="tw-old", **options)

    async def create(self, cursor: datetime, job: job_pb2.Job | None = None) -> JobRecord:
        job = job or cron_job()
        ident = new_job_id(self.clock.now())
        record, _ = await self.jobs.create(
            NewJob(
                id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone="UTC",
                next_run_at=cursor, next_due_at=cursor, tzdata_version="2026a", payload_size=len(job.payload),
            ),
            f"req-{ident}",
        )
        self.write(record.id, partition=PARTITION)
        return record

    def write(self, job_id: str, **values) -> None:
        """Raw SQL, as a newer version or a bad migration would leave the row."""
        with self.engine.begin() as conn:
            write_job(conn, job_id, **values)

    def row(self, job_id: str) -> dict:
        with self.engine.connect() as conn:
            return dict(job_row(conn, job_id)._mapping)

    def executions_of(self, job_id: str) -> list[int]:
        with self.engine.connect() as conn:
            return sorted(conn.execute(sa.select(executions.c.nominal_at).where(executions.c.job_id == job_id)).scalars())

    def alerts_of(self, job_id: str) -> list:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(alerts).where(alerts.c.job_id == job_id).order_by(alerts.c.raised_at)).all()

    def skip_rows(self) -> list:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(skips)).all()

    async def tick(self, dispatch: DispatchStore | None = None, *, batch: int = 1, **options) -> list:
        """One dispatcher tick: claims while the batch comes back full (bounded, so a loop fails the test)."""
        dispatch = dispatch or self.dispatch
        results = []
        for _ in range(50):
            results.append(await dispatch.claim_due(OWNED, NOW, batch=batch, **options))
            if not results[-1].full:
                return results
        raise AssertionError("the tick never ended")


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    return World(migrated_engine, clock)


def _unknown_oneof(job: job_pb2.Job) -> None:
    job.ClearField("schedule")  # a newer version's schedule kind: a field this build does not know
    job.MergeFromString(b"\xa2\x06\x02\x08\x01")  # field 100, length-delimited


UNREADABLE = {
    "does not parse": dict(spec=b"\xff\xff\xff"),
    "unknown misfire policy": dict(spec=spec_with(lambda job: setattr(job, "misfire_policy", 7))),
    "unknown dst gap policy": dict(spec=spec_with(lambda job: setattr(job.dst_policy, "gap", 9))),
    "unknown schedule kind": dict(spec=spec_with(_unknown_oneof)),
    "unknown target kind": dict(spec=spec_with(lambda job: job.ClearField("target"))),
    "run_all limit out of bounds": dict(spec=spec_with(lambda job: setattr(job, "misfire_run_all_limit", 1 << 30))),
    "due instant missing": dict(next_due_at=None),
    "due before nominal": dict(next_due_at=to_us(NOW - timedelta(hours=1))),
    "negative run count": dict(run_count=-1),
    "cursor out of range": dict(next_run_at=-(1 << 62), next_due_at=-(1 << 62)),
}


@pytest.mark.parametrize("damage", list(UNREADABLE), ids=list(UNREADABLE))
async def test_an_unreadable_job_is_left_as_it_is_alerted_and_its_partition_still_claimed(world, damage) -> None:
    bad = await world.create(NOW - timedelta(seconds=30))  # first in the scan's order
    good = [await world.create(NOW + k * timedelta(seconds=10)) for k in (1, 2)]
    world.write(bad.id, **UNREADABLE[damage])
    before = world.row(bad.id)

    results = await world.tick(batch=1)

    for job, k in zip(good, (1, 2)):
        claimed = world.executions_of(job.id)
        assert claimed[:1] == [to_us(NOW + k * timedelta(seconds=10))], "the rest of the partition, in the same tick"
    assert world.executions_of(bad.id) == [] and world.row(bad.id) == before, "the bad row is not touched"
    assert world.skip_rows() == []
    [alert] = world.alerts_of(bad.id)
    assert (alert.kind, alert.tenant, alert.severity, alert.resolved_at, alert.count) == (
        "job_unreadable", "acme", "critical", None, 1,
    )
    assert alert.server_id == "tw-old" and alert.details and "reason" in alert.details
    assert [f.job_id for r in results for f in r.unreadable] == [bad.id]

    again = await world.tick(batch=1)  # left out of the scan now: no second alert, nothing read
    assert [f for r in again for f in r.unreadable] == []
    assert [a.count for a in world.alerts_of(bad.id)] == [1]
    assert world.row(bad.id) == before


async def test_a_zone_this_tzdata_does_not_know_leaves_the_job_active_with_an_alert(world) -> None:
    bad = await world.create(NOW + MINUTE)
    good = await world.create(NOW + MINUTE)
    world.write(bad.id, spec=spec_with(lambda job: setattr(job.schedule.cron, "time_zone", "Mars/Olympus_Mons")))
    before = world.row(bad.id)

    await world.tick(batch=1)

    after = world.row(bad.id)
    assert after == before and after["state"] == "active", "not completed: a newer server may compute it"
    assert world.executions_of(bad.id) == [] and world.executions_of(good.id) == [to_us(NOW + MINUTE)]
    [alert] = world.alerts_of(bad.id)
    assert (alert.kind, alert.dedup_key, alert.resolved_at) == ("schedule_uncomputable", f"schedule_uncomputable:{bad.id}", None)
    assert "Mars/Olympus_Mons" in alert.summary


async def test_a_reason_quoting_hostile_stored_text_is_alerted_cleanly(world) -> None:
    bad = await world.create(NOW + MINUTE)
    zone = "Mars/\x00Olympus\u202e" + "x" * 5000  # NUL (PostgreSQL refuses it in text), a bidi override, long
    world.write(bad.id, spec=spec_with(lambda job: setattr(job.schedule.cron, "time_zone", zone)))
    await world.tick()
    [alert] = world.alerts_of(bad.id)
    assert "\x00" not in alert.summary and "\u202e" not in alert.summary and len(alert.summary) <= 1024
    assert len(alert.details) < 2000


async def test_an_expression_the_engine_rejects_is_an_uncomputable_schedule(world) -> None:
    bad = await world.create(NOW + MINUTE)
    world.write(bad.id, spec=spec_with(lambda job: setattr(job.schedule.cron, "expression", "61 * * * *")))
    await world.tick()
    assert world.row(bad.id)["state"] == "active"
    assert [a.kind for a in world.alerts_of(bad.id)] == ["schedule_uncomputable"]


async def test_a_job_updated_to_a_readable_definition_is_claimed_and_its_alert_resolved(world) -> None:
    bad = await world.create(NOW + MINUTE)
    world.write(bad.id, spec=b"\xff\xff\xff")
    await world.tick()
    assert bad.id in world.dispatch.quarantine

    world.write(bad.id, spec=cron_job().SerializeToString(), version=bad.version + 1)  # UpdateJob
    await world.tick()

    assert world.executions_of(bad.id) == [to_us(NOW + MINUTE)]
    [alert] = world.alerts_of(bad.id)
    assert alert.resolved_at is not None
    assert bad.id not in world.dispatch.quarantine


async def test_a_server_that_can_read_the_job_resolves_the_alert_and_the_first_one_claims_it_again(world) -> None:
    bad = await world.create(NOW + MINUTE)
    other = await world.create(NOW + MINUTE)
    world.write(bad.id, next_due_at=None)  # fixed below by hand, version unchanged
    world.write(other.id, next_due_at=None)
    await world.tick()
    assert len(world.dispatch.quarantine) == 2

    newer = world.server()  # another process: it reads what the first could not (here: the row was fixed)
    world.write(bad.id, next_due_at=to_us(NOW + MINUTE))
    assert await newer.review_quarantine([PARTITION + 1]) == [], "not its partition: the owner judges"
    assert await newer.review_quarantine(OWNED) == [bad.id]
    assert world.alerts_of(bad.id)[0].resolved_at is not None
    assert world.alerts_of(other.id)[0].resolved_at is None, "still unreadable: still open"

    assert await world.dispatch.review_quarantine(OWNED) == []  # resolved already; this process forgets it
    assert bad.id not in world.dispatch.quarantine and other.id in world.dispatch.quarantine
    await world.tick()
    assert world.executions_of(bad.id) == [to_us(NOW + MINUTE)]


async def test_a_deleted_quarantined_job_has_its_alert_resolved(world) -> None:
    bad = await world.create(NOW + MINUTE)
    world.write(bad.id, spec=b"\xff\xff\xff")
    await world.tick()
    with world.engine.begin() as conn:
        delete_job(conn, bad.id)
    assert await world.server().review_quarantine(OWNED) == [bad.id]
    assert world.alerts_of(bad.id)[0].resolved_at is not None
    await world.dispatch.review_quarantine(OWNED)
    assert bad.id not in world.dispatch.quarantine


async def test_another_process_finding_the_same_job_adds_to_the_one_open_alert(world) -> None:
    bad = await world.create(NOW + MINUTE)
    world.write(bad.id, spec=b"\xff\xff\xff")
    await world.tick()
    await world.tick(world.server())
    [alert] = world.alerts_of(bad.id)
    assert (alert.count, alert.resolved_at) == (2, None)


async def test_past_the_bound_a_batch_of_unreadable_jobs_ends_the_tick_instead_of_looping(world) -> None:
    bounded = world.server(quarantine=Quarantine(max_excluded=0, max_known=10))
    bad = [await world.create(NOW - timedelta(seconds=30)) for _ in range(2)]
    for job in bad:
        world.write(job.id, spec=b"\xff\xff\xff")
    first = await world.tick(bounded, batch=2)
    assert [r.full for r in first] == [False], "no progress: the tick ends"
    again = await world.tick(bounded, batch=2)
    assert len(again[0].unreadable) == 2, "not left out of the scan past the bound"
    assert [a.count for job in bad for a in world.alerts_of(job.id)] == [1, 1], "but not alerted again"


# -- run_all through the store ------------------------------------------------------------------------


@pytest.mark.parametrize("scan_limit", [1_000, 20_000])
async def test_run_all_runs_its_cap_of_10051_missed_whatever_the_scan_limit(world, scan_limit) -> None:
    job = cron_job()
    job.misfire_policy = job_pb2.MISFIRE_POLICY_RUN_ALL
    first = NOW - 10_052 * MINUTE
    record = await world.create(first, job)
    # At NOW the occurrences first + 0 … 10 050 min are over 60 s late (10 051
    # missed); + 10 051 min is 60 s late, not missed; + 10 052 and + 10 053
    # min are in the look-ahead.
    for _ in range(30):
        result = await world.dispatch.claim_due(OWNED, NOW, scan_limit=scan_limit)
        if result.jobs == 0:
            break
    assert world.executions_of(record.id) == [to_us(first + k * MINUTE) for k in range(9_951, 10_054)]
    [skip] = world.skip_rows()
    assert (skip.from_at, skip.to_at, skip.count) == (to_us(first), to_us(first + 9_950 * MINUTE), 9_951)
    assert world.row(record.id)["run_count"] == 10_054
