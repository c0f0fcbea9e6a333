"""The benchmarks' comparison with their peers (``loadtest/peers.py``): the
ratios, the best setting, lateness against a due instant, CPU and rows
written per execution, and the names the peers' SQL is built from. Pure
helpers only: none needs the bench extra (pgqueuer, APScheduler, asyncpg)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

import peers  # noqa: E402
from _harness import writes_between  # noqa: E402


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [
        (3677, 8436, 0.436),
        (1.0, 4.0, 0.25),
        (2, 3, 0.667),
        (0, 5, 0.0),
        (None, 5, None),  # Tickwheel's side missing
        (5, None, None),  # the peer did not run (--no-peer)
        (5, 0, None),  # a peer with no throughput has no ratio, not a ZeroDivisionError
        (5, -1, None),
    ],
)
def test_ratio(numerator, denominator, expected) -> None:
    assert peers.ratio(numerator, denominator) == expected


def test_pgqueuer_settings_parse() -> None:
    assert peers.parse_pgqueuer_settings("5x10,10x50") == [(5, 10), (10, 50)]
    assert peers.parse_pgqueuer_settings(" 1X1 , 64x10000 ,") == [(1, 1), (64, 10_000)]
    assert peers.parse_pgqueuer_settings(peers.PGQUEUER_SETTINGS)


@pytest.mark.parametrize(
    "text",
    ["", ",", "5", "5x", "x10", "0x10", "5x0", "65x10", "5x10001", "-1x10", "5x10x2", "ax10", "5x1\x00",
     "5" * 1000 + "x10"],
)
def test_bad_pgqueuer_settings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        peers.parse_pgqueuer_settings(text)


def test_best_of_picks_highest_or_lowest_and_leaves_out_missing() -> None:
    runs = [{"name": "a", "x": 3}, {"name": "b", "x": None}, {"name": "c", "x": 7}, {"name": "d"}]
    assert peers.best_of(runs, "x")["name"] == "c"
    assert peers.best_of(runs, "x", lowest=True)["name"] == "a"
    assert peers.best_of([{"x": None}], "x") is None
    assert peers.best_of([], "x") is None


def test_lateness_is_signed_and_counts_early_starts() -> None:
    due = 1_000.0
    found = peers.lateness([999.5, 1_000.0, 1_000.25, 1_001.0], due)
    assert found["started"] == 4
    assert found["early"] == 1, "a start half a second before its due instant is early, not clamped to 0"
    assert found["lateness_s"] == {"min": -0.5, "p50": 0.0, "p90": 1.0, "p99": 1.0, "max": 1.0}
    assert peers.lateness([], due) == {"started": 0, "early": 0, "lateness_s": None}


def test_distribution_is_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]
    assert peers.distribution(values) == {"min": 1.0, "p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0}
    assert peers.distribution(list(reversed(values)))["p99"] == 99.0
    assert peers.distribution([]) is None


def test_cpu_per_execution_totals_every_process() -> None:
    cpu = {"server": {"cpu_s": 1.7, "cpu_ms_per_execution": 0.17},
           "postgres": {"cpu_s": 2.6, "cpu_ms_per_execution": 0.26},
           "workers": {"cpu_s": 0.3, "cpu_ms_per_execution": 0.03}}
    found = peers.cpu_ms_per_execution(cpu)
    assert found["server"] == 0.17 and found["postgres"] == 0.26
    assert math.isclose(found["total"], 0.46)
    assert peers.cpu_ms_per_execution(None) is None and peers.cpu_ms_per_execution({}) is None


def test_rows_written_between_two_readings() -> None:
    before = {"pgqueuer": 10, "pgqueuer_log": 0, "other": 5}
    after = {"pgqueuer": 2_010, "pgqueuer_log": 6_000, "other": 5, "new_table": 4}
    found = writes_between(before, after, 2_000)
    assert found["rows_written"] == 8_004
    assert found["rows_written_per_execution"] == 4.002
    assert list(found["rows_written_by_table"]) == ["pgqueuer_log", "pgqueuer", "new_table"], "unchanged tables left out"
    assert found["rows_written_by_table"]["pgqueuer_log"] == {"rows": 6_000, "per_execution": 3.0}
    assert writes_between(after, after, 0)["rows_written"] == 0


@pytest.mark.parametrize("schema", ["", "Peer", "peer raw", "peer;drop schema public", "peer\x00", "1peer", "p" * 64,
                                    "public.jobs"])
def test_raw_claim_refuses_a_schema_that_is_not_a_plain_name(schema: str) -> None:
    with pytest.raises(ValueError):
        peers.raw_claim_sql(schema)


def test_raw_claim_is_the_plain_skip_locked_claim() -> None:
    sql = peers.raw_claim_sql("peer_raw")
    assert sql.claim.endswith("ORDER BY next_run_at LIMIT $2 FOR UPDATE SKIP LOCKED")
    assert "FROM peer_raw.jobs" in sql.claim and "partition =" not in sql.claim
    assert sql.insert.startswith("INSERT INTO peer_raw.executions")
    assert sql.reschedule.startswith("UPDATE peer_raw.jobs SET next_run_at = next_run_at + $2")
    for statement in (sql.claim, sql.insert, sql.reschedule):
        assert "public." not in statement, "never Tickwheel's own tables"


def test_a_pgqueuer_worker_that_dies_before_ready_is_reported_with_its_log(tmp_path):
    """The error path names what the worker wrote to its stderr log (its
    ``Popen.stderr`` is None: stderr goes to a file)."""
    import subprocess

    log = tmp_path / "pgqueuer-0.log"
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stderr.write('no DSN given'); sys.exit(2)"],
        stdout=subprocess.PIPE, stderr=log.open("w"), stdin=subprocess.DEVNULL, text=True,
    )
    process.wait()
    pool = peers.PgqueuerWorkers([process], [tmp_path / "out.json"], [log])
    with pytest.raises(RuntimeError, match="not ready:\nno DSN given"):
        pool.wait_ready(timeout=5)
