"""Named handlers: the registry, the context a handler receives, and ``echo``.

A handler is a function registered under a name (``billing.charge``) that
takes one :class:`JobContext` and returns the attempt's output. It may be a
coroutine function (run on the worker's event loop) or a plain function (run
in its own thread, so it cannot block the stream). The outcome it produces:

* returns normally -> SUCCEEDED; the return value becomes the output (see
  :func:`encode_output`);
* raises :class:`PermanentError` -> FAILED_PERMANENT (no retry: dead letter);
* raises anything else -> FAILED_RETRYABLE with ``"<Type>: <text>"``.

Cancellation is cooperative: when the server cancels the execution or its
deadline passes, ``ctx.canceled`` is set (and ``ctx.cancel_requested`` turns
true for sync handlers that poll). An async handler that has not returned is
then cancelled with ``CancelledError``; a sync handler's thread cannot be
killed, so it keeps its slot until it returns.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, Union

HANDLER_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}\Z")
PROGRESS_MAX_CHARS = 256
ECHO_HANDLER_NAME = "echo"
_FLAG_LOCK = threading.Lock()


class PermanentError(Exception):
    """Raised by a handler for a failure that retrying cannot fix.

    The attempt is reported FAILED_PERMANENT and the execution is
    dead-lettered without further attempts (its payload is kept for replay).
    """


@dataclass(eq=False)
class JobContext:
    """What a handler knows about the attempt it runs.

    The fields are read-only by convention. ``execution_id`` is the
    idempotency key: retries (``attempt`` + 1) and re-deliveries after a worker
    or server died (``delivery`` + 1) keep it, so a handler whose effect must
    happen once records it under this key.
    """

    execution_id: str
    """The idempotency key, stable across attempts and deliveries."""
    job_id: str
    """The job this execution belongs to."""
    tenant: str
    """The job's tenant."""
    attempt: int
    """The attempt number, from 1; a retry after a failure increments it."""
    delivery: int
    """How many times this attempt has been handed out, from 1."""
    nominal_at: datetime
    """The occurrence's nominal instant (UTC); what the schedule names."""
    due_at: datetime
    """Nominal plus jitter (UTC): the earliest instant it could start."""
    deadline_at: datetime | None
    """When the attempt is abandoned and reported TIMED_OUT (UTC); None: no limit."""
    payload: bytes
    """The job's payload, as given at creation."""
    handler: str = ""
    """The handler name the job targets."""
    traceparent: str = ""
    """W3C trace context of the dispatch, empty when there is none."""
    missed_count: int = 0
    """How many missed occurrences this execution stands for (misfire run_once)."""
    cancel_reason: str = ""
    """Why ``canceled`` was set; empty until then."""
    _progress: str = field(default="", repr=False)
    _cancel_signalled: bool = field(default=False, init=False, repr=False)
    _canceled: asyncio.Event | None = field(default=None, init=False, repr=False)
    _cancel_flag: threading.Event | None = field(default=None, init=False, repr=False)

    @property
    def idempotency_key(self) -> str:
        """Same as ``execution_id``; the ``Idempotency-Key`` an HTTP target sees."""
        return self.execution_id

    @property
    def canceled(self) -> asyncio.Event:
        """Set when the attempt must stop (server cancel or deadline). Await it
        in async handlers; it is not thread-safe, so sync handlers poll
        :attr:`cancel_requested` or call :meth:`wait_canceled_sync` instead.

        Made on first use: most handlers never look, and an Event per
        execution is a cost every execution would pay.
        """
        if self._canceled is None:
            self._canceled = asyncio.Event()
            if self._cancel_signalled:
                self._canceled.set()
        return self._canceled

    @property
    def cancel_requested(self) -> bool:
        """True once the attempt must stop. Safe to read from any thread."""
        return self._cancel_signalled

    @property
    def progress(self) -> str:
        """The last progress reported through :meth:`heartbeat`."""
        return self._progress

    async def heartbeat(self, progress: str = "") -> None:
        """Record progress; the worker's next heartbeat carries it.

        Liveness does not depend on this call: the worker heartbeats every
        execution it runs at the server's interval. Progress is truncated to
        256 characters. An empty ``progress`` keeps the previous one.
        """
        self.heartbeat_sync(progress)

    def heartbeat_sync(self, progress: str = "") -> None:
        """:meth:`heartbeat` for sync handlers; safe to call from any thread."""
        if progress:
            # One attribute store: atomic under the GIL, read by the loop.
            self._progress = progress[:PROGRESS_MAX_CHARS]

    def wait_canceled_sync(self, timeout: float | None = None) -> bool:
        """Block a sync handler's thread until canceled or ``timeout``; True if canceled."""
        flag = self._cancel_flag
        if flag is None:
            with _FLAG_LOCK:  # two threads of one handler must not make two flags
                if self._cancel_flag is None:
                    self._cancel_flag = threading.Event()
                flag = self._cancel_flag
        # _signal_cancel sets the signal before it looks for the flag, and the
        # flag is stored before the signal is read here: one of the two sees the other.
        if self._cancel_signalled:
            return True
        return flag.wait(timeout)

    def _signal_cancel(self, reason: str) -> None:
        """Called on the event loop by the runtime; idempotent."""
        if not self._cancel_signalled:
            self.cancel_reason = reason
            self._cancel_signalled = True
            if self._cancel_flag is not None:
                self._cancel_flag.set()
            if self._canceled is not None:
                self._canceled.set()


