"""Results: workers' outcomes recorded on their executions (succeeded, a
retry, a dead letter, canceled), as :mod:`tickwheel_server.policy.outcome`
decides.

:meth:`OutcomeStore.record_results` applies workers' results in one
transaction per batch: one read of the rows (locked), one read of the job
definitions the decisions need (none for a batch of handler targets'
successes: only a retry policy or an HTTP target's host is read from a
definition), one batched update, one batched insert of attempt rows. Each
result carries the tenants of the credential it came with: an execution of any other tenant is answered
exactly like one that does not exist (:data:`.executions.NOT_HELD`). A result whose
delivery is not the current one is rejected and changes nothing but a note
on the attempt row of that delivery, if it was requeued; a repeated result
(its attempt row exists) is acknowledged again and changes nothing, with
its retry's ready instant again while that retry is not handed out: so a
batch whose COMMIT went unanswered (:class:`.errors.AmbiguousCommitError`),
written again by the results' writer, is recorded once, and its retries
still reach the timer wheel. A result
the caller does not vouch for (``held=False``: the stream that sent it does
not hold the delivery) is never applied, only classified.

A worker's error is stored escaped (:func:`stored_error`), so no reader
of it (the API, alerts, the console, the CLI) gets a control character
from a worker; only an applied result's is escaped, once a delivery.

Ending a delivery gives its concurrency-key slots back and wakes the
next in line (:mod:`.isolation`), in the same transaction. An execution with
a cancel request ends ``canceled`` instead of being retried or requeued.

On PostgreSQL, result batches run at READ COMMITTED (see
:class:`.base.SqlStore`): each batch locks its executions' rows (FOR UPDATE)
first.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from tickwheel.v1 import worker_pb2

from tickwheel.shared.ids import to_us

from ..jobspec import NO_DEFINITION, DefinitionCache
from ..circuits import CircuitBreaker
from ..policy.outcome import (
    BREAKER_OUTCOMES, DECIDED_WITHOUT_JOB, DECIDED_WITHOUT_POLICY, Facts, breaker_event, decide,
)
from .base import SqlStore, driver_sql, execute_arrays, one_of, tuples
from .executions import (
    NOT_HELD, TERMINAL, DeadLetter, DeadLetterHook, ResultAck, ResultIn, Retry, attempt_row, dead_lettered,
)
from . import manualslots
from .attempt_writes import insert_attempts
from .isolation import release_slots, wake_jobs
from .peertext import escaped_text, stored_error
from .plain_successes import RECORD_SUCCESSES, PlainSuccesses, on_row, plain_success
from .tables import attempts, executions, jobs
from .timeline import DELETED_REASON

# Outcomes of a batch of results (PostgreSQL and CockroachDB): every row's new state from
# parallel arrays, by primary key; whatever held the delivery is cleared.
_RECORD_OUTCOMES = driver_sql(
    "UPDATE executions SET status = v.status, attempt = v.attempt, ready_at = v.ready_at, error = v.error, "
    "dead_reason = v.dead_reason, finished_at = v.finished_at, owner = NULL, worker_id = NULL, "
    "handed_out_at = NULL, held_keys = NULL, wait_key = NULL, waiting_since = NULL, cancel_requested_at = NULL, "
    "cancel_reason = NULL "
    "FROM unnest(CAST(:ids AS TEXT[]), CAST(:statuses AS TEXT[]), CAST(:attempts AS INTEGER[]), "
    "CAST(:ready AS BIGINT[]), CAST(:errors AS TEXT[]), CAST(:deads AS TEXT[]), CAST(:finished AS BIGINT[])) "
    "AS v (id, status, attempt, ready_at, error, dead_reason, finished_at) "
    "WHERE executions.id = v.id"
)
_OUTCOME_ARRAYS = {
    "ids": "b_id", "statuses": "b_status", "attempts": "b_attempt", "ready": "b_ready_at", "errors": "b_error",
    "deads": "b_dead_reason", "finished": "b_finished_at",
}

# A batch of results' executions (PostgreSQL and CockroachDB), locked: one array parameter,
# one plan whatever the batch. Their jobs' definitions are read apart
# (:data:`_JOB_SPECS`), for the results whose decision needs one.
_RESULT_ROWS = driver_sql(
    "SELECT e.id, e.job_id, e.tenant, e.partition, e.status, e.delivery, e.attempt, e.due_at, e.ready_at, "
    "e.handed_out_at, e.held_keys, e.waiting_since, e.cancel_requested_at, e.cancel_reason, e.handler, "
    "e.attempt_started_at, e.manual_slot FROM executions AS e WHERE e.id = ANY (CAST(:ids AS TEXT[])) FOR UPDATE"
)

# The definitions of some jobs (PostgreSQL and CockroachDB), by primary key.
_JOB_SPECS = driver_sql("SELECT j.id, j.spec, j.version FROM jobs AS j WHERE j.id = ANY (CAST(:ids AS TEXT[]))")

class _ResultRow(NamedTuple):
    """An execution a result names, as :data:`_RESULT_ROWS` reads it."""

    id: str
    job_id: str
    tenant: str
    partition: int
    status: str
    delivery: int
    attempt: int
    due_at: int
    ready_at: int
    handed_out_at: int | None
    held_keys: str | None
    waiting_since: int | None
    cancel_requested_at: int | None
    cancel_reason: str | None
    handler: str | None
    """The handler it was claimed for; None: an HTTP target."""
    attempt_started_at: int | None
    """Not None: it succeeded plainly, its last attempt recorded on the row (see :func:`.plain_successes.plain_success`)."""
    manual_slot: int | None
    """The manual-run quota's slot that counts it while it waits to start (:mod:`.manualslots`)."""
    spec: bytes | None = None
    """The job's definition, where it was read (None: deleted, or not read: not needed)."""
    version: int | None = None
    """The job's version (None: the job was deleted): the definition's cache key with its id."""


