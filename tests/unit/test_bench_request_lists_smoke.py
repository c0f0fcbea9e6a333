"""The request-lists benchmark still runs: smoke mode, JSON shape only (no timing assertions)."""

from __future__ import annotations

from tests.unit.test_bench_result_text_smoke import smoke


def test_bench_request_lists_smoke():
    report = smoke("bench_request_lists.py")
    assert report["benchmark"] == "request_lists" and report["smoke"] is True
    assert set(report["shapes"]) == {
        "statuses_honest", "statuses_flood", "kinds_flood", "mask_honest", "mask_flood", "calendar_mask_flood",
        "weekdays_flood", "labels_flood", "keys_flood", "nul_labels_flood", "nul_keys_flood",
    }
    assert all(shape["cpu_ms"] >= 0 for shape in report["shapes"].values())