HandlerResult = Union[bytes, bytearray, memoryview, str, None, Any]
HandlerFunc = Callable[[JobContext], Union[HandlerResult, Awaitable[HandlerResult]]]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Handler:
    """One registered handler."""

    name: str
    func: HandlerFunc
    is_async: bool
    """True: awaited on the event loop. False: run in its own thread."""


def _is_coroutine_function(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class HandlerRegistry:
    """Handler names to functions. A worker announces every name in its hello.

    Names are 1 to 200 characters of ``[A-Za-z0-9_.:-]`` (the proto's rule);
    registering a name twice is an error, so two modules cannot silently
    shadow each other.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def handler(self, name: str) -> Callable[[F], F]:
        """Decorator: ``@registry.handler("billing.charge")``. Returns the function unchanged."""

        def register(func: F) -> F:
            self.register(name, func)
            return func

        return register

    def register(self, name: str, func: HandlerFunc) -> None:
        """Register ``func`` under ``name``. ValueError on a bad or duplicate name."""
        if not isinstance(name, str) or not HANDLER_NAME_RE.match(name):
            raise ValueError(
                f"handler name {name!r} must be 1 to 200 characters of [A-Za-z0-9_.:-]"
            )
        if not callable(func):
            raise TypeError(f"handler {name!r} must be callable, got {type(func).__name__}")
        if name in self._handlers:
            raise ValueError(f"handler {name!r} is already registered")
        self._handlers[name] = Handler(name, func, _is_coroutine_function(func))

    def update(self, other: HandlerRegistry) -> None:
        """Register every handler of ``other`` here (ValueError on a clash)."""
        for handler in other:
            self.register(handler.name, handler.func)

    def get(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[Handler]:
        return iter(list(self._handlers.values()))

    def __len__(self) -> int:
        return len(self._handlers)


def encode_output(value: object) -> bytes:
    """A handler's return value as output bytes.

    bytes-like: as is; str: UTF-8; None: empty; anything else: JSON (falling
    back to ``str()`` when it is not JSON-serialisable).
    """
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        return json.dumps(value, separators=(",", ":"), default=str).encode("utf-8")
    except (TypeError, ValueError):
        return str(value).encode("utf-8")


async def echo(ctx: JobContext) -> bytes:
    """The built-in ``echo`` handler: the payload becomes the output."""
    return ctx.payload


def register_builtins(registry: HandlerRegistry) -> None:
    """Register the built-in handlers (``echo``), as ``tickwheel dev`` does."""
    registry.register(ECHO_HANDLER_NAME, echo)
