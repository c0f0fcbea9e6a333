"""The SQL of the daily rollups of attempts (``attempt_rollups``): adding a
batch's figures to their (job, day) rows in the caller's transaction, and
the row as read (:class:`Rollup`).

What a batch adds is decided by
:func:`~tickwheel_server.policy.rollups.summarise_attempts`; the retention
store (:mod:`.retention`) calls :func:`merge_rollups` in the transaction
that deletes or walks the attempts it rolls up, so each attempt is counted
exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from ..policy.rollups import DayFigures, LatenessSketch
from .tables import attempt_rollups


@dataclass(frozen=True)
class Rollup:
    """One job's attempts of one UTC day, after they left the hot history."""

    job_id: str
    tenant: str
    day: datetime
    """Midnight UTC of the day the attempts started."""
    runs: int
    failures: int
    lateness_p50: timedelta
    lateness_p90: timedelta
    lateness_p99: timedelta


def merge_rollups(
    conn: Connection, figures: Mapping[tuple[str, int], DayFigures], now_us: int, row_locks: bool
) -> None:
    """Add ``figures`` to their rollup rows: read the existing ones (by
    primary key, joined to the keys as arrays on PostgreSQL and CockroachDB,
    locked; on SQLite a superset by job and day, filtered here), merge, and write
    every row back with one ``INSERT … ON CONFLICT DO UPDATE`` (over arrays
    on PostgreSQL and CockroachDB)."""
    if not figures:
        return
    keys = sorted(figures)
    if conn.dialect.name == "sqlite":
        query = sa.select(attempt_rollups).where(
            attempt_rollups.c.job_id.in_(sorted({job for job, _ in keys})),
            attempt_rollups.c.day.in_(sorted({day for _, day in keys})),
        )
        rows = conn.execute(query)
    else:
        rows = conn.exec_driver_sql(
            _LOCK_ROLLUPS if row_locks else _READ_ROLLUPS,
            {"job_id": [job for job, _ in keys], "day": [day for _, day in keys]},
        )
    existing = {(row.job_id, row.day): row for row in rows}
    merged = []
    for key in keys:
        day = figures[key]
        sketch, runs, failures = LatenessSketch(), day.runs, day.failures
        row = existing.get(key)
        if row is not None:
            sketch = LatenessSketch.from_json(row.lateness_sketch)
            runs += row.runs
            failures += row.failures
        sketch.merge(day.sketch)
        merged.append(dict(
            job_id=key[0], day=key[1], tenant=day.tenant, runs=runs, failures=failures,
            lateness_p50_us=sketch.quantile(0.5), lateness_p90_us=sketch.quantile(0.9),
            lateness_p99_us=sketch.quantile(0.99), lateness_sketch=sketch.to_json(), updated_at=now_us,
        ))  # fmt: skip
    if conn.dialect.name == "sqlite":  # no arrays, no network: an executemany
        upsert = sqlite_insert(attempt_rollups)
        conn.execute(
            upsert.on_conflict_do_update(
                index_elements=[attempt_rollups.c.job_id, attempt_rollups.c.day],
                set_={name: upsert.excluded[name] for name in _ROLLUP_WRITTEN},
            ),
            merged,
        )
        return
    columns = ("job_id", "day", "tenant", *_ROLLUP_WRITTEN)
    conn.exec_driver_sql(_UPSERT_FROM_ARRAYS, {name: [row[name] for row in merged] for name in columns})


_READ_ROLLUPS = (
    "SELECT r.* FROM attempt_rollups AS r "
    "JOIN unnest(CAST(%(job_id)b AS TEXT[]), CAST(%(day)b AS BIGINT[])) AS k (job_id, day) "
    "ON r.job_id = k.job_id AND r.day = k.day"
)
_LOCK_ROLLUPS = _READ_ROLLUPS + " FOR UPDATE OF r"
_ROLLUP_WRITTEN = (
    "runs", "failures", "lateness_p50_us", "lateness_p90_us", "lateness_p99_us", "lateness_sketch", "updated_at",
)  # fmt: skip
# PostgreSQL and CockroachDB: one statement over arrays, one round trip and
# one parse for the whole batch (an executemany sends a statement per row).
_UPSERT_FROM_ARRAYS = (
    "INSERT INTO attempt_rollups (job_id, day, tenant, runs, failures, lateness_p50_us, lateness_p90_us, "
    "lateness_p99_us, lateness_sketch, updated_at) "
    "SELECT * FROM unnest(CAST(%(job_id)b AS TEXT[]), CAST(%(day)b AS BIGINT[]), CAST(%(tenant)b AS TEXT[]), "
    "CAST(%(runs)b AS BIGINT[]), CAST(%(failures)b AS BIGINT[]), CAST(%(lateness_p50_us)b AS BIGINT[]), "
    "CAST(%(lateness_p90_us)b AS BIGINT[]), CAST(%(lateness_p99_us)b AS BIGINT[]), "
    "CAST(%(lateness_sketch)b AS TEXT[]), CAST(%(updated_at)b AS BIGINT[])) "
    "ON CONFLICT (job_id, day) DO UPDATE SET runs = excluded.runs, failures = excluded.failures, "
    "lateness_p50_us = excluded.lateness_p50_us, lateness_p90_us = excluded.lateness_p90_us, "
    "lateness_p99_us = excluded.lateness_p99_us, lateness_sketch = excluded.lateness_sketch, "
    "updated_at = excluded.updated_at"
)
