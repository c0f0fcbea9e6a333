"""The collector settings Tickwheel's own processes run with."""

import subprocess
import sys

from tickwheel.shared import heap


def test_tune_collector_freezes_what_is_alive_and_widens_the_young_generation() -> None:
    # In a child process: freezing and thresholds are process-wide, and the
    # test process's own collector must stay as pytest set it.
    code = (
        "import gc, tickwheel.shared.heap as h\n"
        "alive = [[] for _ in range(20_000)]\n"
        "before = gc.get_freeze_count()\n"
        "h.tune_collector()\n"
        "print(before, gc.get_freeze_count(), *gc.get_threshold())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before, frozen, *thresholds = map(int, out)
    assert before == 0 and frozen > 20_000  # what was alive, the lists included
    assert tuple(thresholds) == (heap.YOUNG_THRESHOLD, *heap.OLDER_THRESHOLDS)


def test_importing_tickwheel_leaves_the_collector_alone() -> None:
    # Only whole processes Tickwheel starts change the collector: importing
    # the worker runtime (the SDK inside someone's process) leaves it be.
    code = (
        "import gc\n"
        "import tickwheel_worker.runtime, tickwheel_server.app, tickwheel_server.dev, tickwheel_worker.cli\n"
        "print(gc.get_freeze_count(), gc.get_threshold()[0])\n"
    )
    frozen, young = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                             check=True).stdout.split())
    assert frozen == 0 and young != heap.YOUNG_THRESHOLD
