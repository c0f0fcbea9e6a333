"""Lists a request or a batch names go to the store as one statement text
whatever their length (``store.base.one_of`` and ``pairs_in``), and hostile
values in them find exactly their own rows.

- The store's modules send an expanding ``IN`` (a text per list length: a
  prepared plan each on PostgreSQL, a plan-cache entry each on CockroachDB)
  only where the list is a constant, a subquery or SQLite's: counted per
  module below, each with its reason; a new one, or a stale count, fails.
- Each converted path run over lists of 1 to 64 items sends the same
  statement texts at every length (PostgreSQL).
- Each converted path given hostile values (quotes, commas, braces,
  backslashes, NULL words, the empty string, unicode, an injection string)
  beside decoys, an empty list and 10 000 values, on SQLite and PostgreSQL,
  touches exactly the rows asked for, through the store's public API.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

import tickwheel_server.store as store_package
from tickwheel.shared.ids import to_us
from tickwheel_server.policy.rollups import DAY_US, day_of
from tickwheel_server.alerts.catalogue import NewAlert
from tickwheel_server.errors import NotFound
from tickwheel_server.store.alerts import AlertStore
from tickwheel_server.store.calendars import CalendarStore
from tickwheel_server.store.credentials import WorkerCredentialStore
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.manual import ManualStore
from tickwheel_server.store.partitions import PartitionStore
from tickwheel_server.store.retention import RetentionStore
from tickwheel_server.store.tables import alerts as alerts_table, attempt_rollups, jobs as jobs_table
from tickwheel_server.store.tenants import Tenant, TenantStore

from tests.conformance.test_array_membership import DECOYS, HOSTILE
from tests.conformance.test_calendars import definition
from tests.conformance.test_job_writes import new_job
from tests.support.plans import captured

STORE = Path(store_package.__file__).parent
_EXPANDING = re.compile(r"\.(?:in_|not_in|notin_)\(|expanding\s*=\s*True")

EXPANDING_LEFT = {
    "alerts.py": (1, "a subquery (a batch of the stale owed alerts)"),
    "arming.py": (2, "SQLite's arm and start (PostgreSQL and CockroachDB send arrays)"),
    "arming_pick.py": (1, "a subquery (the picked ids)"),
    "base.py": (2, "one_of and pairs_in on SQLite"),
    "claim_handout.py": (2, "SQLite's tenants and busy probe"),
    "claim_reads.py": (3, "SQLite's claim SELECT (partitions, exclusions) and its specs"),
    "claim_writes.py": (1, "SQLite's insert of hand-outs"),
    "dispatch.py": (1, "the review's alert kinds: a constant"),
    "handout.py": (2, "a subquery (the picked ids) on SQLite and the row-locked take"),
    "handout_starts.py": (1, "SQLite's jobs of a round"),
    "isolation.py": (4, "status_in's literals, two subqueries (the oldest waiters), SQLite's waiters"),
    "lateness.py": (1, "a subquery (the paused tenants)"),
    "outcomes.py": (1, "SQLite's result rows"),
    "partitions.py": (1, "SQLite's epoch check"),
    "requests.py": (1, "a subquery (the oldest request ids)"),
    "requeue.py": (1, "a subquery (a batch of the owner's running executions to restamp)"),
    "rollups.py": (2, "SQLite's read of the rollups to merge"),
    "session_walk.py": (1, "SQLite's sessions holding running rows: a subquery (the recursive walk)"),
}
"""Expanding ``IN`` left in each store module, and why its list is not a request's."""


def test_no_store_module_sends_an_expanding_in_over_a_request_s_list() -> None:
    found = {}
    for path in sorted(STORE.rglob("*.py")):
        count = len(_EXPANDING.findall(path.read_text()))
        if count:
            found[str(path.relative_to(STORE))] = count
    assert found == {name: count for name, (count, _why) in EXPANDING_LEFT.items()}


# --------------------------------------------------------------------------- the paths


T0 = datetime(2026, 12, 6, tzinfo=timezone.utc)
DAY, FUTURE = day_of(to_us(T0)) - DAY_US, day_of(to_us(T0)) + DAY_US
"""A day whose rollups retention prunes before ``T0``, and one it keeps."""


async def _tenants(engine, clock, *names: str) -> None:
    store = TenantStore(engine, clock)
    for name in names:
        await store.create(Tenant(name=name))


