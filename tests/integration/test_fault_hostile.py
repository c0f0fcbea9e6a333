"""Fault injection: a hostile worker and a hostile target (issue 15, items 1,
2, 3 and 5, "A fault-injection suite").

Real `tickwheel server` and `tickwheel worker` processes on one real
PostgreSQL and one real etcd. Tenant globex runs its jobs with its own
worker throughout; what acme's credential or acme's target does must leave
globex's executions exactly as they would have been: recorded by globex's
worker, once, on the first delivery (the audit's ``unaffected``).

- A worker holding acme's credential speaks the Pull protocol by hand: it
  lists globex's running executions in its hello (a re-attach), reports
  results for others of them (success, a forged permanent failure), and
  is answered for them exactly as for an id that does not exist.
- The same kind of worker answers its own acme assignments with every
  malformed result: instants near 2^62 s, an error with NUL bytes, an error
  of a megabyte, an unknown outcome, delivery 0 and -1. Each is refused or
  recorded alone; everyone else's results are recorded as usual.
- acme's HTTP target answers 500 with NUL bytes in the body, which the worker
  copies into the attempt's error.

After each, the audit (tests/support/audit.py) accounts for every
occurrence of both tenants.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import worker_pb2, worker_pb2_grpc

from tests.support import audit
from tests.support.attempts import ALL_ATTEMPTS
from tests.support.faults import (
    NUL_BODY, RecordingTarget, create_jobs, eventually, migrated_store, now, settle, spaced, start_server,
    start_worker, tenant, wait_connected,
)

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

WAIT = 10.0
FAR = 2**62  # seconds: far past protobuf's Timestamp and Duration ranges, well inside int64


class HandRolledWorker:
    """A Pull stream spoken by hand, as a hostile process would: sends what it
    is told, heartbeats what it was assigned, and keeps every message the
    server sent (``welcome``, ``assignments``, ``acks``)."""

    def __init__(self, address: str, credential: str, worker_id: str, *, slots: int,
                 in_flight: Sequence[tuple[str, int]] = ()) -> None:
        self._outbox: queue.Queue[worker_pb2.PullRequest | None] = queue.Queue()
        self._channel = grpc.insecure_channel(address)
        self.welcome: worker_pb2.ServerWelcome | None = None
        self.assignments: list[worker_pb2.Assignment] = []
        self.acks: list[worker_pb2.ResultAck] = []
        self.ended: grpc.RpcError | None = None
        self._done = threading.Event()
        self._outbox.put(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
            worker_id=worker_id, http=True, slots=slots,
            in_flight=[worker_pb2.InFlightExecution(execution_id=i, delivery=d) for i, d in in_flight],
        )))  # fmt: skip
        responses = worker_pb2_grpc.WorkerServiceStub(self._channel).Pull(
            iter(self._outbox.get, None), metadata=(("authorization", f"Bearer {credential}"),)
        )
        threading.Thread(target=self._read, args=(responses,), daemon=True).start()
        threading.Thread(target=self._beat, daemon=True).start()

    def _read(self, responses: Iterator[worker_pb2.PullResponse]) -> None:
        try:
            for response in responses:
                kind = response.WhichOneof("message")
                if kind == "welcome":
                    self.welcome = response.welcome
                elif kind == "assignment":
                    self.assignments.extend(response.assignment.assignments)
                elif kind == "ack":
                    self.acks.extend(response.ack.acks)
        except grpc.RpcError as error:
            self.ended = error
        finally:
            self._done.set()

    def _beat(self) -> None:
        while not self._done.wait(0.5):
            held = [worker_pb2.ExecutionProgress(execution_id=a.execution_id, delivery=a.delivery)
                    for a in self.assignments]  # fmt: skip
            self._outbox.put(worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat(executions=held)))

    def send(self, *results: worker_pb2.ExecutionResult) -> None:
        self._outbox.put(worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=results)))

    def wait(self, condition: Callable[[], object], timeout: float = WAIT) -> bool:
        """Until ``condition()`` holds (True) or the stream ends or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self._done.is_set() or time.monotonic() >= deadline:
                return bool(condition())
            time.sleep(0.02)  # the reader thread fills what ``condition`` reads
        return True

    def close(self) -> None:
        self._outbox.put(None)
        self._done.wait(5)
        self._channel.close()


