"""What the executions stores (hand-out, outcomes, requeue) and their callers
pass each other: the records of a hand-out, a result and a requeue, and the
attempt row that ends a delivery. No SQL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NamedTuple

from sqlalchemy.engine import Connection

from ..jobspec import JobDefinition

TERMINAL = ("succeeded", "dead", "canceled")
OUTPUT_KEPT_BYTES = 4096
"""How much of a result's output (the protocol allows 16 KiB) an attempt row
keeps: a bound on what every execution may add to the store
(docs/capacity.md)."""
NOT_HELD = "no such execution held by this worker"
"""The answer to a result for an execution that does not exist, is another
tenant's, or whose current delivery this worker does not hold: one text for
all three, so an answer never tells a worker whether another tenant's id exists."""
DeadLetterHook = Callable[[Connection, "DeadLetter"], None]
"""Called inside the transaction that dead-letters an execution (raises its alert)."""


@dataclass(frozen=True)
class Capability:
    """What a group of workers may receive."""

    tenants: tuple[str, ...]
    handlers: tuple[str, ...]
    """Handler names they run (already narrowed to what their credential allows)."""
    http: bool


class HandedOut(NamedTuple):
    """One execution a round handed out (a tuple: thousands are made per round)."""

    id: str
    job_id: str
    tenant: str
    partition: int
    origin: str
    nominal_at_us: int
    due_at_us: int
    ready_at_us: int
    attempt: int
    delivery: int
    payload: bytes
    missed_count: int
    definition: JobDefinition | None
    """The job's definition. Every hand-out has one: a round cancels a run
    whose job is gone instead of handing it out (:mod:`.handout`), an armed
    run and a claim's own are read with theirs. None only where one is built
    without (tests): its assignment then carries the defaults and no target."""
    handed_out_at_us: int
    trace_context: str
    """W3C traceparent of the span that created the execution; empty when it was created untraced."""


_PAYLOAD = HandedOut._fields.index("payload")
_HANDED_OUT_AT = HandedOut._fields.index("handed_out_at_us")
_make_handed = HandedOut._make


def without_payload(handed: HandedOut) -> HandedOut:
    """``handed`` with an empty payload (``handed._replace(payload=b"")``,
    a tuple built once: per row when thousands are armed)."""
    return _make_handed((*handed[:_PAYLOAD], b"", *handed[_PAYLOAD + 1:]))


def stamped(handed: HandedOut, at_us: int) -> HandedOut:
    """``handed`` handed out at ``at_us`` (``handed._replace(handed_out_at_us=at_us)``,
    a tuple built once: per row when thousands are started)."""
    return _make_handed((*handed[:_HANDED_OUT_AT], at_us, *handed[_HANDED_OUT_AT + 1:]))


class ResultIn(NamedTuple):
    """A worker's result (a tuple: a batch has thousands)."""

    execution_id: str
    delivery: int
    attempt: int
    outcome: int
    """A ``tickwheel.v1.ResultOutcome``."""
    error: str
    worker_id: str
    tenants: tuple[str, ...]
    """The tenants of the worker's credential: an execution of any other is answered as unknown."""
    retry_after: timedelta | None = None
    worker_started_at_us: int | None = None
    """When the worker says it started the attempt (its clock); None: not reported."""
    held: bool = True
    """The stream that sent it holds the delivery (the gateway checked); False:
    the result is classified (already recorded, stale) but never applied."""
    output: bytes = b""
    """What the worker reported as the attempt's output; its first
    :data:`OUTPUT_KEPT_BYTES` are kept on the attempt row."""
    may_serve: Callable[[str, str | None], bool] | None = None
    """The worker credential's rule (tenant, handler; None for an HTTP target):
    an execution it may not be handed is, to this result, no execution at
    all; None: ``tenants`` alone decides."""


