"""A batch of results' plain successes (see :func:`plain_success`), column
by column as their one statement writes them: each attempt's record on its
execution row, no attempt row (:mod:`.outcomes`).

A plain success is most results. Its record is taken straight into the
statement's columns (:meth:`PlainSuccesses.add`), without the update and
the attempt row a decided outcome makes and the statement would read
back: per result, that was most of recording it in Python
(loadtest/RESULTS.md, "the claim's and the results' Python a row").
"""

from __future__ import annotations

from .base import driver_sql
from .executions import OUTPUT_KEPT_BYTES, waited

# The common outcome, a success without error text (PostgreSQL and CockroachDB), with its
# attempt's record on the row (``attempt_*``): no attempt row. ``attempt`` and
# ``ready_at`` are left as they are: a success keeps both
# (:func:`~tickwheel_server.policy.outcome.decide`). The ``ANY`` beside the
# join makes the planner find the rows by primary key rather than hash the
# table to probe the arrays.
SUCCESS_ARRAYS = (  # parameter, element type, column of ``v``, key of the attempt's record
    ("ids", "TEXT", "id", "execution_id"), ("started", "BIGINT", "started_at", "started_at"),
    ("workers", "TEXT", "worker_id", "worker_id"), ("worker_started", "BIGINT", "worker_started_at", "worker_started_at"),
    ("waited", "BIGINT", "waited_us", "waited_us"), ("outputs", "BYTEA", "output", "output"),
)
RECORD_SUCCESSES = driver_sql(
    "UPDATE executions SET status = 'succeeded', error = '', dead_reason = '', finished_at = :finished, "
    "owner = NULL, worker_id = NULL, handed_out_at = NULL, held_keys = NULL, wait_key = NULL, waiting_since = NULL, "
    "cancel_requested_at = NULL, cancel_reason = NULL, attempt_started_at = v.started_at, "
    "attempt_worker_id = v.worker_id, attempt_worker_started_at = v.worker_started_at, "
    "attempt_waited_us = v.waited_us, attempt_output = v.output "
    f"FROM unnest({', '.join(f'CAST(:{name} AS {kind}[])' for name, kind, _, _ in SUCCESS_ARRAYS)}) "
    f"AS v ({', '.join(column for _, _, column, _ in SUCCESS_ARRAYS)}) "
    "WHERE executions.id = ANY (CAST(:ids AS TEXT[])) AND executions.id = v.id"
)


def succeeded(row, now_us: int) -> dict:
    """The update a success with no error text makes whose decision needs
    no definition (a handler target's, or any with no circuit breaker):
    succeeded now, its attempt and ready instant kept, no error nor
    reason. ``decide`` settles a success from the outcome alone (no
    policy, no draw, no cancel request counts), so nothing else of the row
    or the result could change it. It is a plain success."""
    return dict(b_id=row.id, b_status="succeeded", b_attempt=row.attempt, b_ready_at=row.ready_at, b_error="",
                b_dead_reason="", b_finished_at=now_us)


def plain_success(update: dict, row, now_us: int) -> bool:
    """Whether ``update`` is exactly what :data:`RECORD_SUCCESSES` writes for
    ``row``: succeeded now, no error text nor reason, its attempt and ready
    instant kept. Such an attempt is recorded on the execution row
    (``attempt_*``), not in ``attempts``: it is the execution's last, its
    status, end, numbers and lateness are the row's."""
    return (
        update["b_status"] == "succeeded" and update["b_error"] == "" and update["b_dead_reason"] == ""
        and update["b_finished_at"] == now_us and update["b_attempt"] == row.attempt
        and update["b_ready_at"] == row.ready_at
    )


def on_row(record: dict | None) -> dict:
    """The ``attempt_*`` values of an execution row for its attempt's
    ``record`` (None: recorded in ``attempts``, the columns stay NULL)."""
    if record is None:
        return dict(b_started=None, b_worker=None, b_worker_started=None, b_waited=None, b_output=None)
    return dict(b_started=record["started_at"], b_worker=record["worker_id"],
                b_worker_started=record["worker_started_at"], b_waited=record["waited_us"],
                b_output=record["output"])


class PlainSuccesses:
    """One batch's plain successes: their rows and their attempts' records,
    column by column (:data:`SUCCESS_ARRAYS`)."""

    __slots__ = ("rows", "started", "workers", "worker_started", "waited", "outputs")

    def __init__(self) -> None:
        self.rows: list = []
        """The executions' rows (:class:`~.outcomes._ResultRow`)."""
        self.started: list[int] = []
        self.workers: list[str] = []
        self.worker_started: list[int | None] = []
        self.waited: list[int] = []
        self.outputs: list[bytes | None] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row, worker_id: str, worker_started_us: int | None, output: bytes, now_us: int) -> None:
        """``row``'s success with no error text, ended at ``now_us``: the
        record :func:`~.executions.attempt_row` makes of it, by column."""
        started_us = row.handed_out_at if row.handed_out_at is not None else now_us
        self.rows.append(row)
        self.started.append(started_us)
        self.workers.append(worker_id)
        self.worker_started.append(worker_started_us)
        self.waited.append(waited(row.waiting_since, started_us))
        self.outputs.append(output[:OUTPUT_KEPT_BYTES] or None)

    def add_record(self, row, record: dict) -> None:
        """``row``'s plain success as :func:`~.executions.attempt_row` recorded it."""
        self.rows.append(row)
        self.started.append(record["started_at"])
        self.workers.append(record["worker_id"])
        self.worker_started.append(record["worker_started_at"])
        self.waited.append(record["waited_us"])
        self.outputs.append(record["output"])

    def parameters(self, now_us: int) -> dict:
        """:data:`RECORD_SUCCESSES`' parameters (PostgreSQL and CockroachDB)."""
        return dict(
            ids=[row.id for row in self.rows], started=self.started, workers=self.workers,
            worker_started=self.worker_started, waited=self.waited,
            # BYTEA[] from text: each element in the hex input format, NULL for none.
            outputs=[None if out is None else "\\x" + out.hex() for out in self.outputs], finished=now_us,
        )

    def updates(self, now_us: int) -> list[dict]:
        """Per success, the update and its record's ``attempt_*`` values (SQLite's rows)."""
        return [
            dict(succeeded(row, now_us), b_started=started, b_worker=worker, b_worker_started=worker_started,
                 b_waited=waited_us, b_output=output)
            for row, started, worker, worker_started, waited_us, output in zip(
                self.rows, self.started, self.workers, self.worker_started, self.waited, self.outputs
            )
        ]