def result(execution_id: str, delivery: int = 1, attempt: int = 1,
           outcome: int = worker_pb2.RESULT_OUTCOME_SUCCEEDED, **fields) -> worker_pb2.ExecutionResult:
    message = worker_pb2.ExecutionResult(execution_id=execution_id, delivery=delivery, attempt=attempt,
                                         outcome=outcome, **fields)  # fmt: skip
    message.finished_at.GetCurrentTime()
    return message


def running_of(engine: sa.Engine, tenant: str) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT id, delivery FROM executions WHERE tenant = :t AND status = 'running' ORDER BY id"),
            {"t": tenant},
        ).all()
    return [(row.id, row.delivery) for row in rows]


def ack_shape(ack: worker_pb2.ResultAck) -> tuple[bool, str]:
    """What an ack tells beyond the id and delivery it echoes (those replaced in the reason)."""
    return ack.accepted, ack.reason.replace(ack.execution_id, "<id>").replace(str(ack.delivery), "<d>")


# --------------------------------------------------------------------------- another tenant's ids


def test_a_worker_of_acme_cannot_finish_or_take_over_globexs_executions(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget(hold=4.0)
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"hostile-ids-{os.getpid()}")
        acme, globex = tenant(server, "acme"), tenant(server, "globex")
        start_worker(stack, tmp_path, server.address, globex.credential, "globex-w")
        wait_connected(server, "globex-w")
        first = now() + timedelta(seconds=1)
        create_jobs(server.address, globex, target.url("/hold"), spaced(first, 6, 0.05), "held")
        create_jobs(server.address, globex, target.url("/ok"), spaced(first + timedelta(seconds=1), 10, 0.3), "later")
        until = first + timedelta(seconds=4)
        def six_running() -> list[tuple[str, int]] | None:
            rows = running_of(engine, "globex")
            return rows if len(rows) == 6 else None

        held = eventually(six_running, 15, "globex's six long calls run")

        # Re-attach two of them, finish two, fail one for good, retry one; and an id that does not exist.
        unknown = held[0][0].split(":", 1)[0][:-4] + "ZZZZ:2030-01-01T00:00:00Z"
        hostile = HandRolledWorker(server.address, acme.credential, "hostile", slots=1, in_flight=held[:2])
        stack.callback(hostile.close)
        assert hostile.wait(lambda: hostile.welcome is not None), f"no welcome: {hostile.ended}"
        forged = [
            result(held[2][0]), result(held[3][0]),
            result(held[4][0], outcome=worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error="forged by acme"),
            result(held[5][0], outcome=worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="forged by acme"),
            result(unknown),
        ]  # fmt: skip
        for message in forged:
            hostile.send(message)
        answered = hostile.wait(lambda: len(hostile.acks) == len(forged))
        hostile.close()

        left = settle(engine, ["globex"], until, timeout=30)
        audit.assert_clean(engine, ["globex"], until, deliveries=target.deliveries, unaffected={"globex": ["globex-w"]})
        assert not left
        assert answered, f"answered {len(hostile.acks)} of {len(forged)} results; the stream ended: {hostile.ended}"
        # Nothing told acme that globex's ids exist: answered like the unknown id, re-attached nothing.
        assert hostile.welcome is not None
        assert list(hostile.welcome.reattached) == []
        assert sorted((e.execution_id, e.delivery) for e in hostile.welcome.rejected) == sorted(held[:2])
        shapes = {ack.execution_id: ack_shape(ack) for ack in hostile.acks}
        assert {shapes[m.execution_id] for m in forged} == {shapes[unknown]}, shapes
        assert shapes[unknown][0] is False


# --------------------------------------------------------------------------- malformed results


MALFORMED: dict[str, Callable[[worker_pb2.Assignment], worker_pb2.ExecutionResult]] = {
    "started_at near 2^62 s": lambda a: result(a.execution_id, a.delivery, a.attempt,
                                               started_at={"seconds": FAR}),
    "retry_after near 2^62 s": lambda a: result(a.execution_id, a.delivery, a.attempt,
                                                outcome=worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE,
                                                error="try later", retry_after={"seconds": FAR}),
    "error with NUL": lambda a: result(a.execution_id, a.delivery, a.attempt,
                                       outcome=worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="bad\x00error\x00"),
    "error of a megabyte": lambda a: result(a.execution_id, a.delivery, a.attempt,
                                            outcome=worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, error="x" * 1_000_000),
    "unknown outcome": lambda a: result(a.execution_id, a.delivery, a.attempt, outcome=99),
    "delivery 0": lambda a: result(a.execution_id, 0, a.attempt),
    "delivery -1": lambda a: result(a.execution_id, -1, a.attempt),
}  # fmt: skip


