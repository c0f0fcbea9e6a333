"""Paging over every status on SQLite and PostgreSQL: SearchExecutions and a
job's history read each status group from its own indexes (migration 0014)
and merge them; every page sequence must give exactly the executions a
filter selects, newest ``(nominal_at, id)`` first, each once, whatever the
page size and scan bound (retries waiting come from two groups; many
executions share an instant)."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import to_us
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.operations import OperationsStore
from tickwheel_server.store.tables import executions

BASE = to_us(datetime(2030, 1, 1, tzinfo=timezone.utc))
KINDS = [("scheduled", 1), ("scheduled", 2), ("waiting", 1), ("running", 1), ("running", 3), ("succeeded", 1),
         ("dead", 3), ("canceled", 1)]  # fmt: skip


@pytest.fixture
def rows(migrated_engine) -> list[dict]:
    rng = random.Random(14)
    made = []
    for index in range(240):
        tenant = f"t{index % 3}"
        job = f"job_{tenant}_{index % 4}"
        status, attempt = rng.choice(KINDS)
        nominal = BASE - 1_000_000 * (index // 5)  # five executions an instant
        made.append(dict(
            id=f"{job}:{index:04d}", job_id=job, tenant=tenant, partition=0, origin="scheduled", nominal_at=nominal,
            due_at=nominal, ready_at=nominal, attempt=attempt, delivery=attempt, status=status,
            owner="s1" if status == "running" else None, worker_id=None, handler="echo", missed_count=1,
            reap_count=0, payload=b"p", error="", dead_reason="", created_at=nominal,
            finished_at=nominal + 1 if status in ("succeeded", "dead", "canceled") else None,
        ))  # fmt: skip
    with migrated_engine.begin() as conn:
        conn.execute(executions.insert(), made)
    return made


def expected(rows, *, tenant="", job="", statuses=()) -> list[str]:
    kept = [r for r in rows if (not tenant or r["tenant"] == tenant) and (not job or r["job_id"] == job)
            and (not statuses or r["status"] in statuses)]  # fmt: skip
    return [r["id"] for r in sorted(kept, key=lambda r: (r["nominal_at"], r["id"]), reverse=True)]


FILTERS = [
    {},
    {"tenant": "t1"},
    {"job_id": "job_t2_1"},
    {"tenant": "t0", "job_id": "job_t0_0"},
    {"statuses": ("running",)},
    {"statuses": ("scheduled", "dead")},
    {"tenant": "t1", "statuses": ("waiting", "running")},
    {"job_id": "job_t1_3", "statuses": ("running",)},
    {"job_id": "job_t1_3", "statuses": ("scheduled",)},
]


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "all")
async def test_search_pages_give_every_execution_once_in_order(migrated_engine, rows, filters) -> None:
    store = OperationsStore(migrated_engine, FakeClock(autojump=True))
    want = expected(rows, tenant=filters.get("tenant", ""), job=filters.get("job_id", ""),
                    statuses=filters.get("statuses", ()))  # fmt: skip
    assert want
    for limit, scan in ((1, 10_000), (7, 10_000), (7, 9), (3, 4), (500, 10_000)):
        found, key, pages = [], None, 0
        while True:
            page = await store.search_executions(before_key=key, limit=limit, scan=scan, **filters)
            assert len(page.executions) <= limit
            found += [e.id for e in page.executions]
            pages += 1
            key = page.next_key
            if key is None:
                break
            assert pages < 1000, (limit, scan)
        assert found == want, (limit, scan)


@pytest.mark.parametrize("statuses", [(), ("running",), ("scheduled", "succeeded")])
async def test_a_job_s_history_pages_give_every_execution_once_in_order(migrated_engine, rows, statuses) -> None:
    store = HistoryStore(migrated_engine, FakeClock(autojump=True))
    for job in ("job_t0_0", "job_t2_1"):
        want = expected(rows, job=job, statuses=statuses)
        for limit in (1, 4, 100):
            found, key = [], None
            while True:
                page = await store.list_executions(job.split("_")[1], job, before_key=key, limit=limit,
                                                   statuses=statuses)  # fmt: skip
                found += [e.id for e in page.executions]
                key = page.next_key
                if key is None:
                    break
            assert found == want, (job, limit)
