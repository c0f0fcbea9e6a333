"""DaemonThreads: sync handlers and HTTP calls run in daemon threads that are reused while idle."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from tickwheel_worker.threads import IDLE_NAME, DaemonThreads

from tests.unit.worker.worker_fakes import WAIT

REQUEST = contextvars.ContextVar("request", default="none")


def _whoami() -> tuple[int, str, bool, str]:
    thread = threading.current_thread()
    return thread.ident or 0, thread.name, thread.daemon, REQUEST.get()


def test_a_call_runs_in_a_named_daemon_thread_with_the_callers_contextvars() -> None:
    threads = DaemonThreads()
    REQUEST.set("r-1")
    ident, name, daemon, request = threads.submit(_whoami, name="tickwheel-e:1#1").result(WAIT)
    assert ident != threading.get_ident() and name == "tickwheel-e:1#1" and daemon and request == "r-1"

    def fail() -> None:
        raise ValueError("card declined")

    with pytest.raises(ValueError, match="card declined"):
        threads.submit(fail, name="tickwheel-e:2#1").result(WAIT)


def test_a_finished_thread_serves_the_next_call() -> None:
    threads = DaemonThreads()
    first = threads.submit(_whoami, name="a").result(WAIT)
    _until(lambda: threads._idle == 1)
    second = threads.submit(_whoami, name="b").result(WAIT)
    assert second[0] == first[0] and second[1] == "b" and threads.threads == 1
    _until(lambda: _named(first[0]) == IDLE_NAME)  # an idle thread does not keep the last call's name


def test_calls_at_once_each_get_a_thread_and_a_stuck_one_blocks_nobody() -> None:
    threads = DaemonThreads()
    stuck = threading.Event()
    held = threads.submit(stuck.wait, name="stuck")
    done = []
    for i in range(3):
        done.append(threads.submit(_whoami, name=f"n{i}").result(WAIT))
        _until(lambda: threads._idle == 1)  # the stuck thread is never idle
    assert not held.done() and threads.threads == 2  # the stuck one, and one reused for the three others
    assert len({ident for ident, *_ in done}) == 1
    stuck.set()
    assert held.result(WAIT) is True


def test_an_idle_thread_ends_after_the_idle_timeout() -> None:
    threads = DaemonThreads(idle_timeout=0.05)
    ident = threads.submit(_whoami, name="a").result(WAIT)[0]
    _until(lambda: threads.threads == 0)
    _until(lambda: _named(ident) is None)  # the thread itself is gone
    assert threads.submit(_whoami, name="b").result(WAIT)[0] is not None and threads.threads == 1


def _named(ident: int) -> str | None:
    for thread in threading.enumerate():
        if thread.ident == ident:
            return thread.name
    return None


def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    """Poll state another thread changes; bounded by WAIT."""
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)
