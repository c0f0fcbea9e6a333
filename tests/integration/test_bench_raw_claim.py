"""The raw claim bench_dispatch compares the store's claim with
(``loadtest/peers.py``) on a real PostgreSQL: its tables are a copy of
Tickwheel's in their own schema, and its three statements claim every due job
once, skip what another transaction holds, leave jobs not due alone and never
touch Tickwheel's tables. The statements run through PREPARE/EXECUTE on
psycopg, so the test needs no asyncpg (the bench extra)."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtest"))

import bench_dispatch as bd  # noqa: E402
import peers  # noqa: E402

pytestmark = pytest.mark.postgres

DUE, NOT_DUE, BATCH = 30, 7, 8
HORIZON = bd.T_US + 59_000_000


def claim_batch(pg: psycopg.Connection, limit: int) -> int:
    """One transaction of the raw claim, as ``peers._raw_claim`` runs it
    (parameters bound client-side: EXECUTE takes no ``$n``)."""
    with psycopg.ClientCursor(pg) as cur, pg.transaction():
        rows = cur.execute("EXECUTE raw_claim(%s, %s)", (HORIZON, limit)).fetchall()
        if rows:
            ids = [r[0] for r in rows]
            cur.execute("EXECUTE raw_insert(%s, %s, %s, %s, %s, %s, %s, %s)",
                       (ids, [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                        [r[4] for r in rows], bd.HANDLER, bd.PAYLOAD, bd.T_US))
            cur.execute("EXECUTE raw_reschedule(%s, %s)", (ids, bd.MINUTE_US))
    return len(rows)


def test_the_raw_claim_claims_each_due_job_once_on_its_own_tables(postgres_url):
    bd.prepare_schema(postgres_url)
    with psycopg.connect(bd.conninfo(postgres_url), autocommit=True) as pg:
        assert bd.load(pg, bd.job_rows(7, DUE, NOT_DUE)) == DUE + NOT_DUE
        cursors = "SELECT job_id, next_run_at, run_count FROM job_cursors ORDER BY job_id"
        tickwheel_jobs = pg.execute(cursors).fetchall()
        assert peers.prepare_raw_tables(pg) == DUE + NOT_DUE
        indexes = {name: definition for name, definition in pg.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'jobs'",
            (peers.RAW_SCHEMA,))}
        assert "raw_jobs_due" in indexes, "the plain claim's own index"
        assert not any("(partition, next_run_at)" in d for d in indexes.values()), "not the dispatcher's index"
        assert any("UNIQUE" in d and "(id)" in d for d in indexes.values()), "Tickwheel's key copied"

        sql = peers.raw_claim_sql()
        pg.execute("SET lock_timeout = '5s'")  # a claim that waits on the held rows fails instead of hanging
        pg.execute(f"PREPARE raw_claim AS {sql.claim}")
        pg.execute(f"PREPARE raw_insert AS {sql.insert}")
        pg.execute(f"PREPARE raw_reschedule AS {sql.reschedule}")

        # Another claimer holds three due jobs: the claim skips them, it does not wait.
        with psycopg.connect(bd.conninfo(postgres_url)) as other:
            held = [r[0] for r in other.execute(
                f"SELECT id FROM {peers.RAW_SCHEMA}.jobs WHERE next_run_at = %s ORDER BY id LIMIT 3 FOR UPDATE",
                (bd.T_US,))]
            claimed = []
            while True:
                n = claim_batch(pg, BATCH)
                claimed.append(n)
                if n < BATCH:
                    break
            other.rollback()
        assert sum(claimed) == DUE - 3 and max(claimed) == BATCH
        with pytest.raises(AssertionError):
            peers.check_raw_drained(pg, DUE, bd.T_US + bd.MINUTE_US)
        still_due = [r[0] for r in pg.execute(
            f"SELECT id FROM {peers.RAW_SCHEMA}.jobs WHERE next_run_at = %s ORDER BY id", (bd.T_US,))]
        assert still_due == sorted(held)

        # Released: the next claim takes them, and nothing is claimed twice.
        assert claim_batch(pg, BATCH) == 3 and claim_batch(pg, BATCH) == 0
        peers.check_raw_drained(pg, DUE, bd.T_US + bd.MINUTE_US)
        executions = pg.execute(
            f"SELECT id, job_id, nominal_at, due_at, status, handler, payload FROM {peers.RAW_SCHEMA}.executions"
        ).fetchall()
        assert {r[0] for r in executions} == {f"{r[1]}:{bd.T_US}" for r in executions}
        assert {(r[2], r[3], r[4], r[5], bytes(r[6])) for r in executions} == {
            (bd.T_US, bd.T_US, "scheduled", bd.HANDLER, bd.PAYLOAD)}
        not_due = pg.execute(
            f"SELECT count(*) FROM {peers.RAW_SCHEMA}.jobs WHERE run_count = 0 AND next_run_at > %s", (HORIZON,)
        ).fetchone()[0]
        assert not_due == NOT_DUE, "jobs beyond the horizon are left alone"

        # Tickwheel's own tables are as they were.
        assert pg.execute(cursors).fetchall() == tickwheel_jobs
        assert pg.execute("SELECT count(*) FROM executions").fetchone()[0] == 0
