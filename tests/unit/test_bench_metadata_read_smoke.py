"""The metadata-read benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

from tests.unit.test_bench_result_text_smoke import smoke


def test_bench_metadata_read_smoke():
    report = smoke("bench_metadata_read.py")
    assert report["benchmark"] == "metadata_read" and report["smoke"] is True
    assert report["reads_a_call"] >= 1 and report["ns_a_read"] >= 0
