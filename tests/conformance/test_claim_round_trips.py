"""The claim's round trips on PostgreSQL (``store/pipeline.py``): the
statements that do not depend on each other's results go in one round trip
(the BEGIN with the epochs' check and the due jobs' SELECT, fenced in itself;
the hand-out's tenants with its overlap probe; the writes with the COMMIT), counted from libpq's own trace of what
the client sent, and a failure inside a pipelined part (a serialization
failure, a deadlock, an error at the COMMIT itself, the connection lost
in the COMMIT's round trip) retries the transaction from scratch or
reports the COMMIT in doubt, with nothing written twice."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from tickwheel.shared.ids import execution_id, to_us
from tickwheel_server.store import create_store_engine
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.claim_handout import HandOutOffer
from tickwheel_server.store.claim_reads import DUE_SQL, fenced_due
from tickwheel_server.store.dispatch import DispatchStore
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.fairshare import FairShare
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.support.libpq_trace import client_messages

from .test_dispatch_claim import MINUTE, NOW, OWNED, World, cron_job, once_job
from .test_dispatch_handout import NOW_PASS, SERVED, create

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["postgres"])
def migrated_engine(request: pytest.FixtureRequest):
    # One pooled connection: psycopg prepares per connection, so the claims' trips are counted on one.
    engine = create_store_engine(request.getfixturevalue("migrated_postgres_url"), pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


@pytest.fixture
async def world(migrated_engine, clock) -> World:
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    await PartitionStore(migrated_engine, clock).raise_epochs(OWNED, "claimer")
    world = World(migrated_engine, clock)
    world.dispatch = DispatchStore(migrated_engine, clock)  # its idle limit is the session's (sessionoptions.wait_limits)
    return world


def offer() -> HandOutOffer:
    return HandOutOffer("s1", ((SERVED, 100),), FairShare(), lambda: None, lambda at_us: at_us)


@contextmanager
def traced(engine):
    """libpq's trace of every connection checked out meanwhile; yields a
    list filled, on exit, with the round trips the client sent: each a list
    of the messages up to and including a Sync (extended protocol) or a
    Query (simple protocol), the two after which a client waits (a Flush
    asks for what is ready without ending the trip)."""
    trips: list[list[str]] = []
    with client_messages(engine) as (messages, used):
        yield trips, used
    trip: list[str] = []
    for message in messages:
        trip.append(message)
        if message.split(None, 1)[0] in ("Sync", "Query"):
            trips.append(trip)
            trip = []
    assert all(message == "Flush" for message in trip), f"messages sent and never synced: {trip}"


def statements(trip: list[str]) -> str:
    return " | ".join(message for message in trip if message.startswith(("Parse", "Query")))


async def test_a_claim_that_hands_out_is_three_round_trips_and_one_that_does_not_two(world, migrated_engine) -> None:
    counts = []
    for claim in range(8):  # past psycopg's prepare threshold (5): prepared statements take the same trips
        handed = [await create(world, once_job(NOW), NOW) for _ in range(3)]
        with traced(migrated_engine) as (trips, used):
            result = await world.dispatch.claim_due(OWNED, NOW, offer=offer(), **NOW_PASS)
        assert sorted(h.id for group in result.handed_out for h in group) == sorted(
            execution_id(job_id, NOW) for job_id in handed
        )
        assert all(not connection.autocommit for connection in used), "a connection went back in autocommit"
        counts.append(len(trips))
        if claim == 0:
            assert len(trips) == 3, [statements(trip) for trip in trips]
            first, reads, writes = map(statements, trips)
            assert "BEGIN ISOLATION LEVEL READ COMMITTED" in first and "FROM partitions" in first
            assert first.index("BEGIN") < first.index("FROM partitions"), "the epochs are read in the transaction"
            assert "SET LOCAL" not in first, "no setting of its own: the session's idle limit binds it"
            assert first.index("FOR SHARE") < first.index("FROM job_cursors"), "the epochs locked before the due jobs"
            assert reads.index("FROM tenants") < reads.index("FROM executions"), "the tenants' locks first, as before"
            assert writes.index("INSERT INTO executions") < writes.index("COMMIT")
            assert writes.index("UPDATE job_cursors") < writes.index("COMMIT")
    assert counts == [3] * 8, counts
    # Without an offer: the epochs and the due jobs (with the BEGIN), the writes (with the COMMIT).
    await create(world, once_job(NOW), NOW)
    with traced(migrated_engine) as (trips, _):
        result = await world.dispatch.claim_due(OWNED, NOW, **NOW_PASS)
    assert len(result.executions) == 1 and len(trips) == 2, [statements(trip) for trip in trips]


async def test_a_claim_that_raises_alerts_sends_them_before_its_writes_and_commits_with_the_writes(
    world, migrated_engine
) -> None:
    """A claim that skips missed runs raises their ``skipped`` alert before
    its writes, so the COMMIT rides the writes' pipelined trip: no
    pipelined trip leaves its transaction open (one would arm no idle
    limit: ``store/pipeline.py``), and no trip of its own for the COMMIT."""
    world.dispatch = DispatchStore(migrated_engine, world.clock, alerts=AlertStore(migrated_engine, world.clock))
    await world.create(cron_job(), NOW - 10 * MINUTE)
    with traced(migrated_engine) as (trips, _):
        result = await world.dispatch.claim_due(OWNED, NOW)
    assert (result.skipped, result.alerts_raised, len(result.executions)) == (8, 1, 4)
    sent = [statements(trip) for trip in trips]
    alerts_at = [index for index, trip in enumerate(sent) if "INSERT INTO alerts" in trip]
    assert len(alerts_at) == 1 and "INSERT INTO executions" in sent[-1] and "UPDATE job_cursors" in sent[-1], sent
    assert alerts_at[0] < len(sent) - 1 and "\"COMMIT\"" in sent[-1].split(" | ")[-1], sent
    assert len(sent) == 6, sent  # the BEGIN with the reads, the missed count, the skip range (2), the alert, the writes
    pipelined = [trip for trip in trips if sum(message.startswith("Execute") for message in trip) > 1]
    assert pipelined and all("COMMIT" in statements(trip) for trip in pipelined), sent


FAIL_ONCE = """
CREATE SEQUENCE claim_fails;
CREATE FUNCTION claim_fails() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('claim_fails') = 1 THEN
        IF TG_ARGV[0] = 'lost' THEN
            PERFORM pg_terminate_backend(pg_backend_pid());
            PERFORM pg_sleep(5);
        END IF;
        RAISE EXCEPTION 'forced by the test' USING ERRCODE = TG_ARGV[0];
    END IF;
    RETURN NULL;
