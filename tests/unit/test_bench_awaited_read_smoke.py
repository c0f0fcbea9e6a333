"""The awaited-read benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

from tests.unit.test_bench_result_text_smoke import smoke


def test_bench_awaited_read_smoke():
    report = smoke("bench_awaited_read.py")
    assert report["benchmark"] == "awaited_read" and report["smoke"] is True
    assert report["cpu_us_a_read"] >= 0 and report["timers_a_read"] >= 0
