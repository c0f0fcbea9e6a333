"""``loadtest/message_sizes.py`` still builds the Pull stream's messages the
way the gateway and the worker do, and prints their sizes (JSON shape and
what the sizes must contain; no figure asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_message_sizes_prints_each_message_of_an_execution() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "loadtest" / "message_sizes.py"), "--payloads", "2,1024", "--batch", "10"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    small, large = json.loads(done.stdout)["sizes"]
    for sizes in (small, large):
        # Every message carries the execution id; the assignment and the echo's result the payload too.
        for message in ("assignment", "result", "ack"):
            assert sizes[message]["per_execution_in_batch"] > sizes["execution_id_bytes"]
        assert sizes["heartbeat"]["per_running_execution"] > sizes["execution_id_bytes"]
    assert large["assignment"]["alone"] - small["assignment"]["alone"] >= 1024 - 2
    assert large["result"]["alone"] - small["result"]["alone"] >= 1024 - 2
