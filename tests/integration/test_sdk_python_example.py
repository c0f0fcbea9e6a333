"""The Python SDK's example program against a real `tickwheel dev`: it
creates a one-off job, the built-in worker runs it, and the history it
prints shows one succeeded execution with its attempt."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.integration.test_processes import start_dev

EXAMPLE = Path(__file__).resolve().parents[2] / "sdk" / "python" / "examples" / "create_and_history.py"


def test_the_example_creates_a_job_and_reads_its_history(tmp_path: Path) -> None:
    process = start_dev(tmp_path / "dev")
    try:
        credentials = json.loads((tmp_path / "dev" / "dev-credentials.json").read_text())
        run = subprocess.run([sys.executable, str(EXAMPLE), credentials["address"], credentials["api_key"]],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        printed = json.loads(run.stdout)
        [execution] = printed["executions"]
        assert execution["status"] == "EXECUTION_STATUS_SUCCEEDED"
        [attempt] = execution["attempts"]
        assert (attempt["attempt"], attempt["delivery"]) == (1, 1) and attempt["lateness_ms"] >= 0
        wrong = subprocess.run([sys.executable, str(EXAMPLE), credentials["address"], "twk_wrong"],
                               capture_output=True, text=True, timeout=60)
        assert wrong.returncode != 0 and "UNAUTHENTICATED" in wrong.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
