"""The dispatch benchmark still runs against PostgreSQL: smoke mode, JSON shape
only (no timing assertions). Without its peer, the raw claim over asyncpg
(``--no-peer``): the test suite does not need the bench extra;
tests/integration/test_bench_raw_claim.py covers the raw claim's SQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = {"occurrences", "batches", "seconds", "occurrences_per_s"}
PLAN = {"uses_jobs_due", "limit", "seq_scan_on_jobs", "sort", "plan"}

pytestmark = pytest.mark.postgres


def test_bench_dispatch_smoke(postgres_url):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_dispatch.py"), "--pg", postgres_url, "--smoke", "--no-peer"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "dispatch" and report["smoke"] is True
    assert {"throughput", "latency", "explain", "server", "partitions_owned", "lookahead_s"} <= set(report)

    throughput = report["throughput"]
    expected = {"jobs", "batch", "store", "store_cold_cache", "replay", "replay_executemany", "raw", "ratio",
                "ratio_cold_cache", "ratio_to_replay", "ratio_executemany_to_replay", "goal_ratio"}
    assert expected <= set(throughput)
    assert "jit" in throughput and "jit" in report["latency"]  # None: the suite's PostgreSQL has no pg_stat_statements
    for name in ("store", "store_cold_cache", "replay", "replay_executemany"):
        assert RUN <= set(throughput[name])
        assert throughput[name]["occurrences"] == throughput["jobs"], "every due job claimed exactly once"
        assert throughput[name]["occurrences_per_s"] > 0
    for name in ("store", "store_cold_cache"):
        assert {"sql_s", "python_s", "statements_per_batch", "definitions_parsed"} <= set(throughput[name])
    # Cold: every definition parsed once; warm: the cache from the cold run serves them all.
    assert throughput["store_cold_cache"]["definitions_parsed"] == throughput["jobs"]
    assert throughput["store"]["definitions_parsed"] == 0
    assert throughput["ratio_to_replay"] > 0 and throughput["ratio_executemany_to_replay"] > 0
    # No peer ran: no raw figure and no ratio to it.
    assert throughput["raw"] is None and throughput["raw_by_batch"] is None
    assert throughput["ratio"] is None and throughput["ratio_cold_cache"] is None
    assert throughput["occurrences_per_s"] == {"tickwheel": throughput["store"]["occurrences_per_s"], "raw_best": None}

    latency = report["latency"]
    assert {"due", "sizes", "ratio_largest_smallest"} <= set(latency)
    assert len(latency["sizes"]) == 2
    for figures in latency["sizes"].values():
        assert {"median_ms", "runs_ms", "first_ms", "sql_ms"} <= set(figures) and figures["median_ms"] > 0

    for case in ("few_due", "all_due"):
        assert PLAN <= set(report["explain"][case])
        assert report["explain"][case]["limit"] is True
