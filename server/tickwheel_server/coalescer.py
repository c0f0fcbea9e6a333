"""Group commit for CreateJob: concurrent creates of one tenant stored in one transaction.

A lone create pays a transaction's fixed cost (a pooled connection, its
round trips, the commit) for one job; a batch pays it once for up to
:data:`MAX_GROUP` (docs/architecture.md, "Job writes at scale"). The
:class:`CreateCoalescer` gives concurrent CreateJob calls the batch's cost
without changing what any of them answers:

- Per tenant, at most one store write is in flight. A call that finds none
  starts one at once (no timer: a lone call waits for nothing); calls that
  arrive while one is in flight queue, and when it finishes the queue's head
  goes in the next write, up to :data:`MAX_GROUP` calls and
  :data:`MAX_GROUP_BYTES` of definitions (:func:`plan_group`).
- The gather: when a write that carried several calls ends, the next one
  waits until as many more calls as it answered are queued (its callers
  back with their next calls), or at most as long as that write took or
  as its callers need to come back one after the other through the event
  loop (:data:`CALL_RETURN_S` each), whichever is longer, and never longer
  than :data:`GATHER_MAX_S`; with no call queued the writer
  waits so too, and ends when none came. Callers that each wait for their
  answer then share one write instead of splitting into two groups
  written in turn (with nothing queued, the first caller back would be
  written alone and the others queue behind it). Nothing waits after a
  write of one call: a lone call is written at once.
- Each call gets what it would have answered alone: its item's outcome
  from the write (CreateJob's: its answer, or its violations,
  QuotaExceeded, NotFound, …), counted against the quota in queue order.
  Two calls with the same request id never share a write: the later one
  waits for the next, so it answers as a sequential repeat does.
- A write that raises (the store unavailable: nothing written) raises the
  same error to every call of its group; each is safe to retry with its
  request id. Nothing is written for a call that is still queued when its
  caller goes away; one already in a write may be created (as after a
  cancel that comes once the commit is sent).
- The queue is bounded per tenant (:data:`MAX_QUEUED` calls,
  :data:`MAX_QUEUED_BYTES` of definitions): a call that finds it full is
  refused at once with :class:`~tickwheel_server.errors.RateLimited`
  (RESOURCE_EXHAUSTED with a retry delay), nothing written, rather than
  held: a held call would be memory the bound exists to cap.

Tenants do not share writes (the store's batch is one tenant's), so two
tenants' writes run side by side.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import RateLimited, Unavailable

MAX_GROUP = 1000
"""Calls one write may carry: a BatchCreateJobs call's item limit."""
MAX_GROUP_BYTES = 4 * 1024 * 1024
"""Definition bytes one write may carry: the server's message limit, what
one BatchCreateJobs call can hold (a larger lone call still goes alone)."""
MAX_QUEUED = 4 * MAX_GROUP
"""Calls of one tenant that may wait behind its write in flight."""
MAX_QUEUED_BYTES = 4 * MAX_GROUP_BYTES
"""Definition bytes of one tenant that may wait behind its write in flight."""
GATHER_MAX_S = 0.015
"""The longest a queued write waits for the callers of the write before it
(the gather, in the module's docstring); 0 turns the gather off."""
CALL_RETURN_S = 0.00075
"""How long the gather allows each caller of the write before it to come
back: its answer sent and its next call received and handled up to
:meth:`CreateCoalescer.create`, one caller after the other on the one
event loop, and the network between; 0 leaves the write's duration as
the only bound. Why it is there, and the figure it is set from:
loadtest/RESULTS.md, "The gather's bound"."""


class Queued(Protocol):
    """What the coalescer reads of a queued job: its tenant, and its
    definition's bytes (their length counts against the bounds)."""

    tenant: str
    spec: bytes


