"""The peer-text benchmark still runs on PostgreSQL: JSON shape, the
migration rewrites exactly the raw rows' columns in bounded batches, and
walked again it rewrites nothing (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres]


def test_bench_peer_text_smoke(postgres_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_peer_text.py"), "--postgres", postgres_url,
         "--rows", "1200", "--raw-every", "100", "--reads", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    migration = report["migration"]
    # 12 raw runs: each its error, its dead reason and its attempt's error.
    assert migration["first"]["rows_rewritten"] == 36 and migration["again"]["rows_rewritten"] == 0
    assert "UPDATE" not in migration["again"]["statements"] and migration["batches"] >= 7  # one table a batch, at least
    assert set(report["reads_per_page_of_100"]["after"]) == {"raw_job", "printable_job"}