async def _jobs(engine, clock, count: int, tenant: str = "acme", prefix: str = "r") -> list:
    store = JobStore(engine, clock, partition_count=4)
    outcomes = await store.create_many(tenant, [(new_job(clock, tenant), f"{prefix}{n}") for n in range(count)])
    return [outcome[0] for outcome in outcomes]


# Each path: (what it needs, made before the trace; the path itself, traced).


async def _made_jobs(engine, clock, n: int) -> list:
    return await _jobs(engine, clock, n, prefix=f"d{n}-")


async def _delete_jobs(engine, clock, n: int, made: list) -> None:
    assert await JobStore(engine, clock, partition_count=4).delete_many("acme", [(j.id, 0) for j in made]) == [0] * n


async def _first_creates(engine, clock, n: int) -> list:
    store = JobStore(engine, clock, partition_count=4)
    return [o[0].id for o in await store.create_many("acme", [(new_job(clock), f"c{n}-{i}") for i in range(n)])]


async def _repeat_creates(engine, clock, n: int, first: list) -> None:
    store = JobStore(engine, clock, partition_count=4)
    again = await store.create_many("acme", [(new_job(clock), f"c{n}-{i}") for i in range(n)])
    assert [o[0].id for o in again] == first and not any(o[1] for o in again)


async def _tenants_of(engine, clock, n: int) -> list:
    names = [f"t{n}-{i}" for i in range(n)]
    await _tenants(engine, clock, *names)
    return names


async def _credentials(engine, clock, n: int, names: list) -> None:
    store = WorkerCredentialStore(engine, clock)
    issued = await store.issue(names, ["echo"], False)
    assert await store.live([issued.credential.id] + [f"gone{i}" for i in range(n - 1)]) == {issued.credential.id}


async def _a_calendar(engine, clock, n: int) -> None:
    await CalendarStore(engine, clock).create("acme", f"cal{n}", definition(), f"cal{n}")


async def _calendars(engine, clock, n: int, _made) -> None:
    found = await CalendarStore(engine, clock).present("acme", {f"cal{n}"} | {f"none{n}-{i}" for i in range(n - 1)})
    assert found == {f"cal{n}"}


async def _raised(engine, clock, n: int) -> list:
    keys = [f"k{n}-{i}" for i in range(n)]
    await AlertStore(engine, clock).raise_many([NewAlert(key=k, kind="dead_letter", severity="warning", summary="s")
                                                for k in keys])  # fmt: skip
    return keys


async def _alerts(engine, clock, n: int, keys: list) -> None:
    with engine.begin() as conn:
        assert len(AlertStore(engine, clock).resolve_many_in(conn, keys)) == n


async def _nothing(engine, clock, n: int) -> None:
    return None


async def _partitions(engine, clock, n: int, _made) -> None:
    await PartitionStore(engine, clock).rows(range(n))


async def _a_job(engine, clock, n: int) -> str:
    (job,) = await _jobs(engine, clock, 1, prefix=f"b{n}-")
    return job.id


async def _backfill(engine, clock, n: int, job_id: str) -> None:
    nominals = [clock.now() - timedelta(hours=i + 1) for i in range(n)]
    assert (await ManualStore(engine, clock).backfill("acme", job_id, nominals, dry_run=False)).created == n


async def _old_rollups(engine, clock, n: int) -> None:
    with engine.begin() as conn:
        conn.execute(attempt_rollups.insert(), [
            dict(job_id=f"j{n}-{i}", day=DAY, tenant="acme", runs=1, failures=0, lateness_p50_us=0,
                 lateness_p90_us=0, lateness_p99_us=0, lateness_sketch="", updated_at=0) for i in range(n)
        ])  # fmt: skip


async def _rollups(engine, clock, n: int, _made) -> None:
    assert await RetentionStore(engine, clock).prune_rollups(T0, limit=n) == n


PATHS = {
    "delete_many": (_made_jobs, _delete_jobs), "create_many repeated": (_first_creates, _repeat_creates),
    "credentials": (_tenants_of, _credentials), "calendars present": (_a_calendar, _calendars),
    "alerts resolved": (_raised, _alerts), "partitions": (_nothing, _partitions), "backfill": (_a_job, _backfill),
    "rollups pruned": (_old_rollups, _rollups),
}
LENGTHS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 64)
_SAVEPOINT = re.compile(r"^(RELEASE |ROLLBACK TO )?SAVEPOINT ")
"""Savepoints: a batch of 64 jobs or more takes its quota under one (``quota.SAVEPOINT_FROM``), a fixed text."""


