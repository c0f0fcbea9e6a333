"""``--loop uvloop`` of ``bench_create.py`` and ``bench_call_cost.py``
(``loadtest/_harness.server_loop``): the ``tickwheel server`` processes
started in the block run on uvloop, every other process on asyncio, and
the benchmark's own environment is left as it was."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

import _harness as h  # noqa: E402

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None
# A stand-in for the console script: the site's test is the script's name and first argument.
PROBE = "import asyncio\nprint(type(asyncio.get_event_loop_policy()).__module__)\n"


def _policy_module(folder: Path, script: str, *args: str) -> str:
    path = folder / script
    path.write_text(PROBE)
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop is no dependency of ours; not importable here")
def test_uvloop_runs_the_servers_only(tmp_path: Path) -> None:
    kept = os.environ.get("PYTHONPATH")
    with h.server_loop("uvloop"):
        assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(h.UVLOOP_SITE)
        assert _policy_module(tmp_path, "tickwheel", "server").startswith("uvloop")
        assert _policy_module(tmp_path, "tickwheel", "worker") == "asyncio.unix_events"
        assert _policy_module(tmp_path, "peers.py", "server") == "asyncio.unix_events"
    assert os.environ.get("PYTHONPATH") == kept
    assert _policy_module(tmp_path, "tickwheel", "server") == "asyncio.unix_events"


def test_asyncio_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    with h.server_loop("asyncio"):
        assert os.environ["PYTHONPATH"] == "/somewhere"
    assert os.environ["PYTHONPATH"] == "/somewhere"


def test_uvloop_missing_says_so_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import raises ImportError
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with pytest.raises(SystemExit, match="uvloop is not importable"):
        with h.server_loop("uvloop"):
            pass
    assert "PYTHONPATH" not in os.environ


def test_an_unknown_loop_is_refused() -> None:
    with pytest.raises(ValueError, match="trio"):
        with h.server_loop("trio"):
            pass
