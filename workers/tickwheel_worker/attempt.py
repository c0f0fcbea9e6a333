"""One assignment, from receipt until its handler has really stopped.

:meth:`Attempt.start` runs it in a task of its own, which waits for a slot,
starts the target (a named handler or an HTTP call), and decides the outcome
exactly once, reporting it through a callback the moment it is known:

* the target finishes -> its outcome (see ``handlers`` and ``http_target``);
* the server cancels -> ``ctx.canceled`` is set, the handler gets
  ``cancel_grace`` to return on its own, then CANCELED;
* ``deadline_at`` passes -> ``ctx.canceled`` is set, TIMED_OUT at once.

With a tracer (``WorkerConfig.tracer``), the target call is a client span,
child of the assignment's ``traceparent`` (the server's hand-out span); the
target receives that span's traceparent instead (the HTTP ``traceparent``
header, ``ctx.traceparent``). Without one, the assignment's is passed on.

A target still running after the outcome is decided is aborted (an async
handler is cancelled, an HTTP call has its socket shut) and the task ends
only when it has actually stopped: the slot stays taken until then, so the
worker never runs more than ``slots`` targets at once, even when a sync
handler ignores its cancellation. A rejected attempt (the server gave the
execution to someone else) stops the same way but reports nothing.

Everything an attempt needs from its worker is one :class:`AttemptSettings`,
built once per worker, so that an assignment costs one small object.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime, timedelta, timezone
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from tickwheel.v1 import worker_pb2
from tickwheel_worker.handlers import HandlerRegistry, JobContext, PermanentError, encode_output
from tickwheel_worker.http_target import (
    OUTPUT_MAX_BYTES,
    AddressPolicy,
    HttpCall,
    HttpOutcome,
    build_request,
)
from tickwheel_worker.resolver import DEFAULT_RESOLVER, Resolver
from tickwheel_worker.slots import Slots
from tickwheel_worker.threads import DaemonThreads
from tickwheel_worker.timers import Timer, Timers

from tickwheel.shared.clock import Clock, SystemClock
from tickwheel.shared.ids import set_timestamp_us, timestamp_us, to_us
from tickwheel.shared.logs import log_execution

log = logging.getLogger(__name__)

Key = tuple[str, int]
"""``(execution_id, delivery)``: one hand-out of one execution."""
ReportResult = Callable[[Key, worker_pb2.ExecutionResult], None]

ERROR_MAX_BYTES = 4096
HTTP_TIMEOUT_WITHOUT_DEADLINE = 300.0
THREADS = DaemonThreads()
"""Where sync handlers and HTTP calls run: one pool per process, whatever the number of workers."""

SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED
FAILED_RETRYABLE = worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE
FAILED_PERMANENT = worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT
TIMED_OUT = worker_pb2.RESULT_OUTCOME_TIMED_OUT
CANCELED = worker_pb2.RESULT_OUTCOME_CANCELED


def truncate_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SECONDS = (-62_135_596_800, 253_402_300_799)
"""protobuf's Timestamp range (0001-01-01 to 9999-12-31), which is datetime's."""


def _utc(ts: Any) -> datetime:
    """A Timestamp as a datetime; one out of protobuf's range (a broken server's) as the nearest
    instant in it, so that no conversion fails inside the attempt."""
    try:
        return ts.ToDatetime(tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        seconds = min(max(ts.seconds, _SECONDS[0]), _SECONDS[1])
        return _EPOCH + timedelta(seconds=seconds, microseconds=min(max(ts.nanos, 0), 999_999_999) // 1000)


def _rfc3339(ts: Any) -> str:
    """A Timestamp in RFC 3339 UTC with ``Z``; clamped into range as :func:`_utc` does."""
    try:
        return ts.ToJsonString()
    except (ValueError, OverflowError):
        return _utc(ts).isoformat().replace("+00:00", "Z")


def now_micros(clock: Clock) -> int:
    """``clock.now()`` as integer microseconds since the epoch.

    The system clock is read with ``time.time_ns()``, the reading its
    ``now()`` makes, without the datetime and the timedelta arithmetic (an
    attempt reads the time three times).
    """
    if type(clock) is SystemClock:
        return time.time_ns() // 1000
    return to_us(clock.now())


class AssignedContext(JobContext):
    """The :class:`JobContext` of a received assignment.

    Its instants (``nominal_at``, ``due_at``, ``deadline_at``) are converted
    from the assignment's timestamps when first read, not when the assignment
    arrives: most handlers never read them, and the three conversions cost
    more than the rest of the context together.
    """

    def __init__(self, assignment: worker_pb2.Assignment, handler: str) -> None:  # noqa: D107 - not the dataclass's
        self._assignment = assignment
        self.execution_id = assignment.execution_id
        self.job_id = assignment.job_id
        self.tenant = assignment.tenant
        self.attempt = assignment.attempt
        self.delivery = assignment.delivery
        self.payload = assignment.payload
        self.handler = handler  # read with the target's kind by the attempt; empty for an HTTP target
        self.traceparent = assignment.traceparent
        self.missed_count = assignment.missed_count

    @cached_property
    def nominal_at(self) -> datetime:  # type: ignore[override]
        return _utc(self._assignment.nominal_at)

    @cached_property
    def due_at(self) -> datetime:  # type: ignore[override]
        return _utc(self._assignment.due_at)

    @cached_property
    def deadline_at(self) -> datetime | None:  # type: ignore[override]
        a = self._assignment
        return _utc(a.deadline_at) if a.HasField("deadline_at") else None


def context_from_assignment(assignment: worker_pb2.Assignment) -> JobContext:
    """The :class:`JobContext` a handler sees for ``assignment``."""
    return AssignedContext(assignment, assignment.target.handler.name)


@dataclass(frozen=True)
class AttemptSettings:
    """What every attempt of one worker shares."""

    registry: HandlerRegistry
    clock: Clock
    timers: Timers
    """Time the deadlines and cancel graces; its :meth:`Timers.run` must be running."""
    slots: Slots
    report: ReportResult
    """Called with an attempt's outcome the moment it is decided (never for a rejected attempt)."""
    finished: Callable[[Attempt], None]
    """Called when an attempt's task ends: its target has stopped and its slot is free."""
    http_enabled: bool
    address_policy: AddressPolicy
    cancel_grace: float
    user_agent: str
    tracer: Tracer | None = None
    resolver: Resolver = DEFAULT_RESOLVER
    """Name lookups of HTTP targets: bounded by each call's deadline, abandoned ones capped per tenant."""


