"""The per-row Python benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_row_python_smoke():
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_row_python.py"), "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "row_python" and report["smoke"] is True
    assert set(report["us_per_row"]) == {
        "definition_parse", "claim_definition", "claim_definition_own_payloads", "definition_to_assignment", "one_off_following", "assignment",
        "plain_success", "result_ack", "direct_handout", "claim_parameters",
    }
    assert all(value >= 0 for value in report["us_per_row"].values())
    assert report["tree"]["shares_stamps"] and report["tree"]["plain_successes_by_column"]
    tree = report["tree"]
    assert tree["assignments_as_bytes"] and tree["acks_as_bytes"] and tree["definition_shapes"]
    assert tree["claim_columns_packed"]
