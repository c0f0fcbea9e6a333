"""Daemon threads for sync handlers and HTTP calls, kept a while for the next one.

Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit, so
one abandoned handler that never returns would hang the process on shutdown.
These threads are daemons, never joined. Starting a thread costs more than a
no-op handler's whole execution, so a thread that finishes its call waits up
to ``idle_timeout`` for the next one before it ends.

The pool has no bound of its own: the worker's slots bound it (a slot is held
until its call returns, so at most ``slots`` calls run at once), and a thread
stuck in a call that never returns is simply not reused.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

IDLE_TIMEOUT = 60.0
"""Seconds an idle thread waits for another call before it ends."""
IDLE_NAME = "tickwheel-idle"

_Call = tuple[concurrent.futures.Future[Any], contextvars.Context, Callable[..., Any], tuple[Any, ...], str]


class DaemonThreads:
    """Runs calls in daemon threads, reusing idle ones."""

    def __init__(self, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self._idle_timeout = idle_timeout
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Threads waiting for a call that no submitter has counted on yet."""
        self._threads = 0

    @property
    def threads(self) -> int:
        """Threads alive (running a call or idle)."""
        return self._threads

    def submit(self, func: Callable[..., Any], *args: Any, name: str) -> concurrent.futures.Future[Any]:
        """Run ``func(*args)`` in a daemon thread named ``name``, in a copy of the caller's contextvars."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        call: _Call = (future, contextvars.copy_context(), func, args, name)
        with self._lock:
            reuse = self._idle > 0
            if reuse:
                self._idle -= 1  # that thread is now spoken for: it will not end idle
            else:
                self._threads += 1
        if reuse:
            self._calls.put(call)
        else:
            threading.Thread(target=self._serve, args=(call,), name=name, daemon=True).start()
        return future

    def _serve(self, call: _Call | None) -> None:
        thread = threading.current_thread()
        while call is not None:
            _run(call)
            call = None  # nothing of the last call is kept while idle
            thread.name = IDLE_NAME
            with self._lock:
                self._idle += 1
            call = self._next()

    def _next(self) -> _Call | None:
        """The next call, or None when none came within the idle timeout (the thread ends)."""
        while True:
            try:
                return self._calls.get(timeout=self._idle_timeout)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody counts on an idle thread: this one may go
                        self._idle -= 1
                        self._threads -= 1
                        return None
                # Every idle thread is spoken for, this one included: its call is on the way.


def _run(call: _Call) -> None:
    future, context, func, args, name = call
    threading.current_thread().name = name
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = context.run(func, *args)
    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side
        future.set_exception(exc)
    else:
        future.set_result(result)
