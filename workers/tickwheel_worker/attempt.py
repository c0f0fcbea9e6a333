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
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
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

log = logging.getLogger(__name__)

Key = tuple[str, int]
"""``(execution_id, delivery)``: one hand-out of one execution."""
ReportResult = Callable[["Attempt", worker_pb2.ExecutionResult], None]

ERROR_MAX_BYTES = 4096
HTTP_TIMEOUT_WITHOUT_DEADLINE = 300.0

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


def _utc(ts: Any) -> datetime:
    return ts.ToDatetime(tzinfo=timezone.utc)


def context_from_assignment(assignment: worker_pb2.Assignment) -> JobContext:
    """The :class:`JobContext` a handler sees for ``assignment``."""
    target = assignment.target
    return JobContext(
        execution_id=assignment.execution_id,
        job_id=assignment.job_id,
        tenant=assignment.tenant,
        attempt=assignment.attempt,
        delivery=assignment.delivery,
        nominal_at=_utc(assignment.nominal_at),
        due_at=_utc(assignment.due_at),
        deadline_at=_utc(assignment.deadline_at) if assignment.HasField("deadline_at") else None,
        payload=bytes(assignment.payload),
        handler=target.handler.name if target.WhichOneof("kind") == "handler" else "",
        traceparent=assignment.traceparent,
        missed_count=assignment.missed_count,
    )


