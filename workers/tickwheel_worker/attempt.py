"""One assignment, from receipt until its handler has really stopped.

:meth:`Attempt.run` waits for a slot, starts the target (a named handler or
an HTTP call), and decides the outcome exactly once, reporting it through a
callback the moment it is known:

* the target finishes -> its outcome (see ``handlers`` and ``http_target``);
* the server cancels -> ``ctx.canceled`` is set, the handler gets
  ``cancel_grace`` to return on its own, then CANCELED;
* ``deadline_at`` passes -> ``ctx.canceled`` is set, TIMED_OUT at once.

With a tracer (``WorkerConfig.tracer``), the target call is a client span,
child of the assignment's ``traceparent`` (the server's hand-out span); the
target receives that span's traceparent instead (the HTTP ``traceparent``
header, ``ctx.traceparent``). Without one, the assignment's is passed on.

A target still running after the outcome is decided is aborted (an async
handler is cancelled, an HTTP call has its socket shut) and ``run`` returns
only when it has actually stopped: the slot stays taken until then, so the
worker never runs more than ``slots`` targets at once, even when a sync
handler ignores its cancellation. A rejected attempt (the server gave the
execution to someone else) stops the same way but reports nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime, timedelta, timezone
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from tickwheel.v1 import worker_pb2
from tickwheel_server.clock import Clock
from tickwheel_server.telemetry.logs import log_execution
from tickwheel_worker.handlers import HandlerRegistry, JobContext, PermanentError, encode_output
from tickwheel_worker.http_target import (
    OUTPUT_MAX_BYTES,
    AddressPolicy,
    HttpCall,
    HttpOutcome,
    build_request,
)
from tickwheel_worker.threads import DaemonThreads
from tickwheel_worker.timers import Timer, Timers

log = logging.getLogger(__name__)

Key = tuple[str, int]
"""``(execution_id, delivery)``: one hand-out of one execution."""
ReportResult = Callable[["Attempt", worker_pb2.ExecutionResult], None]

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


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MICROSECOND = timedelta(microseconds=1)


def _utc(ts: Any) -> datetime:
    return ts.ToDatetime(tzinfo=timezone.utc)


def _micros(ts: Any) -> int:
    """A protobuf Timestamp as integer microseconds since the epoch."""
    return ts.seconds * 1_000_000 + ts.nanos // 1000


def _set_timestamp(ts: Any, instant: datetime) -> None:
    """``ts.FromDatetime(instant)`` for an aware ``instant``, in a quarter of the time."""
    seconds, micros = divmod((instant - EPOCH) // MICROSECOND, 1_000_000)
    ts.seconds = seconds
    ts.nanos = micros * 1000


class AssignedContext(JobContext):
    """The :class:`JobContext` of a received assignment.

    Its instants (``nominal_at``, ``due_at``, ``deadline_at``) are converted
    from the assignment's timestamps when first read, not when the assignment
    arrives: most handlers never read them, and the three conversions cost
    more than the rest of the context together.
    """

    def __init__(self, assignment: worker_pb2.Assignment) -> None:  # noqa: D107 - not the dataclass's
        self._assignment = assignment
        self.execution_id = assignment.execution_id
        self.job_id = assignment.job_id
        self.tenant = assignment.tenant
        self.attempt = assignment.attempt
        self.delivery = assignment.delivery
        self.payload = assignment.payload
        self.handler = assignment.target.handler.name  # empty for an HTTP target
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
    return AssignedContext(assignment)


class _Immediate(Exception):
    """The attempt fails before anything runs (unknown handler, bad target)."""

    def __init__(self, outcome: int, error: str) -> None:
        super().__init__(error)
        self.outcome = outcome
        self.error = error


@dataclass
class _Work:
    awaitable: Awaitable[Any]
    """The handler's coroutine (awaited in the attempt's own task), or a thread's future."""
    abort: Callable[[], None] | None
    """Stops the target; None for an async handler, stopped by cancelling the attempt's task."""
    kind: str  # "handler" or "http"