class OutcomeStore(SqlStore):
    def __init__(
        self,
        engine,
        clock,
        *,
        rng: random.Random | None = None,
        on_dead_letter: DeadLetterHook | None = None,
        breaker: CircuitBreaker | None = None,
        definitions: DefinitionCache | None = None,
    ) -> None:
        super().__init__(engine, clock)
        self._rng = rng or random.Random()
        """Draws the retries' jitter."""
        self._on_dead_letter = on_dead_letter
        self.breaker = breaker
        """Counts HTTP-target outcomes per (tenant, host) and holds retries while a circuit is open; None: no breaker."""
        self.definitions = definitions if definitions is not None else DefinitionCache()
        """Parsed definitions by (job id, version); shared with the dispatcher and hand-out where one server runs them."""

    async def record_results(self, results: list[ResultIn]) -> list[ResultAck]:
        """Apply outcomes; returns one ack per result, in order.

        A result is applied only if its execution is of one of its
        ``tenants`` and one its ``may_serve`` allows, ``running`` at its
        delivery and attempt, and ``held``. Otherwise nothing of the
        execution changes: another tenant's execution, one of a handler the
        credential may not run, an unknown one, or a current delivery not
        held, is answered :data:`NOT_HELD`; a delivery already recorded
        ``already recorded`` (accepted); a requeued one is rejected and,
        once per lost attempt, noted on its ``lost`` attempt row when the
        result comes from the worker that held it; one for the current
        running delivery whose ``attempt`` is not the delivery's is refused
        naming the field, with ``watch_again`` set when its stream holds the
        delivery (its holder keeps watching it: see
        :attr:`~.executions.ResultAck.watch_again`); any other stale one is
        rejected."""
        if not results:
            return []
        rng_state = self._rng.getstate()

        def fn(conn: Connection) -> list[ResultAck]:
            self._rng.setstate(rng_state)  # the same delays if the transaction is retried
            now = self.clock.now()
            now_us = to_us(now)
            ids = sorted({r.execution_id for r in results})
            if not self.caps.is_sqlite:
                read = [_ResultRow(*row) for row in tuples(execute_arrays(conn, _RESULT_ROWS, {"ids": ids}))]
            else:
                read = [_ResultRow(*row) for row in self._result_rows(conn, ids)]
            rows = {row.id: row for row in read}
            # Another tenant's execution, or one the credential could not have been
            # handed, is to this result no execution at all: nothing of it is told or written.
            mine = [
                row if row is not None and row.tenant in r.tenants
                and (r.may_serve is None or r.may_serve(row.tenant, row.handler)) else None
                for r in results for row in (rows.get(r.execution_id),)
            ]
            if not self.caps.is_sqlite:
                mine = self._with_definitions(conn, results, mine)
            mismatched = [
                r for r, row in zip(results, mine)
                if row is not None and (row.status != "running" or row.delivery != r.delivery or row.attempt != r.attempt)
            ]
            recorded = self._recorded_attempts(conn, mismatched)
            acks: list[ResultAck] = []
            successes = PlainSuccesses()
            others: list[dict] = []  # the updates of every other outcome
            requeued: list[tuple[str, int | None]] = []  # (tenant, manual slot) of runs due to run again
            history: list[dict] = []
            notes: list[dict] = []
            dead: list[DeadLetter] = []
            ended: list = []
            finished_jobs: list[str] = []
            seen: set[tuple[str, int]] = set()
            for result, row in zip(results, mine):
                key = (result.execution_id, result.delivery)
                if row is None:
                    acks.append(ResultAck(*key, False, NOT_HELD))
                    continue
                if key in seen:
                    acks.append(ResultAck(*key, True, "already recorded"))
                    continue
                if row.status != "running" or row.delivery != result.delivery or row.attempt != result.attempt:
                    status = recorded.get((result.execution_id, result.attempt, result.delivery))
                    if status is None and _recorded_on_row(row, result):
                        status = "succeeded"
                    if status is not None and status != "lost":
                        # Its retry not yet handed out (the first record's answer may have been
                        # lost with its COMMIT's): its instant again, for the timer wheel.
                        again = (Retry(row.id, row.partition, row.ready_at) if row.status == "scheduled"
                                 and row.attempt == result.attempt + 1 and row.delivery == result.delivery else None)
                        acks.append(ResultAck(*key, True, "already recorded", retry=again))
                        continue
                    if row.status == "running" and row.delivery == result.delivery:  # its attempt is wrong
                        acks.append(ResultAck(*key, False, wrong_attempt(row.attempt, result.attempt),
                                              watch_again=result.held))
                        continue
                    reason = f"stale delivery: the current one is {row.delivery} ({row.status})"
                    if status == "lost":
                        reason = f"stale delivery: delivery {result.delivery} was requeued (lost)"
                        notes.append(
                            dict(
                                b_id=result.execution_id, b_attempt=result.attempt, b_delivery=result.delivery,
                                b_worker=result.worker_id,
                                b_note=f"; a late result ({_OUTCOME_NAMES.get(result.outcome, 'unknown')}) "
                                f"from worker {result.worker_id} was rejected",
                            )
                        )
                    acks.append(ResultAck(*key, False, reason))
                    continue
                if not result.held:  # current, but not this worker's to end
                    acks.append(ResultAck(*key, False, NOT_HELD))
                    continue
                seen.add(key)
                ended.append(row)
                if not result.error.isprintable():  # only a held result's text is escaped: a worker holds few
                    result = result._replace(error=stored_error(result.error))
                if result.outcome == _SUCCEEDED and not result.error and not self._needs_definition(row, result):
                    # The common outcome: what _outcome decides for it (succeeded), known
                    # without deciding, and a plain success: recorded on its row.
                    successes.add(row, result.worker_id, result.worker_started_at_us, result.output, now_us)
                    finished_jobs.append(row.job_id)
                    acks.append(ResultAck(result.execution_id, result.delivery, True))
                    continue
                update, attempt_status, retry, dead_letter = self._outcome(row, result, now, now_us)
                record = attempt_row(row, attempt_status, result.worker_id, result.error, now_us,
                                     result.worker_started_at_us, result.output)
                if plain_success(update, row, now_us):
                    successes.add_record(row, record)  # on the execution row
                else:
                    others.append(update)
                    history.append(record)
                if update["b_status"] in TERMINAL:
                    finished_jobs.append(row.job_id)
                elif update["b_status"] == "scheduled":
                    requeued.append((row.tenant, row.manual_slot))
                if dead_letter is not None:
                    dead.append(dead_letter)
                acks.append(ResultAck(*key, True, retry=retry))
            if ended:
                self._apply_outcomes(conn, successes, others, now_us)
                if history:
                    insert_attempts(conn, self.caps, history)
                release_slots(conn, self.caps, [(row.tenant, row.held_keys) for row in ended])
                # A manual run due to run again waits to start again: it takes its unit back.
                manualslots.take_back(conn, requeued)
                wake_jobs(conn, finished_jobs)
            if notes:
                self._note_late_results(conn, notes)
            dead_lettered(conn, self._on_dead_letter, dead)
            return acks

        return await self._tx(fn, row_locked=True)

    def _needs_definition(self, row: _ResultRow, result: ResultIn) -> bool:
        """Whether deciding ``result`` reads its job's definition: whether
        the job still exists (an outcome not in :data:`DECIDED_WITHOUT_JOB`:
        a failure of a deleted job's run is not retried nor dead-lettered),
        its retry policy (an outcome not in :data:`DECIDED_WITHOUT_POLICY`),
        or the host an HTTP target calls, for the circuit breaker."""
        return result.outcome not in DECIDED_WITHOUT_JOB or (
            row.handler is None and self.breaker is not None and result.outcome in BREAKER_OUTCOMES
        )

    def _with_definitions(
        self, conn: Connection, results: list[ResultIn], rows: list[_ResultRow | None]
    ) -> list[_ResultRow | None]:
        """``rows`` (PostgreSQL and CockroachDB), each whose result needs its job's definition
        with the job's spec and version, read in one statement; the others
        as they are (most results, successes of handler targets, need none)."""
        wanted = sorted({
            row.job_id for row, result in zip(rows, results)
            if row is not None and self._needs_definition(row, result)
        })
        if not wanted:
            return rows
        specs = {job_id: (spec, version) for job_id, spec, version in
                 tuples(execute_arrays(conn, _JOB_SPECS, {"ids": wanted}))}
        return [
            row._replace(spec=found[0], version=found[1]) if row is not None and found is not None else row
            for row in rows for found in (specs.get(row.job_id) if row is not None else None,)
        ]

    def _result_rows(self, conn: Connection, ids: list[str]) -> list:
        """:data:`_RESULT_ROWS` on SQLite (no array parameters),
        each row with its job's definition."""
        query = (
            sa.select(
                executions.c.id, executions.c.job_id, executions.c.tenant, executions.c.partition,
                executions.c.status, executions.c.delivery, executions.c.attempt, executions.c.due_at,
                executions.c.ready_at, executions.c.handed_out_at, executions.c.held_keys,
                executions.c.waiting_since, executions.c.cancel_requested_at, executions.c.cancel_reason,
                executions.c.handler, executions.c.attempt_started_at, executions.c.manual_slot, jobs.c.spec,
                jobs.c.version,
            )
            .select_from(executions.outerjoin(jobs, jobs.c.id == executions.c.job_id))
            .where(executions.c.id.in_(ids))
        )
        if self.caps.row_locks:
            query = query.with_for_update(of=executions)
        return conn.execute(query).all()

    def _apply_outcomes(
        self, conn: Connection, successes: PlainSuccesses, others: list[dict], now_us: int
    ) -> None:
        """Write the executions' new states: the plain successes' with each
        attempt's record on its row (:mod:`.plain_successes`), the
        ``others``' updates. On PostgreSQL and CockroachDB at most two
        statements whatever the batch, each over arrays; on SQLite one
        statement per row."""
        if not self.caps.is_sqlite:
            if successes:
                execute_arrays(conn, RECORD_SUCCESSES, successes.parameters(now_us))
            if others:
                execute_arrays(conn, _RECORD_OUTCOMES, {
                    name: [update[key] for update in others] for name, key in _OUTCOME_ARRAYS.items()
                })
            return
        conn.execute(
            executions.update()
            .where(executions.c.id == sa.bindparam("b_id"))
            .values(
                status=sa.bindparam("b_status"), attempt=sa.bindparam("b_attempt"),
                ready_at=sa.bindparam("b_ready_at"), error=sa.bindparam("b_error"),
                dead_reason=sa.bindparam("b_dead_reason"), finished_at=sa.bindparam("b_finished_at"),
                owner=None, worker_id=None, handed_out_at=None, held_keys=None, wait_key=None,
                waiting_since=None, cancel_requested_at=None, cancel_reason=None,
                attempt_started_at=sa.bindparam("b_started"), attempt_worker_id=sa.bindparam("b_worker"),
                attempt_worker_started_at=sa.bindparam("b_worker_started"), attempt_waited_us=sa.bindparam("b_waited"),
                attempt_output=sa.bindparam("b_output"),
            ),
            [*successes.updates(now_us), *({**update, **on_row(None)} for update in others)],
        )

    def _recorded_attempts(self, conn: Connection, results: list[ResultIn]) -> dict[tuple[str, int, int], str]:
        """The attempt rows, by (execution, attempt, delivery), of results that do not match their execution's current delivery."""
        if not results:
            return {}
        rows = conn.execute(
            sa.select(attempts.c.execution_id, attempts.c.attempt, attempts.c.delivery, attempts.c.status).where(
                one_of(self.caps, attempts.c.execution_id, sorted({r.execution_id for r in results}))
            )
        )
        return {(r.execution_id, r.attempt, r.delivery): r.status for r in rows}

    @staticmethod
    def _note_late_results(conn: Connection, notes: list[dict]) -> None:
        """Record a rejected late result on the ``lost`` attempt row of its
        delivery, when it came from the worker that held that delivery."""
        conn.execute(
            attempts.update()
            .where(
                attempts.c.execution_id == sa.bindparam("b_id"),
                attempts.c.attempt == sa.bindparam("b_attempt"),
                attempts.c.delivery == sa.bindparam("b_delivery"),
                attempts.c.status == "lost",
                attempts.c.worker_id == sa.bindparam("b_worker"),  # only the worker that held it
                attempts.c.error.not_like("%was rejected"),
            )
            .values(error=attempts.c.error + sa.bindparam("b_note")),
            notes,
        )

    def _outcome(
        self, row, result: ResultIn, now: datetime, now_us: int
    ) -> tuple[dict, str, Retry | None, DeadLetter | None]:
        """The execution's new values, the attempt's status, and the retry or dead letter it makes, for one result,
        as :func:`~tickwheel_server.policy.outcome.decide` decides.

        An HTTP target's outcome is counted by the circuit breaker of
        (tenant, host); while that circuit is open, a retry is scheduled no
        earlier than the breaker says (see :mod:`tickwheel_server.policy.breaker`).
        A definition that cannot be read fails the result where the decision
        needs it (the result writer then refuses that result alone).
        """
        # Read only where the decision needs it (the same rule on every engine):
        # a success of a handler target is recorded whatever its job's definition.
        needed = self._needs_definition(row, result)
        definition = self.definitions.get(row.job_id, row.version, row.spec) if needed and row.spec else None
        hold = None
        # A handler target has no host (nor does a damaged definition, whose host() raises: its result is refused).
        if (self.breaker is not None and definition is not None and definition.handler is None
                and result.outcome in BREAKER_OUTCOMES):
            event = breaker_event(result.outcome, definition.host(), row.handed_out_at, now_us)
            if event is not None:
                hold = self.breaker.record(row.tenant, event.host, (row.id, result.delivery), failed=event.failed,
                                           age=event.age)
        deleted = needed and row.version is None  # read, and found no job
        # Escaped (a no-op for printable text): a reason written raw by an earlier release is not copied raw.
        reason = row.cancel_reason or (DELETED_REASON if deleted else None)
        facts = Facts(row.attempt, row.cancel_requested_at is not None, reason and escaped_text(reason), deleted)
        # The policy is read only where the decision needs it: a success does not parse its job's retry policy.
        retry = (
            NO_DEFINITION.retry if result.outcome in DECIDED_WITHOUT_POLICY
            else (definition or NO_DEFINITION).retry_or_problem()
        )
        decision = decide(facts, result.outcome, result.retry_after, retry, hold, now, self._rng)
        retrying = decision.status == "scheduled"
        update = dict(
            b_id=row.id, b_status=decision.status, b_attempt=decision.attempt,
            b_ready_at=decision.ready_at_us if retrying else row.ready_at, b_error=result.error[:4096],
            b_dead_reason=decision.reason, b_finished_at=None if retrying else now_us,
        )
        retry_of = Retry(row.id, row.partition, decision.ready_at_us) if retrying else None
        dead = (
            DeadLetter(row.id, row.job_id, row.tenant, decision.reason, result.error, poison=False)
            if decision.dead else None
        )
        return update, decision.attempt_status, retry_of, dead


_SUCCEEDED = worker_pb2.RESULT_OUTCOME_SUCCEEDED


def wrong_attempt(attempt: int, said: int) -> str:
    """The refusal of a result for the current delivery whose ``attempt`` is not the delivery's."""
    return f"invalid result: attempt: this delivery is attempt {attempt}, not {said}"


def _recorded_on_row(row: _ResultRow, result: ResultIn) -> bool:
    """Whether ``result``'s attempt is the plain success recorded on its execution row."""
    return row.attempt_started_at is not None and row.attempt == result.attempt and row.delivery == result.delivery


_OUTCOME_NAMES = {
    worker_pb2.RESULT_OUTCOME_SUCCEEDED: "succeeded",
    worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE: "failed, retryable",
    worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT: "failed permanently",
    worker_pb2.RESULT_OUTCOME_TIMED_OUT: "timed out",
    worker_pb2.RESULT_OUTCOME_CANCELED: "canceled",
}
