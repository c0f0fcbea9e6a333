"""loadtest/bench_etcd_history.py and bench_etcd_keepalive.py still run and
print their JSON (no timing assertions): the first on an etcd of its own,
the second on the tests' etcd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    str(ROOT / part) for part in (".", "server", "workers", "sdk/python")
))  # fmt: skip


def run(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=ENV
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bench_etcd_history_smoke() -> None:
    report = run("loadtest/bench_etcd_history.py", "--puts", "200", "--servers", "2", "--concurrency", "20")
    assert report["puts"] == 200
    grown, compacted = report["after_puts_defragmented"], report["after_compaction_defragmented"]
    assert grown["revision"] >= 200 and compacted["revision"] == grown["revision"]
    assert compacted["db_size"] <= grown["db_size"], "compaction kept more than the whole history"


@pytest.mark.etcd
def test_bench_etcd_keepalive_smoke(etcd_endpoint: str) -> None:
    report = run("loadtest/bench_etcd_keepalive.py", "--sessions", "2", "--ttl", "2", "--seconds", "1",
                 "--etcd", etcd_endpoint)  # fmt: skip
    assert report["sessions"] == 2 and report["renewals_per_s"] > 0