class ResultAck(NamedTuple):
    execution_id: str
    delivery: int
    accepted: bool
    reason: str = ""
    retry: "Retry | None" = None
    """Set when the outcome scheduled another attempt: its ready instant, for the timer wheel."""
    watch_again: bool = False
    """Refused, but the delivery is still its stream's to end (a result whose
    ``attempt`` is not the delivery's): its holder watches it again, so it is
    requeued once its heartbeats stop, a requeue that counts towards the
    poison cap, instead of being forgotten while it stays ``running``."""


@dataclass(frozen=True)
class Retry:
    execution_id: str
    partition: int
    ready_at_us: int


@dataclass(frozen=True)
class DeadLetter:
    execution_id: str
    job_id: str
    tenant: str
    reason: str
    error: str
    poison: bool
    """Dead because it was requeued more than the poison cap allows (it kills its workers)."""


@dataclass(frozen=True)
class Lost:
    """A delivery to end: no worker will finish it."""

    execution_id: str
    delivery: int
    reason: str
    worker_id: str = ""


@dataclass
class RequeueResult:
    requeued: list[Retry] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    skipped: list[tuple[str, int]] = field(default_factory=list)
    """Deliveries no longer running under the expected owner (finished, re-attached, already requeued)."""
    canceled: list[str] = field(default_factory=list)
    """Executions ended as canceled instead: they had a cancel request."""


@dataclass(frozen=True)
class CancelRequest:
    """A running execution its owner must tell its worker to stop."""

    execution_id: str
    delivery: int
    reason: str


class Running(NamedTuple):
    """A running execution as :meth:`.requeue.RequeueStore.running_under` reads it."""

    execution_id: str
    delivery: int
    handed_out_at_us: int | None
    worker_id: str


@dataclass(frozen=True)
class Reattached:
    execution_id: str
    delivery: int
    partition: int


class HandOutRound(list):
    """The executions a hand-out round handed out (a list of :class:`HandedOut`),
    with what else it did."""

    def __init__(self, items: Iterable[HandedOut] = (), *, tenants: Sequence[str] = ()) -> None:
        super().__init__(items)
        self.tenants = list(tenants)
        """The tenants the round found with ready work."""
        self.diverted = 0
        """Candidates that waited, were skipped or canceled instead of starting."""
        self.stopped = 0
        """Running executions asked to stop (overlap ``replace``)."""
        self.fenced: str | None = None
        """Why the round's fence refused to commit it (nothing was handed out); None if it did not."""


def attempt_row(row, status: str, worker_id: str, error: str, now_us: int, worker_started_us: int | None = None,
                output: bytes = b"") -> dict:
    """The attempt row that ends ``row``'s current delivery (an outcome, or a requeue's ``lost``).

    It started when it was handed out; its lateness is measured from when it
    became ready: the due instant for a first attempt, the backoff's end for
    a retry, the replay instant for a replayed series (``ready_at`` is never
    before ``due_at``, so the later of the two is the right one)."""
    started_us = row.handed_out_at if row.handed_out_at is not None else now_us
    return dict(
        execution_id=row.id, attempt=row.attempt, delivery=row.delivery, status=status,
        started_at=started_us, finished_at=now_us, lateness_us=max(0, started_us - max(row.due_at, row.ready_at)),
        worker_id=worker_id, error=error[:4096], waited_us=waited(row.waiting_since, started_us),
        worker_started_at=worker_started_us, output=output[:OUTPUT_KEPT_BYTES] or None,
    )


def waited(waiting_since: int | None, started_us: int) -> int:
    """How long an attempt waited for its job or a key before it started."""
    return 0 if waiting_since is None else max(0, started_us - waiting_since)


def dead_lettered(conn: Connection, hook: DeadLetterHook | None, dead: Iterable[DeadLetter]) -> None:
    """Call ``hook`` for each dead letter, in the transaction that made them."""
    if hook is None:
        return
    for letter in dead:
        hook(conn, letter)