def test_malformed_results_are_refused_alone_and_everyone_elses_are_recorded(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget()
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"hostile-results-{os.getpid()}")
        acme, globex = tenant(server, "acme"), tenant(server, "globex")
        start_worker(stack, tmp_path, server.address, globex.credential, "globex-w")
        wait_connected(server, "globex-w")
        hostile = HandRolledWorker(server.address, acme.credential, "hostile", slots=len(MALFORMED))
        stack.callback(hostile.close)
        assert hostile.wait(lambda: hostile.welcome is not None), f"no welcome: {hostile.ended}"
        first = now() + timedelta(seconds=1)
        create_jobs(server.address, acme, target.url("/ok"), [first] * len(MALFORMED), "acme")
        create_jobs(server.address, globex, target.url("/ok"), spaced(first, 16, 0.25), "globex")
        until = first + timedelta(seconds=4)
        assert hostile.wait(lambda: len(hostile.assignments) == len(MALFORMED)), "acme's executions never reached it"

        for make, assignment in zip(MALFORMED.values(), hostile.assignments, strict=True):
            hostile.send(make(assignment))  # one message each: the stream may be cut at any of them
        # Refused with a reason, or the stream cut: either way, not a stalled server.
        answered = hostile.wait(lambda: len(hostile.acks) == len(MALFORMED))
        hostile.close()
        # acme's own worker takes over what the hostile one left.
        start_worker(stack, tmp_path, server.address, acme.credential, "acme-w")

        left = settle(engine, ["acme", "globex"], until, timeout=30)
        audit.assert_clean(engine, ["acme", "globex"], until, deliveries=target.deliveries,
                           unaffected={"globex": ["globex-w"]})  # fmt: skip
        assert not left
        assert answered or hostile.ended is not None, f"{len(hostile.acks)} of {len(MALFORMED)} results answered"
        assert server.process.poll() is None
        with engine.connect() as conn:
            errors = conn.execute(sa.text(f"SELECT error FROM {ALL_ATTEMPTS} AS a WHERE worker_id = 'hostile'")).scalars().all()
        assert all(len(text) <= 4096 and "\x00" not in text for text in errors), [text[:80] for text in errors]


# --------------------------------------------------------------------------- a target answering NUL bytes


def test_a_target_answering_500_with_nul_bytes_fails_only_its_own_executions(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget()
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"hostile-target-{os.getpid()}")
        acme, globex = tenant(server, "acme"), tenant(server, "globex")
        start_worker(stack, tmp_path, server.address, acme.credential, "acme-w")
        start_worker(stack, tmp_path, server.address, globex.credential, "globex-w")
        wait_connected(server, "acme-w")
        wait_connected(server, "globex-w")
        first = now() + timedelta(seconds=1)
        acme_jobs = create_jobs(server.address, acme, target.url("/nul"), spaced(first, 6, 0.1), "acme", retries=2)
        create_jobs(server.address, globex, target.url("/ok"), spaced(first, 16, 0.25), "globex")
        until = first + timedelta(seconds=4)

        left = settle(engine, ["acme", "globex"], until, timeout=30)
        snapshot = audit.assert_clean(engine, ["acme", "globex"], until, deliveries=target.deliveries,
                                      unaffected={"globex": ["globex-w"]})  # fmt: skip
        assert not left
        # Each of acme's executions failed twice at its target and was dead-lettered, the body in its error, minus NUL.
        theirs = [row for row in snapshot.executions if row.job_id in acme_jobs]
        assert [(row.status, row.attempt) for row in theirs] == [("dead", 2)] * len(acme_jobs)
        errors = [a.error for a in snapshot.attempts if a.execution_id in {row.id for row in theirs}]
        assert len(errors) == 2 * len(acme_jobs)
        readable = NUL_BODY.replace(b"\x00", b"").decode()[:10]
        assert all(e.startswith("HTTP 500") and "\x00" not in e and readable in e for e in errors), errors