class Attempt:
    """One hand-out (``key``) held by the worker.

    One task runs :meth:`run`; an async handler's coroutine is awaited in
    that task, not in one of its own. Cancel, reject and the deadline are
    callbacks (the deadline and the cancel grace are :class:`Timers` entries),
    so an attempt that just runs costs one task and no timer task. Stopping
    an async handler cancels that task; :meth:`run` tells its own cancels
    (``Task.uncancel``) from the worker stopping it.
    """

    def __init__(
        self,
        assignment: worker_pb2.Assignment,
        *,
        registry: HandlerRegistry,
        http_enabled: bool,
        address_policy: AddressPolicy,
        clock: Clock,
        cancel_grace: float,
        user_agent: str,
        tracer: Tracer | None = None,
    ) -> None:
        self.assignment = assignment
        self.key: Key = (assignment.execution_id, assignment.delivery)
        self.context = AssignedContext(assignment)
        self.decided = False
        """True once the outcome is known (reported, unless rejected)."""
        self.rejected = False
        self._registry = registry
        self._http_enabled = http_enabled
        self._address_policy = address_policy
        self._clock = clock
        self._cancel_grace = cancel_grace
        self._user_agent = user_agent
        self._tracer = tracer
        self._span: Span | None = None
        self._stop_reason: str | None = None
        """Set by :meth:`cancel`: the outcome is CANCELED."""
        self._deadline_passed = False
        self._started_at: datetime | None = None
        self._report: ReportResult | None = None
        self._timers: Timers | None = None
        self._grace: Timer | None = None
        self._task: asyncio.Task[Any] | None = None
        self._slot_wait: asyncio.Future[bool] | None = None
        """Set while waiting for a slot; cancelled to stop waiting."""
        self._work: _Work | None = None
        """Set while the target runs."""
        self._own_cancels = 0
        """Cancels of ``_task`` made to stop an async handler, not yet taken back."""

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
            if self._cancel_grace > 0 and self._timers is not None:
                self._grace = self._timers.call_later(self._cancel_grace, self._grace_over)
            else:
                self._grace_over()
        elif self._slot_wait is not None:
            self._slot_wait.cancel()
        # Otherwise run() has not started: it sees the reason when it does.

    def reject(self, reason: str) -> None:
        """Stop the attempt without reporting: it is no longer this worker's."""
        if not self.decided:
            self.rejected = True
            self._cancel_grace = 0.0
            if self._stop_reason is None:
                self.cancel(reason)
            elif self._work is not None:  # a cancel's grace is running: end it now
                self._grace_over()

    async def run(self, slots: asyncio.Semaphore, timers: Timers, report: ReportResult) -> None:
        """Run to the end; ``report`` is called at most once, with the outcome.

        The deadline and the cancel grace are timed by ``timers`` (whose
        :meth:`Timers.run` must be running).
        """
        self._report = report
        self._timers = timers
        self._task = asyncio.current_task()
        left = self._seconds_left()
        deadline = timers.call_later(left, self._on_deadline) if left is not None else None
        try:
            if self._stop_reason is not None:
                self._decide(CANCELED, f"canceled before it started: {self._stop_reason}")
                return
            if slots.locked():
                if not await self._wait_for_slot(slots):
                    return
            else:  # a slot is free: taken at once, nothing to race
                await slots.acquire()
            try:
                await self._run_with_slot()
            finally:
                slots.release()
        finally:
            if deadline is not None:
                deadline.cancel()
            if self._grace is not None:
                self._grace.cancel()

    async def _wait_for_slot(self, slots: asyncio.Semaphore) -> bool:
        """True with a slot taken; False (decided) when stopped or out of time first."""
        acquire = asyncio.ensure_future(slots.acquire())
        self._slot_wait = acquire
        try:
            await asyncio.wait((acquire,))
        except asyncio.CancelledError:  # the worker stops
            if await _cancel_acquire(acquire):
                slots.release()
            raise
        finally:
            self._slot_wait = None
        if self._stop_reason is None and not self._deadline_passed:
            return True
        if not acquire.cancelled():  # it had acquired when the stop came
            slots.release()
        if self._stop_reason is not None:
            self._decide(CANCELED, f"canceled before it started: {self._stop_reason}")
        else:
            self._decide(TIMED_OUT, "deadline passed before a slot was free")
        return False

    async def _run_with_slot(self) -> None:
        self._started_at = self._clock.now()
        if self._tracer is not None:
            self._start_span()
        try:
            work = self._start()
        except _Immediate as failure:
            self._decide(failure.outcome, failure.error)
            return
        task = self._task
        assert task is not None
        self._work = work
        try:
            value = await work.awaitable
        except asyncio.CancelledError:
            if task.cancelling() > self._own_cancels:
                # The worker is shutting down: stop the target, do not wait for it.
                self.context._signal_cancel("worker stopped")
                if work.abort is not None:  # an async handler has the CancelledError already
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
        target = self.assignment.target
        kind = target.WhichOneof("kind")
        if kind == "handler":
            handler = self._registry.get(target.handler.name)
            if handler is None:
                served = ", ".join(self._registry.names()) or "none"
                raise _Immediate(
                    FAILED_PERMANENT,
                    f"no handler named {target.handler.name!r} in this worker (it serves: {served})",
                )
            if handler.is_async:
                return _Work(_call_async(handler.func, self.context), None, "handler")
            thread = THREADS.submit(handler.func, self.context, name=self._thread_name())
            return _Work(asyncio.wrap_future(thread), _nothing, "handler")
        if kind == "http":
            if not self._http_enabled:
                raise _Immediate(FAILED_PERMANENT, "this worker does not run HTTP targets (http disabled)")
            a = self.assignment
            try:
                request = build_request(
                    target.http,
                    execution_id=a.execution_id,
                    attempt=a.attempt,
                    delivery=a.delivery,
                    scheduled_at=a.nominal_at.ToJsonString() if a.HasField("nominal_at") else "",
                    traceparent=self.context.traceparent,
                    payload=a.payload,
                    user_agent=self._user_agent,
                )
            except ValueError as exc:
                raise _Immediate(FAILED_PERMANENT, str(exc)) from None
            call = HttpCall(
                request,
                timeout=self._seconds_left() or HTTP_TIMEOUT_WITHOUT_DEADLINE,
                address_policy=self._address_policy,
                now=self._clock.now,
            )
            thread = THREADS.submit(call.run, name=self._thread_name())
            return _Work(asyncio.wrap_future(thread), call.abort, "http")
        raise _Immediate(FAILED_PERMANENT, "the assignment has no target")

    def _thread_name(self) -> str:
        return f"tickwheel-{self.key[0]}#{self.key[1]}"

    def _abort(self, work: _Work) -> None:
        """Stop the target; an async handler runs in this attempt's task, so that is cancelled."""
        if work.abort is not None:
            work.abort()
            return
        assert self._task is not None
        self._own_cancels += 1
        self._task.cancel()

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
        a = self.assignment
        result = worker_pb2.ExecutionResult(
            execution_id=a.execution_id, delivery=a.delivery, attempt=a.attempt, outcome=outcome,
        )
        if error:
            result.error = truncate_utf8(error, ERROR_MAX_BYTES)
        if output:
            result.output = output[:OUTPUT_MAX_BYTES]
        if retry_after is not None:
            result.retry_after.FromTimedelta(retry_after)
        if self._started_at is not None:
            _set_timestamp(result.started_at, self._started_at)
        _set_timestamp(result.finished_at, self._clock.now())
        assert self._report is not None
        self._report(self, result)

    def _start_span(self) -> None:
        """The client span of the target call; the target sees its traceparent."""
        assert self._tracer is not None
        a = self.assignment
        kind = a.target.WhichOneof("kind") or ""
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
            name = f"handler {a.target.handler.name}"
        self._span = self._tracer.start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attributes)
        context = self._span.get_span_context()
        self.context.traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"

    def _seconds_left(self) -> float | None:
        """Seconds until ``deadline_at`` on the clock (at least 1 ms), None without a deadline."""
        a = self.assignment
        if not a.HasField("deadline_at"):
            return None
        left = (_micros(a.deadline_at) - (self._clock.now() - EPOCH) // MICROSECOND) / 1e6
        return max(0.001, left)


async def _call_async(func: Callable[[JobContext], Any], ctx: JobContext) -> Any:
    """Call an async handler; one that raises before returning its coroutine fails the same way."""
    return await func(ctx)


def _nothing() -> None:
    """A sync handler's thread cannot be stopped: it is asked to (``ctx.cancel_requested``) and waited for."""


async def _cancel_acquire(acquire: asyncio.Future[bool]) -> bool:
    """Cancel a pending ``Semaphore.acquire``; True when it had acquired anyway."""
    acquire.cancel()
    try:
        await acquire
    except asyncio.CancelledError:
        return False
    return True
