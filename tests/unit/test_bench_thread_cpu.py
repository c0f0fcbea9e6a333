"""``bench_create.py`` prints a server's CPU a call by kind of thread
(``loadtest/_harness.thread_cpu``): the main thread as the event loop,
threads named as it as Python's, the others by their own names."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from _harness import thread_cpu, thread_cpu_between  # noqa: E402


def test_this_process_threads_by_kind() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)  # a Python thread: it keeps the process's name
    worker.start()
    try:
        kinds = thread_cpu(os.getpid())
    finally:
        stop.set()
        worker.join()
    assert "event_loop" in kinds and "python_threads" in kinds, kinds
    assert all(user >= 0 and system >= 0 for user, system in kinds.values())


def test_a_gone_process_reads_as_nothing() -> None:
    assert thread_cpu(2**22 + 1) == {}  # above the kernel's largest pid


def test_the_differences_are_per_unit_of_work() -> None:
    before = {"event_loop": (1.0, 0.25), "python_threads": (0.5, 0.1)}
    after = {"event_loop": (2.0, 0.5), "python_threads": (0.9, 0.2), "event_engine": (0.04, 0.02)}
    assert thread_cpu_between(before, after, 1_000) == {
        "event_engine": {"cpu_ms": 0.06, "system_ms": 0.02},  # first seen after the start: counted from nothing
        "event_loop": {"cpu_ms": 1.25, "system_ms": 0.25},
        "python_threads": {"cpu_ms": 0.5, "system_ms": 0.1},
    }