END $$;
"""

FAILURES = {
    "a deadlock at the cursors' UPDATE": (
        "CREATE TRIGGER claim_fails AFTER UPDATE ON job_cursors FOR EACH STATEMENT "
        "EXECUTE FUNCTION claim_fails('40P01')",
        "40P01",
    ),
    "a serialization failure at the insert": (
        "CREATE TRIGGER claim_fails AFTER INSERT ON executions FOR EACH STATEMENT EXECUTE FUNCTION claim_fails('40001')",
        "40001",
    ),
    "a serialization failure at the COMMIT itself": (
        "CREATE CONSTRAINT TRIGGER claim_fails AFTER INSERT ON executions DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION claim_fails('40001')",
        "40001",
    ),
}


def arm(engine, trigger: str) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(FAIL_ONCE)
        conn.exec_driver_sql(trigger)


def fired(engine) -> int:
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT last_value FROM claim_fails").scalar_one()


def written(engine) -> tuple[dict[str, tuple], list[tuple]]:
    with engine.connect() as conn:
        rows = {r.id: (r.status, r.owner, r.delivery) for r in conn.execute(
            sa.text("SELECT id, status, owner, delivery FROM executions"))}  # fmt: skip
        cursors = sorted(tuple(r) for r in conn.execute(sa.text("SELECT DISTINCT state, run_count FROM job_cursors")))
    return rows, cursors


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("handing_out", [True, False], ids=["handing out", "no offer"])
async def test_a_failure_inside_the_pipelined_writes_retries_the_claim_from_scratch(
    world, migrated_engine, failure, handing_out
) -> None:
    jobs = [await create(world, once_job(NOW), NOW) for _ in range(4)]
    trigger, sqlstate = FAILURES[failure]
    arm(migrated_engine, trigger)
    result = await world.dispatch.claim_due(OWNED, NOW, offer=offer() if handing_out else None, **NOW_PASS)
    assert fired(migrated_engine) >= 2, "the forced failure happened, and the retry passed the trigger again"
    assert world.dispatch.retries == {sqlstate: 1}
    ids = sorted(execution_id(job_id, NOW) for job_id in jobs)
    rows, cursors = written(migrated_engine)
    assert sorted(rows) == ids, "each execution once"
    assert cursors == [("completed", 1)], "each cursor moved once"
    if handing_out:
        assert sorted(h.id for group in result.handed_out for h in group) == ids and result.executions == []
        assert set(rows.values()) == {("running", "s1", 1)}
    else:
        assert sorted(e.id for e in result.executions) == ids and result.handed_out == []
        assert set(rows.values()) == {("scheduled", None, 0)}


async def test_the_connection_lost_in_the_commits_round_trip_is_a_commit_in_doubt(world, migrated_engine) -> None:
    jobs = [await create(world, once_job(NOW), NOW) for _ in range(2)]
    arm(migrated_engine, "CREATE CONSTRAINT TRIGGER claim_fails AFTER INSERT ON executions DEFERRABLE "
                         "INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION claim_fails('lost')")
    doubts = []

    class Doubts:
        def add(self, entry) -> None:
            doubts.append(entry)

    lent = HandOutOffer("s1", ((SERVED, 100),), FairShare(), lambda: None, lambda at_us: at_us, Doubts())
    with pytest.raises(AmbiguousCommitError):
        await world.dispatch.claim_due(OWNED, NOW, offer=lent, **NOW_PASS)
    ids = sorted(execution_id(job_id, NOW) for job_id in jobs)
    [doubt] = doubts
    assert sorted(ident for ident, _ in doubt.items) == ids, "every row sent handed out is kept in doubt"
    assert world.dispatch.retries == {}, "a COMMIT in doubt is not retried"
    # The backend died before its COMMIT: nothing was written; the next claim claims it all.
    assert written(migrated_engine) == ({}, [("active", 0)])
    result = await world.dispatch.claim_due(OWNED, NOW, offer=offer(), **NOW_PASS)
    assert sorted(h.id for group in result.handed_out for h in group) == ids


async def test_a_claim_fenced_by_a_stale_epoch_writes_nothing_with_its_begin_pipelined(world, migrated_engine) -> None:
    await create(world, once_job(NOW), NOW)
    stale = {p: 2 if p == 0 else 1 for p in OWNED}  # partition 0 held at an epoch the store never had
    result = await DispatchStore(migrated_engine, world.clock).claim_due(stale, NOW, offer=offer(), **NOW_PASS)
    assert result.stale_partitions == {0}
    with migrated_engine.connect() as conn:
        partitions = dict(conn.execute(sa.text("SELECT DISTINCT partition, 1 FROM executions")).all())
    assert 0 not in partitions, "nothing written under the stale epoch"


async def test_the_due_jobs_sent_with_the_epochs_skip_a_stale_partition_and_lock_the_live_ones(
    world, migrated_engine, migrated_postgres_url
) -> None:
    """The due SELECT goes in the epochs' round trip, before their answer:
    it must scan only the partitions whose stored epoch is the one held
    (a stale partition's jobs neither returned nor locked, so its new
    owner's claim does not pass over them), and the epochs it read stay
    share-locked (a raise waits for the claim)."""
    jobs = [await create(world, once_job(NOW), NOW) for _ in range(24)]
    with migrated_engine.connect() as conn:
        partition_of = dict(conn.execute(sa.text("SELECT id, partition FROM jobs")).all())
    assert set(partition_of[job] for job in jobs) == set(OWNED), "a job in every partition"
    stale = {p: 2 if p == 0 else 1 for p in OWNED}  # partition 0 held at an epoch the store never had
    statement = DUE_SQL[False, True, True, True]
    parameters = {"horizon": to_us(NOW), "batch": 1000}
    second = create_store_engine(migrated_postgres_url, pool_size=1, max_overflow=0)
    with migrated_engine.connect() as claimer, second.connect() as other:
        claimer.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        found, rows = fenced_due(claimer, stale, statement, parameters)
        assert found == {0}
        assert sorted(row[0] for row in rows) == sorted(job for job in jobs if partition_of[job] != 0)
        other.exec_driver_sql("SET lock_timeout = '200ms'")
        free = other.exec_driver_sql(
            "SELECT job_id FROM job_cursors WHERE partition = 0 FOR UPDATE NOWAIT").scalars().all()
        stale_jobs = sorted(job for job in jobs if partition_of[job] == 0)
        assert sorted(free) == stale_jobs, "a stale partition's jobs unlocked"
        with pytest.raises(sa.exc.OperationalError, match="lock"):
            other.exec_driver_sql("UPDATE partitions SET epoch = epoch + 1 WHERE partition = 1")
        other.rollback()
        claimer.rollback()
    second.dispose()
