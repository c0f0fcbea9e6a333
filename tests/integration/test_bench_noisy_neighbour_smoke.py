"""The noisy-neighbour benchmark still runs against PostgreSQL, etcd and real
server and worker processes: smoke mode, JSON shape, every execution of both
tenants ended once (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LATENESS = {"min", "p50", "p90", "p99", "max"}

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]


@pytest.mark.parametrize("mode", [[], ["--instant"]], ids=["spread", "instant"])
def test_bench_noisy_neighbour_smoke(postgres_url, etcd_endpoint, mode):
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "bench_noisy_neighbour.py"), "--pg", postgres_url, "--etcd",
         etcd_endpoint, "--smoke", *mode],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "noisy_neighbour" and report["smoke"] is True
    assert report["instant"] is bool(mode)
    assert {"runs", "goal", "baseline", "postgres", "machine"} <= set(report)
    counts = {"alone": {"quiet": report["quiet"]}, "with_flood": {"quiet": report["quiet"], "flood": report["flood"]}}
    for name, expected in counts.items():
        run = report["runs"][name]
        assert set(run["tenants"]) == set(expected)
        for tenant, size in expected.items():
            figures = run["tenants"][tenant]
            assert figures["jobs"] == figures["executions"] == figures["started"] == size
            assert figures["statuses"] == {"succeeded": size}, "every execution ended, once"
            assert figures["early"] == 0 and figures["dropped"] == 0
            assert 0 <= figures["at_instant"] <= figures["within_1ms"] <= size
            assert set(figures["lateness_s"]) == LATENESS and figures["lateness_s"]["min"] >= 0
        assert run["ended_within_timeout"] is True and isinstance(run["all_claimed_ahead"], bool)
        assert run["exit_codes"]["server"] == 0 and set(run["exit_codes"]["workers"]) == {0}
    assert report["runs"]["alone"]["while_quiet_had_work"] is None
    # The window's figures agree with each other (its length is timing's: an
    # armed batch's starts are microseconds apart, a late round's seconds).
    window = report["runs"]["with_flood"]["while_quiet_had_work"]
    assert set(window) == {"window_s", "hand_outs", "hand_outs_per_s", "quiet_part"}
    total = report["quiet"] + report["flood"]
    assert window["window_s"] >= 0 and report["quiet"] <= window["hand_outs"] <= total, "every quiet start is in it"
    assert window["quiet_part"] == round(report["quiet"] / window["hand_outs"], 3)
    if window["window_s"] == 0:
        assert window["hand_outs_per_s"] is None
    else:
        assert window["hand_outs_per_s"] == pytest.approx(window["hand_outs"] / window["window_s"], abs=0.1)
    goal = report["goal"]
    assert goal["quiet_p99_within_s_of_alone"] == 1.0 and isinstance(goal["met"], bool)
    assert goal["difference_s"] == round(goal["quiet_p99_with_flood_s"] - goal["quiet_p99_alone_s"], 4)