class _Immediate(Exception):
    """The attempt fails before anything runs (unknown handler, bad target)."""

    def __init__(self, outcome: int, error: str) -> None:
        super().__init__(error)
        self.outcome = outcome
        self.error = error


def _nothing() -> None:
    """A sync handler's thread cannot be stopped: it is asked to (``ctx.cancel_requested``) and waited for."""


@dataclass
class _Work:
    kind: str
    """"handler" or "http": how the target's value becomes the outcome."""
    handler: Callable[[JobContext], Awaitable[Any]] | None = None
    """An async handler: called and awaited in the attempt's own task, stopped by cancelling that task."""
    thread: asyncio.Future[Any] | None = None
    """Otherwise the future of the thread that runs the target."""
    abort: Callable[[], None] = _nothing
    """Stops the thread's target (an HTTP call's socket is shut)."""


class Attempt:
    """One hand-out (``key``) held by the worker.

    :meth:`start` runs it in one task (:attr:`task`); an async handler's
    coroutine is awaited in that task, not in one of its own. Cancel, reject
    and the deadline are callbacks (the deadline and the cancel grace are
    :class:`Timers` entries), so an attempt that just runs costs one task and
    no timer task. Stopping an async handler cancels that task; the attempt
    tells its own cancels (``Task.uncancel``) from the worker stopping it.
    """

    def __init__(self, assignment: worker_pb2.Assignment, settings: AttemptSettings) -> None:
        self.assignment = assignment
        self.key: Key = (assignment.execution_id, assignment.delivery)
        target = assignment.target  # each read of a sub-message costs a wrapper: read once
        self._kind = target.WhichOneof("kind")
        """"handler", "http", or None (no target)."""
        self.context = AssignedContext(assignment, target.handler.name if self._kind == "handler" else "")
        self.decided = False
        """True once the outcome is known (reported, unless rejected)."""
        self.rejected = False
        self.task: asyncio.Task[None] | None = None
        """Set by :meth:`start`."""
        self._settings = settings
        self._cancel_grace = settings.cancel_grace
        self._span: Span | None = None
        self._stop_reason: str | None = None
        """Set by :meth:`cancel`: the outcome is CANCELED."""
        self._deadline_passed = False
        self._started_at: int | None = None
        """Microseconds since the epoch."""
        self._deadline: Timer | None = None
        self._grace: Timer | None = None
        self._slot_wait: asyncio.Future[None] | None = None
        """Set while waiting for a slot; cancelled to stop waiting."""
        self._work: _Work | None = None
        """Set while the target runs."""
        self._own_cancels = 0
        """Cancels of :attr:`task` made to stop an async handler, not yet taken back."""

    @property
    def kind(self) -> str | None:
        """The target's kind: "handler", "http", or None (no target)."""
        return self._kind

    @property
    def progress(self) -> str:
        return self.context.progress

    def cancel(self, reason: str) -> None:
        """Stop the attempt and report CANCELED. No effect once decided."""
        if self.decided or self._stop_reason is not None:
            return
        self._stop_reason = reason or "canceled by the server"
        if self._work is not None:
            self.context._signal_cancel(f"canceled: {self._stop_reason}")
            if self._cancel_grace > 0:
                self._grace = self._settings.timers.call_later(self._cancel_grace, self._grace_over)
            else:
                self._grace_over()
        elif self._slot_wait is not None:
            self._slot_wait.cancel()
        # Otherwise the task has not started: it sees the reason when it does.

    def reject(self, reason: str) -> None:
        """Stop the attempt without reporting: it is no longer this worker's."""
        if not self.decided:
            self.rejected = True
            self._cancel_grace = 0.0
            if self._stop_reason is None:
                self.cancel(reason)
            elif self._work is not None:  # a cancel's grace is running: end it now
                self._grace_over()

    def start(self) -> asyncio.Task[None]:
        """Run the attempt to its end in a task of its own: ``settings.report`` is called at most
        once, with the outcome, and ``settings.finished`` when the task ends."""
        self.task = asyncio.get_running_loop().create_task(self._run())
        return self.task

    async def _run(self) -> None:
        settings = self._settings
        slots = settings.slots
        try:
            if self._stop_reason is not None:
                self._decide(CANCELED, f"canceled before it started: {self._stop_reason}")
            elif slots.take() or await self._wait_for_slot(slots):
                try:
                    await self._run_with_slot()
                finally:
                    slots.release()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug of the worker's own must still end in a result
            self._failed_inside(exc)
        finally:
            if self._deadline is not None:
                self._deadline.cancel()
            if self._grace is not None:
                self._grace.cancel()
            settings.finished(self)

    def _arm_deadline(self) -> None:
        """Time ``deadline_at`` on the clock (in at least 1 ms), once; nothing without a deadline.

        Called just before the attempt first waits (for a slot, a thread, an
        async handler that suspends): until then the event loop runs nothing
        else, so no timer could fire earlier. A handler that returns without
        awaiting anything never has its deadline timed at all.
        """
        a = self.assignment
        if self._deadline is None and a.HasField("deadline_at"):
            left = (timestamp_us(a.deadline_at) - now_micros(self._settings.clock)) / 1e6
            self._deadline = self._settings.timers.call_later(max(0.001, left), self._on_deadline)

    def _failed_inside(self, exc: Exception) -> None:
        a = self.assignment
        log_execution(log, logging.ERROR, "attempt %d (delivery %d) failed inside the worker", a.attempt,
                      a.delivery, execution=a.execution_id, job=a.job_id, tenant=a.tenant, exc_info=True)
        if not self.decided and not self.rejected:
            self.decided = True
            self._settings.report(self.key, worker_pb2.ExecutionResult(
                execution_id=a.execution_id, delivery=a.delivery, attempt=a.attempt,
                outcome=FAILED_RETRYABLE, error=f"worker error: {type(exc).__name__}: {exc}",
            ))

    async def _wait_for_slot(self, slots: Slots) -> bool:
        """True with a slot taken; False (decided) when stopped or out of time first."""
        self._arm_deadline()
        handed = slots.wait()
        self._slot_wait = handed
        try:
            await asyncio.wait((handed,))
        except asyncio.CancelledError:  # the worker stops
            slots.abandon(handed)
            raise
        finally:
            self._slot_wait = None
        if self._stop_reason is None and not self._deadline_passed:
            return True
        slots.abandon(handed)  # it may have been handed a slot when the stop came
        if self._stop_reason is not None:
            self._decide(CANCELED, f"canceled before it started: {self._stop_reason}")
        else:
            self._decide(TIMED_OUT, "deadline passed before a slot was free")
        return False

    async def _run_with_slot(self) -> None:
        settings = self._settings
        self._started_at = now_micros(settings.clock)
        if settings.tracer is not None:
            self._start_span()
        try:
            work = self._start()
        except _Immediate as failure:
            self._decide(failure.outcome, failure.error)
            return
        task = self.task
        assert task is not None
        self._work = work
        try:
            if work.handler is not None:  # called here, so that one raising before its coroutine fails the same way
                awaitable = work.handler(self.context)
                if type(awaitable) is types.CoroutineType:
                    # Its first step runs now, in this task: one that returns there needs no deadline timed.
                    try:
                        waiting_on = awaitable.send(None)
                    except StopIteration as done:
                        value = done.value
                    else:
                        self._arm_deadline()
                        value = await _resume(awaitable, waiting_on)
                else:  # a compiled coroutine, say
                    self._arm_deadline()
                    value = await awaitable
            else:
                assert work.thread is not None
                self._arm_deadline()
                value = await work.thread
        except asyncio.CancelledError:
            if task.cancelling() > self._own_cancels:
                # The worker is shutting down: stop the target, do not wait for it.
                self.context._signal_cancel("worker stopped")
                if work.handler is None:  # an async handler has the CancelledError already
                    work.abort()
                raise
            outcome: tuple[int, str, bytes, timedelta | None] = (
                FAILED_RETRYABLE, "the handler was cancelled", b"", None,
            )
        except Exception as exc:  # noqa: BLE001 - the handler's failure is its outcome
            outcome = self._failure(exc)
        else:
            outcome = self._success(work, value)
        finally:
            self._work = None
            while self._own_cancels:  # the async handler has stopped: take back the cancels that stopped it
                task.uncancel()
                self._own_cancels -= 1
        if self._stop_reason is not None:
            self._decide(CANCELED, f"canceled: {self._stop_reason}")
        else:
            self._decide(*outcome)  # no effect when the deadline decided first

    def _start(self) -> _Work:
        kind = self._kind
        if kind == "handler":
            registry = self._settings.registry
            handler = registry.get(self.context.handler)
            if handler is None:
                served = ", ".join(registry.names()) or "none"
                raise _Immediate(
                    FAILED_PERMANENT,
                    f"no handler named {self.context.handler!r} in this worker (it serves: {served})",
                )
            if handler.is_async:
                return _Work("handler", handler=handler.func)
            thread = THREADS.submit(handler.func, self.context, name=self._thread_name())
            return _Work("handler", thread=asyncio.wrap_future(thread))
        if kind == "http":
            settings = self._settings
            if not settings.http_enabled:
                raise _Immediate(FAILED_PERMANENT, "this worker does not run HTTP targets (http disabled)")
            a = self.assignment
            try:
                request = build_request(
                    a.target.http,
                    execution_id=a.execution_id,
                    attempt=a.attempt,
                    delivery=a.delivery,
                    scheduled_at=_rfc3339(a.nominal_at) if a.HasField("nominal_at") else "",
                    traceparent=self.context.traceparent,
                    payload=a.payload,
                    user_agent=settings.user_agent,
                )
            except ValueError as exc:
                raise _Immediate(FAILED_PERMANENT, str(exc)) from None
            call = HttpCall(
                request,
                timeout=self._seconds_left() or HTTP_TIMEOUT_WITHOUT_DEADLINE,
                address_policy=settings.address_policy,
                now=settings.clock.now,
                resolver=settings.resolver,
                tenant=a.tenant,
            )
            thread = THREADS.submit(call.run, name=self._thread_name())
            return _Work("http", thread=asyncio.wrap_future(thread), abort=call.abort)
        raise _Immediate(FAILED_PERMANENT, "the assignment has no target")

    def _thread_name(self) -> str:
        return f"tickwheel-{self.key[0]}#{self.key[1]}"

    def _abort(self, work: _Work) -> None:
        """Stop the target; an async handler runs in this attempt's task, so that is cancelled."""
        if work.handler is None:
            work.abort()
            return
        assert self.task is not None
        self._own_cancels += 1
        self.task.cancel()

    def _on_deadline(self) -> None:
        if self.decided:
            return
        if self._work is not None:
            if self._stop_reason is not None:
                return  # canceled: its grace decides
            self.context._signal_cancel("deadline passed")
            deadline_at = self.context.deadline_at
            when = deadline_at.isoformat() if deadline_at else "?"
            self._decide(TIMED_OUT, f"attempt still running at its deadline {when}")
            work, self._work = self._work, None  # stopped once
            self._abort(work)
        elif self._slot_wait is not None:
            self._deadline_passed = True
            self._slot_wait.cancel()

    def _grace_over(self) -> None:
        """A canceled target had its grace: decide CANCELED and stop it."""
        self._decide(CANCELED, f"canceled: {self._stop_reason}")
        if self._work is not None:
            work, self._work = self._work, None  # stopped once
            self._abort(work)

    def _failure(self, exc: Exception) -> tuple[int, str, bytes, timedelta | None]:
        if isinstance(exc, PermanentError):
            return FAILED_PERMANENT, str(exc) or type(exc).__name__, b"", None
        a = self.assignment
        log_execution(log, logging.WARNING, "handler failed (attempt %d, delivery %d)", a.attempt, a.delivery,
                      execution=a.execution_id, job=a.job_id, tenant=a.tenant, exc_info=exc)
        return FAILED_RETRYABLE, f"{type(exc).__name__}: {exc}", b"", None

    def _success(self, work: _Work, value: Any) -> tuple[int, str, bytes, timedelta | None]:
        if work.kind == "http":
            assert isinstance(value, HttpOutcome)
            return value.outcome, value.error, value.output, value.retry_after
        return SUCCEEDED, "", encode_output(value), None

    def _decide(self, outcome: int, error: str = "", output: bytes = b"", retry_after: timedelta | None = None) -> None:
        if self.decided:
            return
        self.decided = True
        if self._span is not None:
            if outcome != SUCCEEDED:
                self._span.set_status(Status(StatusCode.ERROR, truncate_utf8(error, 256)))
            self._span.set_attribute("tickwheel.outcome", worker_pb2.ResultOutcome.Name(outcome))
            self._span.set_attribute("tickwheel.rejected", self.rejected)
            self._span.end()
        if self.rejected:
            return
        execution_id, delivery = self.key
        result = worker_pb2.ExecutionResult(
            execution_id=execution_id, delivery=delivery, attempt=self.context.attempt, outcome=outcome,
        )
        if error:  # a handler's exception text may hold NUL, which the server's store refuses
            result.error = truncate_utf8(error.replace("\x00", "\ufffd"), ERROR_MAX_BYTES)
        if output:
            result.output = output[:OUTPUT_MAX_BYTES]
        if retry_after is not None:
            result.retry_after.FromTimedelta(retry_after)
        if self._started_at is not None:
            set_timestamp_us(result.started_at, self._started_at)
        set_timestamp_us(result.finished_at, now_micros(self._settings.clock))
        self._settings.report(self.key, result)

    def _start_span(self) -> None:
        """The client span of the target call; the target sees its traceparent."""
        tracer = self._settings.tracer
        assert tracer is not None
        a = self.assignment
        kind = self._kind
        parent = TraceContextTextMapPropagator().extract({"traceparent": a.traceparent}) if a.traceparent else None
        attributes = {
            "tickwheel.execution_id": a.execution_id, "tickwheel.job_id": a.job_id, "tickwheel.tenant": a.tenant,
            "tickwheel.attempt": a.attempt, "tickwheel.delivery": a.delivery,
        }  # fmt: skip
        if kind == "http":
            attributes["http.request.method"] = a.target.http.method or "POST"
            attributes["url.full"] = a.target.http.url
            name = f"{attributes['http.request.method']} target"
        else:
            name = f"handler {self.context.handler}"
        self._span = tracer.start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attributes)
        context = self._span.get_span_context()
        self.context.traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"

    def _seconds_left(self) -> float | None:
        """Seconds until ``deadline_at`` on the clock (at least 1 ms), None without a deadline."""
        a = self.assignment
        if not a.HasField("deadline_at"):
            return None
        left = (timestamp_us(a.deadline_at) - now_micros(self._settings.clock)) / 1e6
        return max(0.001, left)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """The rest of ``await coro``, whose first step was run by hand and yielded ``waiting_on``.

    What the awaiting task would send into ``coro`` or throw into it (a
    cancel) is passed on; once it is resumed normally, the rest is a plain
    ``yield from``. An awaited future's result is read by the future itself,
    so the task resumes a coroutine with ``send(None)``, as ``yield from``
    starts.
    """
    while True:
        try:
            yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - a cancel, thrown into the coroutine where it waits
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            return (yield from coro)