@pytest.mark.parametrize("path", sorted(PATHS))
async def test_a_converted_path_sends_one_text_whatever_its_list_s_length(migrated_engine, clock, path) -> None:
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("SQLite keeps the expanding IN (no prepared plans to churn)")
    await _tenants(migrated_engine, clock, "acme")
    prepare, act = PATHS[path]
    texts: dict[int, set[str]] = {}
    for n in LENGTHS:
        made = await prepare(migrated_engine, clock, n)
        with captured(migrated_engine) as seen:
            await act(migrated_engine, clock, n, made)
        texts[n] = {sent.statement for sent in seen if not _SAVEPOINT.match(sent.statement)}
    grown = {n: sorted(found - texts[LENGTHS[0]]) for n, found in texts.items() if found != texts[LENGTHS[0]]}
    assert not grown, grown
    assert any("ANY (CAST(" in text for text in texts[1]), texts[1]


# --------------------------------------------------------------------------- hostile values


MANY = [f"v{n:05d},{{\"'\\" for n in range(10_000)]


async def test_a_batch_delete_of_hostile_ids_deletes_exactly_its_own_jobs(migrated_engine, clock) -> None:
    await _tenants(migrated_engine, clock, "acme", "other")
    mine = await _jobs(migrated_engine, clock, 3)
    (theirs,) = await _jobs(migrated_engine, clock, 1, tenant="other")
    store = JobStore(migrated_engine, clock, partition_count=4)
    assert await store.delete_many("acme", []) == []
    items = [(ident, 0) for ident in HOSTILE + DECOYS + [theirs.id]] + [(mine[0].id, 0)]
    outcomes = await store.delete_many("acme", items)
    assert all(isinstance(o, NotFound) for o in outcomes[:-1]) and outcomes[-1] == 0
    with migrated_engine.connect() as conn:
        left = sorted(conn.execute(sa.select(jobs_table.c.id)).scalars())
    assert left == sorted([j.id for j in mine[1:]] + [theirs.id])
    many = await store.delete_many("acme", [(ident, 0) for ident in MANY] + [(mine[1].id, 0)])
    assert sum(isinstance(o, NotFound) for o in many) == 10_000 and many[-1] == 0


async def test_hostile_request_ids_find_exactly_their_own_jobs_again(migrated_engine, clock) -> None:
    await _tenants(migrated_engine, clock, "acme", "other")
    store = JobStore(migrated_engine, clock, partition_count=4)
    await store.create_many("other", [(new_job(clock, "other"), request_id) for request_id in HOSTILE])
    first = await store.create_many("acme", [(new_job(clock), request_id) for request_id in HOSTILE])
    await store.create_many("acme", [(new_job(clock), request_id) for request_id in DECOYS])
    again = await store.create_many("acme", [(new_job(clock), request_id) for request_id in reversed(HOSTILE)])
    assert [o[0].id for o in again] == [o[0].id for o in reversed(first)]
    assert not any(created for _job, created in again)
    assert all(job.tenant == "acme" for job, _created in again)


async def test_hostile_tenant_names_and_credential_ids_find_exactly_their_own(migrated_engine, clock) -> None:
    names = [name for name in HOSTILE if name.strip()]  # a blank name is no tenant's
    await _tenants(migrated_engine, clock, *names, *DECOYS)
    store = WorkerCredentialStore(migrated_engine, clock)
    issued = await store.issue(names[:5], ["echo"], False)
    assert sorted(issued.credential.tenants) == sorted(names[:5])
    with pytest.raises(NotFound):
        await store.issue(names[:3] + ["absent' OR '1'='1"], ["echo"], False)
    assert await store.live([]) == set()
    assert await store.live(HOSTILE + MANY + [issued.credential.id]) == {issued.credential.id}