def run_in_daemon_thread(func: Callable[..., Any], *args: Any, name: str) -> concurrent.futures.Future[Any]:
    """Run ``func(*args)`` in a new daemon thread, in a copy of the caller's contextvars.

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit,
    so one abandoned handler that never returns would hang the process on
    shutdown. The number of threads is bounded by the worker's slots (a slot
    is held until its thread returns).
    """
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(func, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


class _Immediate(Exception):
    """The attempt fails before anything runs (unknown handler, bad target)."""

    def __init__(self, outcome: int, error: str) -> None:
        super().__init__(error)
        self.outcome = outcome
        self.error = error


@dataclass
class _Work:
    future: asyncio.Future[Any]
    abort: Callable[[], None]
    kind: str  # "handler" or "http"


class Attempt:
    """One hand-out (``key``) held by the worker."""

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
        self.context = context_from_assignment(assignment)
        self.decided = False
        """True once the outcome is known (reported, unless rejected)."""
        self.rejected = False
        self._registry = registry
        self._http_enabled = http_enabled
        self._address_policy = address_policy
        self._clock = clock
        self._cancel_grace = cancel_grace
        self._user_agent = user_agent
        self._stop = asyncio.Event()
        self._stop_reason = ""
        self._started_at: datetime | None = None
        self._tracer = tracer
        self._span: Span | None = None

    @property
    def progress(self) -> str:
        return self.context.progress

    def cancel(self, reason: str) -> None:
        """Stop the attempt and report CANCELED. No effect once decided."""
        if not self.decided and not self._stop.is_set():
            self._stop_reason = reason or "canceled by the server"
            self._stop.set()

    def reject(self, reason: str) -> None:
        """Stop the attempt without reporting: it is no longer this worker's."""
        if not self.decided:
            self.rejected = True
            self._cancel_grace = 0.0
            self.cancel(reason)

    async def run(self, slots: asyncio.Semaphore, report: ReportResult) -> None:
        """Run to the end; ``report`` is called at most once, with the outcome."""
        deadline = asyncio.create_task(self._until_deadline())
        stop = asyncio.create_task(self._stop.wait())
        acquire: asyncio.Task[bool] | None = None
        try:
            if slots.locked():  # wait for a slot, unless stopped or out of time first
                acquire = asyncio.create_task(slots.acquire())
                await asyncio.wait({acquire, deadline, stop}, return_when=asyncio.FIRST_COMPLETED)
                if not acquire.done() or stop.done() or deadline.done():
                    if await _cancel_acquire(acquire):
                        slots.release()
                    if stop.done():
                        self._decide(report, CANCELED, f"canceled before it started: {self._stop_reason}")
                    else:
                        self._decide(report, TIMED_OUT, "deadline passed before a slot was free")
                    return
            elif self._stop.is_set():
                self._decide(report, CANCELED, f"canceled before it started: {self._stop_reason}")
                return
            else:  # a slot is free: taken at once, nothing to race
                await slots.acquire()
            try:
                await self._run_with_slot(deadline, stop, report)
            finally:
                slots.release()
        finally:
            if acquire is not None:
                acquire.cancel()  # no effect once done; a shutdown may interrupt the wait
            deadline.cancel()
            stop.cancel()

    async def _run_with_slot(self, deadline: asyncio.Task[None], stop: asyncio.Task[Any], report: ReportResult) -> None:
        self._started_at = self._clock.now()
        if self._tracer is not None:
            self._start_span()
        try:
            work = self._start()
        except _Immediate as failure:
            self._decide(report, failure.outcome, failure.error)
            return
        try:
            await asyncio.wait({work.future, deadline, stop}, return_when=asyncio.FIRST_COMPLETED)
            if work.future.done():
                self._decide(report, *self._outcome_of(work))
            elif stop.done():
                self.context._signal_cancel(f"canceled: {self._stop_reason}")
                if self._cancel_grace > 0:
                    grace = asyncio.create_task(self._clock.sleep(self._cancel_grace))
                    await asyncio.wait({work.future, grace}, return_when=asyncio.FIRST_COMPLETED)
                    grace.cancel()
                self._decide(report, CANCELED, f"canceled: {self._stop_reason}")
            else:
                self.context._signal_cancel("deadline passed")
                deadline_at = self.context.deadline_at
                when = deadline_at.isoformat() if deadline_at else "?"
                self._decide(report, TIMED_OUT, f"attempt still running at its deadline {when}")
            if not work.future.done():
                work.abort()
                await asyncio.wait({work.future})
        except asyncio.CancelledError:
            # The worker is shutting down: stop the target, do not wait for it.
            self.context._signal_cancel("worker stopped")
            work.abort()
            raise
        finally:
            if work.future.done() and not work.future.cancelled():
                work.future.exception()  # retrieved: no "never retrieved" noise

    def _start(self) -> _Work:
        target = self.assignment.target
        kind = target.WhichOneof("kind")
        thread_name = f"tickwheel-{self.key[0]}#{self.key[1]}"
        if kind == "handler":
            handler = self._registry.get(target.handler.name)
            if handler is None:
                served = ", ".join(self._registry.names()) or "none"
                raise _Immediate(
                    FAILED_PERMANENT,
                    f"no handler named {target.handler.name!r} in this worker (it serves: {served})",
                )
            if handler.is_async:
                task = asyncio.ensure_future(handler.func(self.context))  # type: ignore[arg-type]
                return _Work(task, task.cancel, "handler")
            thread = run_in_daemon_thread(handler.func, self.context, name=thread_name)
            return _Work(asyncio.wrap_future(thread), lambda: None, "handler")
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
            thread = run_in_daemon_thread(call.run, name=thread_name)
            return _Work(asyncio.wrap_future(thread), call.abort, "http")
        raise _Immediate(FAILED_PERMANENT, "the assignment has no target")

    def _outcome_of(self, work: _Work) -> tuple[int, str, bytes, timedelta | None]:
        future = work.future
        if future.cancelled():
            return FAILED_RETRYABLE, "the handler was cancelled", b"", None
        exc = future.exception()
        if isinstance(exc, PermanentError):
            return FAILED_PERMANENT, str(exc) or type(exc).__name__, b"", None
        if exc is not None:
            a = self.assignment
            log_execution(log, logging.WARNING, "handler failed (attempt %d, delivery %d)", a.attempt, a.delivery,
                          execution=a.execution_id, job=a.job_id, tenant=a.tenant, exc_info=exc)
            return FAILED_RETRYABLE, f"{type(exc).__name__}: {exc}", b"", None
        value = future.result()
        if work.kind == "http":
            assert isinstance(value, HttpOutcome)
            return value.outcome, value.error, value.output, value.retry_after
        return SUCCEEDED, "", encode_output(value), None

    def _decide(
        self,
        report: ReportResult,
        outcome: int,
        error: str = "",
        output: bytes = b"",
        retry_after: timedelta | None = None,
    ) -> None:
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
            execution_id=a.execution_id,
            delivery=a.delivery,
            attempt=a.attempt,
            outcome=outcome,
            error=truncate_utf8(error, ERROR_MAX_BYTES),
            output=output[:OUTPUT_MAX_BYTES],
        )
        if retry_after is not None:
            result.retry_after.FromTimedelta(retry_after)
        if self._started_at is not None:
            result.started_at.FromDatetime(self._started_at)
        result.finished_at.FromDatetime(self._clock.now())
        report(self, result)

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
        deadline_at = self.context.deadline_at
        if deadline_at is None:
            return None
        return max(0.001, (deadline_at - self._clock.now()).total_seconds())

    async def _until_deadline(self) -> None:
        left = self._seconds_left()
        if left is None:
            await asyncio.Event().wait()  # no deadline: never
        else:
            await self._clock.sleep(left)


async def _cancel_acquire(acquire: asyncio.Task[bool]) -> bool:
    """Cancel a pending ``Semaphore.acquire``; True when it had acquired anyway."""
    acquire.cancel()
    try:
        await acquire
    except asyncio.CancelledError:
        return False
    return True
