"""loadtest/http_limits.py still runs: smoke mode, JSON shape and the
console endpoint's own answers (the limits are the endpoint's settings, not
timings)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.server import REPO


def test_http_limits_smoke() -> None:
    done = subprocess.run([sys.executable, str(REPO / "loadtest" / "http_limits.py"), "--smoke"],
                          capture_output=True, text=True, timeout=180, cwd=REPO)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "http_limits" and report["smoke"] is True
    ours = report["tickwheel"]
    assert ours["head_800k_status"] == 431 and ours["get_with_body_status"] == 413
    assert ours["slow_reader"] == "dropped" and ours["slow_head_closed_after_s"] is not None
    assert "aiohttp" in report