async def test_credential_pages_of_hostile_tenants_and_keys_hold_exactly_their_own(migrated_engine, clock) -> None:
    """ListWorkerCredentials' and ListApiKeys' pages (a tenant filter and a
    keyset ``after`` a page token names) given hostile tenant names and a
    hostile id to continue after: each page holds the tenant's own, each once."""
    names = [name for name in HOSTILE if name.strip()]
    await _tenants(migrated_engine, clock, *names, *DECOYS)
    store, keys = WorkerCredentialStore(migrated_engine, clock), TenantStore(migrated_engine, clock)
    mine = {name: {(await store.issue([name, DECOYS[0]], [], False)).credential.id for _ in range(3)}
            for name in names[:4]}  # fmt: skip
    for name, issued in mine.items():
        listed, after = [], None
        while True:
            page = await store.list(name, after=after, limit=1)
            listed += [c.id for c in page.credentials]
            if page.next_key is None:
                break
            after = page.next_key
        assert sorted(listed) == sorted(issued), name
        before, since = clock.now() - timedelta(seconds=1), clock.now() + timedelta(seconds=1)
        assert (await store.list(name, after=(before, HOSTILE[1]), limit=1000)).credentials == []
        assert [k.tenant for k in await keys.list_keys(name, after=(since, HOSTILE[2]))] == [name]
    assert len((await store.list(DECOYS[0], limit=1000)).credentials) == 12


async def test_hostile_calendar_names_are_present_only_as_themselves(migrated_engine, clock) -> None:
    await _tenants(migrated_engine, clock, "acme", "other")
    store = CalendarStore(migrated_engine, clock)
    for n, name in enumerate(HOSTILE[:8]):
        await store.create("other", name, definition(), f"o{n}")
    for n, name in enumerate(DECOYS):
        await store.create("acme", name, definition(), f"a{n}")
    await store.create("acme", HOSTILE[2], definition(), "mine")
    assert await store.present("acme", set(HOSTILE)) == {HOSTILE[2]}
    assert await store.present("acme", set()) == set()
    assert await store.present("acme", set(MANY) | {HOSTILE[2]}) == {HOSTILE[2]}


async def test_hostile_alert_keys_resolve_exactly_their_own_alerts(migrated_engine, clock) -> None:
    store = AlertStore(migrated_engine, clock)
    keys = [key for key in HOSTILE if key]  # an alert needs a key
    await store.raise_many([NewAlert(key=k, kind="dead_letter", severity="warning", summary="s") for k in keys + DECOYS])
    with migrated_engine.begin() as conn:
        assert store.resolve_many_in(conn, []) == []
        resolved = store.resolve_many_in(conn, keys[:6] + MANY)
    assert sorted(a.key for a in resolved) == sorted(keys[:6])
    with migrated_engine.connect() as conn:
        still_open = set(conn.execute(sa.select(alerts_table.c.dedup_key).where(alerts_table.c.resolved_at.is_(None)))
                         .scalars())  # fmt: skip
    assert still_open == set(keys[6:] + DECOYS)


async def test_partitions_asked_for_are_exactly_those_read(migrated_engine, clock) -> None:
    store = PartitionStore(migrated_engine, clock)
    assert await store.raise_epochs({0: 1, 3: 1, 7: 1}, "s1") == {0, 3, 7}
    assert await store.rows([]) == []
    assert [row.partition for row in await store.rows([3, -1, 2**31 - 1, 7])] == [3, 7]
    assert [row.partition for row in await store.rows(range(-5_000, 5_000))] == [0, 3, 7]


async def test_rollups_pruned_are_exactly_the_old_days_pairs(migrated_engine, clock) -> None:
    rows = [(job, day) for job in HOSTILE + DECOYS for day in (DAY, FUTURE)]
    with migrated_engine.begin() as conn:
        conn.execute(attempt_rollups.insert(), [
            dict(job_id=job, day=day, tenant="acme", runs=1, failures=0, lateness_p50_us=0, lateness_p90_us=0,
                 lateness_p99_us=0, lateness_sketch="", updated_at=0) for job, day in rows
        ])  # fmt: skip
    assert await RetentionStore(migrated_engine, clock).prune_rollups(T0, limit=10_000) == len(HOSTILE + DECOYS)
    with migrated_engine.connect() as conn:
        left = sorted(tuple(r) for r in conn.execute(sa.select(attempt_rollups.c.job_id, attempt_rollups.c.day)))
    assert left == sorted((job, FUTURE) for job in HOSTILE + DECOYS)