Write = Callable[[str, Sequence[tuple[Any, str]]], Awaitable[list]]
"""One tenant's (job, request id) items written together (CreateJob's:
``SchedulerServicer._write_group``), one outcome per item in order (the
call's answer, or the exception it raises); raises when nothing was written."""


def plan_group(queued: Sequence[tuple[str, int]], *, max_items: int, max_bytes: int) -> list[int]:
    """Which of ``queued`` (request id, definition bytes), oldest first, go in
    the next write: the indices taken, in order.

    From the oldest: a call whose request id is already taken waits for a
    later write (so a repeat answers as it would after the first); the rest
    are taken until ``max_items`` are, or until the next one would bring
    the bytes over ``max_bytes`` (the first is always taken, however large,
    so no call waits for ever)."""
    taken: list[int] = []
    ids: set[str] = set()
    size = 0
    for index, (request_id, nbytes) in enumerate(queued):
        if len(taken) == max_items:
            break
        if request_id in ids:
            continue
        if taken and size + nbytes > max_bytes:
            break
        taken.append(index)
        ids.add(request_id)
        size += nbytes
    return taken


@dataclass(eq=False)
class _Call:
    job: Queued
    request_id: str
    size: int
    answer: asyncio.Future


@dataclass(eq=False)
class _Queue:
    """One tenant's calls waiting behind its write in flight."""

    calls: deque[_Call] = field(default_factory=deque)
    size: int = 0
    writer: asyncio.Task | None = None
    gather: tuple[int, asyncio.Future] | None = None
    """While the writer gathers: the queued calls it waits for, and the
    future that wakes it."""


