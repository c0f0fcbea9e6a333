"""The benchmarks count the rows each statement shape wrote, per table, from
``pg_stat_statements``: which table a statement writes is read off its text
(``loadtest/_harness.written_table``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from _harness import written_table  # noqa: E402

CASES = {
    "INSERT INTO executions (id, job_id) SELECT v.id, v.job_id FROM unnest($1) AS v (id, job_id)": "executions",
    "UPDATE executions SET status = v.status FROM unnest(CAST($1 AS TEXT[])) AS v (id, status)": "executions",
    "update jobs set next_run_at = $1 where id = $2": "jobs",
    "  DELETE FROM attempts WHERE finished_at < $1": "attempts",
    "INSERT INTO public.alerts (key) VALUES ($1)": "public.alerts",
    "SELECT e.id FROM executions AS e WHERE e.status = $1": None,
    "WITH moved AS (UPDATE executions SET owner = $1 RETURNING id) SELECT id FROM moved": None,
    "COMMIT": None,
    "": None,
}


@pytest.mark.parametrize("query", list(CASES))
def test_the_written_table_is_read_off_the_statement(query: str) -> None:
    assert written_table(query) == CASES[query]
