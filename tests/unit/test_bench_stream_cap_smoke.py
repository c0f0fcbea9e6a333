"""The stream-cap benchmark still runs: smoke mode, its counts (no timing assertions)."""

from __future__ import annotations

from tests.unit.test_bench_result_text_smoke import smoke
from tickwheel_server import transport


def test_bench_stream_cap_smoke():
    report = smoke("bench_stream_cap.py")
    assert report["benchmark"] == "stream_cap" and report["smoke"] is True
    cap = transport.MAX_STREAMS_PER_CONNECTION
    assert (report["served"], report["reset"]) == (cap, report["streams"] - cap)
    assert report["max_concurrent_streams"] == cap