class CreateCoalescer:
    """CreateJob calls of each tenant stored together through ``write``
    (see the module's docstring). Lives on one event loop."""

    def __init__(
        self,
        write: Write,
        *,
        max_group: int = MAX_GROUP,
        max_group_bytes: int = MAX_GROUP_BYTES,
        max_queued: int = MAX_QUEUED,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        gather_max_s: float = GATHER_MAX_S,
        call_return_s: float = CALL_RETURN_S,
        now: Callable[[], float] | None = None,
    ) -> None:
        if min(max_group, max_group_bytes, max_queued, max_queued_bytes) < 1:
            raise ValueError("every bound must be >= 1")
        if not 0 <= gather_max_s <= 60:
            raise ValueError("gather_max_s must be within 0 to 60 seconds")
        if not 0 <= call_return_s <= 60:
            raise ValueError("call_return_s must be within 0 to 60 seconds")
        self._gather_max_s = gather_max_s
        self._call_return_s = call_return_s
        self._now = now
        """The monotonic clock a write's duration is read on (the loop's
        unless given: tests)."""
        self._write = write
        self._max_group, self._max_group_bytes = max_group, max_group_bytes
        self._max_queued, self._max_queued_bytes = max_queued, max_queued_bytes
        self._queues: dict[str, _Queue] = {}
        self.writes = 0
        """Writes started so far (tests read it)."""

    def queued(self, tenant: str) -> int:
        """Calls of ``tenant`` waiting behind its write in flight."""
        queue = self._queues.get(tenant)
        return len(queue.calls) if queue is not None else 0

    def writing(self, tenant: str) -> bool:
        """Whether a write of ``tenant`` is in flight or about to start (or
        its writer gathers the callers of a write of several)."""
        return tenant in self._queues

    async def create(self, job: Queued, request_id: str) -> Any:
        """The outcome the write gives ``job`` and ``request_id`` (raised
        when it is an exception), written with the tenant's concurrent
        calls. RateLimited, nothing written, when the tenant's
        queue is full."""
        tenant = job.tenant
        queue = self._queues.get(tenant)
        if queue is None:
            queue = self._queues[tenant] = _Queue()
        size = len(job.spec)
        if queue.calls and (len(queue.calls) >= self._max_queued or queue.size + size > self._max_queued_bytes):
            raise RateLimited(
                f"tenant:{tenant}", "too many CreateJob calls of this tenant are waiting to be stored; "
                "retry later or send them in BatchCreateJobs",
            )
        call = _Call(job, request_id, size, asyncio.get_running_loop().create_future())
        queue.calls.append(call)
        queue.size += size
        if queue.gather is not None and len(queue.calls) >= queue.gather[0]:
            _wake(queue.gather[1])
        if queue.writer is None:
            queue.writer = asyncio.create_task(self._drain(tenant, queue), name=f"create-writes:{tenant}")
        try:
            return await call.answer
        except asyncio.CancelledError:
            # Still queued: leave nothing behind (its job is not created).
            # Already in a write: the write goes on for the others.
            if call in queue.calls:
                queue.calls.remove(call)
                queue.size -= call.size
            raise

    def _next_group(self, queue: _Queue) -> list[_Call]:
        calls = [call for call in queue.calls if not call.answer.done()]
        taken = plan_group(
            [(call.request_id, call.size) for call in calls], max_items=self._max_group, max_bytes=self._max_group_bytes
        )
        chosen = set(taken)
        queue.calls = deque(call for index, call in enumerate(calls) if index not in chosen)
        queue.size = sum(call.size for call in queue.calls)
        return [calls[index] for index in taken]

    async def _drain(self, tenant: str, queue: _Queue) -> None:
        """Write the tenant's queue, one group at a time, until it is empty
        (after a write of several, once the gather found none back); then
        forget the tenant (a later call starts a new writer)."""
        group: list[_Call] = []
        loop = asyncio.get_running_loop()
        now = self._now or loop.time
        answered, took = 0, 0.0
        try:
            while queue.calls or answered > 1:
                if answered > 1:
                    await self._gather(loop, queue, answered, took)
                    answered = 0
                    if not queue.calls:  # none came back, or every one queued went away meanwhile
                        break
                group = self._next_group(queue)
                if not group:
                    continue
                self.writes += 1
                started = now()
                try:
                    outcomes = await self._write(tenant, [(call.job, call.request_id) for call in group])
                except Exception as error:  # noqa: BLE001 - every call of the group answers it
                    _answer(group, [error] * len(group))
                else:
                    if len(outcomes) != len(group):
                        _answer(group, [RuntimeError("the store answered a different number of outcomes")] * len(group))
                    else:
                        _answer(group, outcomes)
                answered, took = len(group), now() - started
                group = []
        finally:
            # Cancelled (the server is stopping): no call is left waiting.
            stopped = Unavailable("the server is stopping; retry with the same request id")
            _answer(group + list(queue.calls), [stopped] * (len(group) + len(queue.calls)))
            queue.calls.clear()
            queue.size = 0
            if self._queues.get(tenant) is queue:
                del self._queues[tenant]

    async def _gather(self, loop: asyncio.AbstractEventLoop, queue: _Queue, answered: int, took: float) -> None:
        """Wait until ``answered`` more calls are queued (the callers of the
        write that just ended, back), or ``took`` seconds (that write's
        duration) or ``answered`` times the time a caller takes to come back,
        whichever is longer, at most the gather's bound; at once when the
        next write would be full anyway."""
        want = min(len(queue.calls) + answered, self._max_group)
        bound = min(max(took, answered * self._call_return_s), self._gather_max_s)
        if len(queue.calls) >= want or bound <= 0:
            return
        woken = loop.create_future()
        queue.gather = (want, woken)
        timer = loop.call_later(bound, _wake, woken)
        try:
            await woken
        finally:
            timer.cancel()
            queue.gather = None


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def _answer(calls: Sequence[_Call], outcomes: Sequence[Any]) -> None:
    for call, outcome in zip(calls, outcomes):
        if call.answer.done():  # its caller went away
            continue
        if isinstance(outcome, BaseException):
            call.answer.set_exception(outcome)
        else:
            call.answer.set_result(outcome)
