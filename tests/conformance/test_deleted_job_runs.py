"""A deleted job's run never ends ``dead``, on SQLite and PostgreSQL
(hardening, session 25; docs/architecture.md, Semantics: "A deleted job's
runs").

DeleteJob cancels its job's runs not started and lets a running one finish.
A run can still meet its job gone on four paths, each tested here:

1. the hand-out: a ready run whose job is gone (left ``scheduled`` by a
   give-back or requeue racing the DeleteJob: 3.) is canceled
   ``canceled: job deleted`` in the round's transaction, never sent (it was
   handed out with no definition: the worker got no target, failed it
   permanently, and it ended a dead letter with an alert);
2. the give-back of a hand-out no worker saw (a stream that closed, a
   hand-out whose COMMIT went unanswered): canceled, not put back;
3. a DeleteJob committing in the middle of such a give-back (READ
   COMMITTED on PostgreSQL: the run is put back, job gone, and the next
   hand-out cancels it) or of a requeue (SERIALIZABLE: one of the two is
   retried): the run ends canceled, once, whichever commits first;
4. a result: a run that ran and failed (or timed out) after its job was
   deleted ends ``canceled: job deleted``, its attempt ``failed`` with the
   error: not retried, not dead, no alert.

Every run ends in exactly one terminal state, and whatever it held (a
concurrency key's slot or its turn in the key's line, a manual-run unit, its
delivery) is given back.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.ids import to_us
from tickwheel_server.store.errors import AmbiguousCommitError
from tickwheel_server.store.classify import CONFLICT_SQLSTATES, sqlstate_of
from tickwheel_server.store.executions import Lost, ResultIn
from tickwheel_server.store.jobbatch import delete_jobs
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.manual import ManualStore
from tickwheel_server.store.tables import attempts, executions
from tickwheel_server.store.timeline import DELETED_REASON
from tickwheel_server.store.unsend import release_unsent

from tests.support.plans import captured

from .test_handout import committed_unanswered
from .test_isolation import LATERAL, Server, key_row, occurrences, row_of, spec, status, tenants  # noqa: F401
from .test_manual_quota import slots_hold

TERMINAL = ("succeeded", "dead", "canceled")


def gone(engine, *job_ids: str) -> None:
    """The jobs' rows deleted and nothing else: what a DeleteJob racing a
    give-back or a requeue leaves (their runs ``scheduled``, job gone)."""
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM jobs WHERE id IN :ids").bindparams(sa.bindparam("ids", expanding=True)),
                     {"ids": list(job_ids)})


def canceled_deleted(engine, *idents: str) -> None:
    """Each run ended ``canceled: job deleted``, owned by no one, its delivery given back."""
    for ident in idents:
        row = row_of(engine, ident)
        assert (row.status, row.dead_reason, row.owner, row.worker_id, row.handed_out_at) == (
            "canceled", DELETED_REASON, None, None, None), ident
        assert row.finished_at is not None


def no_dead(engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(sa.select(executions.c.id).where(executions.c.status == "dead")).all() == []


def text(sent) -> str:
    """A statement's text, an expanding ``IN`` (SQLite's) of any length as one."""
    return re.sub(r"\(\?(, \?)*\)", "(?…)", sent.statement)


# ----------------------------------------------------------------------------- 1. the hand-out


@LATERAL
async def test_a_ready_run_whose_job_is_gone_is_canceled_at_the_hand_out_and_never_sent(
    migrated_engine, clock, tenants, lateral
) -> None:
    """A plain run and a woken key waiter (holding its turn in the key's
    line) of deleted jobs are canceled, the waiter's turn handed on; a live
    job's run in the same round is handed out."""
    keyed = spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1})
    [first] = occurrences(migrated_engine, clock, "job_live_k", 1, job=keyed)
    [woken] = occurrences(migrated_engine, clock, "job_gone_k", 1, job=keyed, first_in=0.001)
    [behind] = occurrences(migrated_engine, clock, "job_live_k2", 1, job=keyed, first_in=0.002)
    server = Server(migrated_engine, clock, "s1", lateral=lateral)
    clock.advance(1)
    [running] = await server.claim()
    assert running.id == first and status(migrated_engine, woken, behind) == ["waiting", "waiting"]
    await server.finish([running])  # its slot frees: the oldest waiter is woken, holding the key's turn
    assert (status(migrated_engine, woken, behind), row_of(migrated_engine, woken).wait_key) == (
        ["scheduled", "waiting"], "db")
    [plain] = occurrences(migrated_engine, clock, "job_gone_a", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
    [live] = occurrences(migrated_engine, clock, "job_live_a", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
    gone(migrated_engine, "job_gone_k", "job_gone_a")
    clock.advance(1)

    handed = await server.claim()
    assert [h.id for h in handed] == [live]
    assert handed.diverted == 2
    canceled_deleted(migrated_engine, woken, plain)
    assert {row_of(migrated_engine, i).delivery for i in (woken, plain)} == {0}
    assert status(migrated_engine, behind) == ["scheduled"]  # the canceled waiter's turn went on
    assert [h.id for h in await server.claim()] == [behind]
    assert key_row(migrated_engine, "acme", "db").running == 1
    assert [h.id for h in await server.claim()] == []
    no_dead(migrated_engine)


async def test_a_manual_run_whose_job_is_gone_gives_its_unit_back_at_the_hand_out(
    migrated_engine, clock, tenants
) -> None:
    await tenants.update("acme", max_pending_manual_runs=2)
    occurrences(migrated_engine, clock, "job_m", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW), first_in=3600)
    run, _ = await ManualStore(migrated_engine, clock).trigger("acme", "job_m", "r1")
    assert slots_hold(migrated_engine) == 1
    gone(migrated_engine, "job_m")
    clock.advance(1)
    assert await Server(migrated_engine, clock, "s1").claim() == []
    canceled_deleted(migrated_engine, run.id)
    assert slots_hold(migrated_engine) == 0


@LATERAL
async def test_canceling_gone_runs_costs_the_round_one_statement_and_no_read(
    migrated_engine, clock, tenants, lateral
) -> None:
    """The hand-out is hot: the job's existence comes with the read of the
    definitions the round makes anyway (on PostgreSQL the take carries it),
    so a round with runs of deleted jobs sends the statements of one without
    them plus the cancel (one UPDATE over arrays on PostgreSQL; one
    statement of a row per run on SQLite), and a round without reads the
    jobs once, as before (loadtest/bench_handout_statements.py counts a
    round on either tree)."""
    server = Server(migrated_engine, clock, "s1", lateral=lateral)

    async def claimed(tag: str, deleted: int) -> tuple[list, list]:
        """A round over three live jobs' ready runs and ``deleted`` deleted jobs' runs; what it sent."""
        for n in range(3):
            occurrences(migrated_engine, clock, f"job_{tag}_live{n}", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
        for n in range(deleted):
            occurrences(migrated_engine, clock, f"job_{tag}_gone{n}", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
        if deleted:
            gone(migrated_engine, *[f"job_{tag}_gone{n}" for n in range(deleted)])
        clock.advance(1)
        with captured(migrated_engine) as seen:
            handed = await server.claim()
        return handed, list(seen)

    plain, plain_sent = await claimed("p", 0)
    assert len(plain) == 3
    mixed, mixed_sent = await claimed("m", 2)
    assert len(mixed) == 3 and mixed.diverted == 2
    more = Counter(map(text, mixed_sent)) - Counter(map(text, plain_sent))
    fewer = Counter(map(text, plain_sent)) - Counter(map(text, mixed_sent))
    assert fewer == Counter(), fewer
    assert len(more) == 1 and sum(more.values()) == 1, more
    [cancel] = [s for s in mixed_sent if text(s) in more]
    assert cancel.statement.startswith("UPDATE executions"), cancel.statement
    assert cancel.sets == (1 if migrated_engine.dialect.name == "postgresql" else 2)
    reads_jobs = [s.statement for s in mixed_sent if "FROM jobs" in s.statement or "JOIN jobs" in s.statement]
    assert len(reads_jobs) == 1, reads_jobs  # the definitions' read, as in every round


# ----------------------------------------------------------------------------- 2. the give-back


async def test_a_hand_out_given_back_after_its_job_was_deleted_ends_canceled_and_frees_its_slot(
    migrated_engine, clock, tenants
) -> None:
    """DeleteJob lets a running run finish; one whose stream closed before
    it was sent is given back: canceled, its key slot and delivery given
    back, and a manual run's unit not taken back (it will not start)."""
    await tenants.update("acme", max_pending_manual_runs=2)
    [keyed] = occurrences(migrated_engine, clock, "job_gk", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 2}))
    [kept] = occurrences(migrated_engine, clock, "job_kept", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 2}),
                         first_in=0.001)
    occurrences(migrated_engine, clock, "job_gm", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW), first_in=3600)
    manual, _ = await ManualStore(migrated_engine, clock).trigger("acme", "job_gm", "r1")
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    handed = {h.id: h for h in await server.claim()}
    assert sorted(handed) == sorted([keyed, kept, manual.id])
    assert key_row(migrated_engine, "acme", "db").running == 2 and slots_hold(migrated_engine) == 0
    jobs = JobStore(migrated_engine, clock, partition_count=1)
    # Running: left to finish (job_gm's next occurrence, not started, is canceled).
    assert [await jobs.delete("acme", job) for job in ("job_gk", "job_gm")] == [0, 1]

    await server.store.requeues.release([(h.id, h.delivery) for h in handed.values()])
    canceled_deleted(migrated_engine, keyed, manual.id)
    assert {row_of(migrated_engine, i).delivery for i in (keyed, manual.id)} == {0}
    assert status(migrated_engine, kept) == ["scheduled"]  # its job exists: put back
    assert key_row(migrated_engine, "acme", "db").running == 0
    assert slots_hold(migrated_engine) == 0
    assert [h.id for h in await server.claim()] == [kept]
    no_dead(migrated_engine)


async def test_a_hand_out_in_doubt_whose_job_was_deleted_is_undone_to_canceled(
    migrated_engine, clock, tenants, monkeypatch
) -> None:
    [ident] = occurrences(migrated_engine, clock, "job_doubt", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1}))
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    monkeypatch.setattr(server.store.handout, "_tx", committed_unanswered(server.store.handout._tx))
    with pytest.raises(AmbiguousCommitError):
        await server.claim()
    monkeypatch.undo()
    assert status(migrated_engine, ident) == ["running"]  # it committed: sent by no one
    assert await JobStore(migrated_engine, clock, partition_count=1).delete("acme", "job_doubt") == 0
    assert await server.claim() == []  # the undo first
    canceled_deleted(migrated_engine, ident)
    assert key_row(migrated_engine, "acme", "db").running == 0
    no_dead(migrated_engine)


# ----------------------------------------------------------------------------- 3. a DeleteJob racing a give-back


@pytest.mark.parametrize("first", ["give-back", "delete"])
async def test_a_delete_committing_amid_a_give_back_ends_the_run_canceled_once(
    migrated_engine, clock, tenants, first
) -> None:
    """``first``: the side that begins first. On PostgreSQL each side runs
    in its own transaction at the level it runs at (the undo of a hand-out
    in doubt at READ COMMITTED, DeleteJob at the engine's), the one begun
    first committing last: the give-back reads the job as existing (the
    delete is not committed) and puts the run back; the delete's cancel
    does not see it (still running when it read). The next hand-out cancels
    it. On SQLite one writer at a time: the one begun first commits first,
    and the give-back sees the job gone, or the delete sees the run back."""
    [ident] = occurrences(migrated_engine, clock, "job_race", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1}))
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    [handed] = await server.claim()
    caps = server.store.handout.caps
    now_us = to_us(clock.now())

    def give_back(conn) -> None:
        release_unsent(conn, caps, [(handed.id, handed.delivery)], now_us=now_us, owner="s1",
                       at_us=handed.handed_out_at_us)

    def delete(conn) -> None:
        # It cancels the run if it was given back before: it is not started then.
        assert delete_jobs(conn, caps, "acme", [("job_race", 0)], now_us=now_us) in ([0], [1])

    if migrated_engine.dialect.name == "sqlite":  # one writer at a time: the one begun first commits first
        for step in (give_back, delete) if first == "give-back" else (delete, give_back):
            with migrated_engine.begin() as conn:
                step(conn)
    else:
        outer, inner = (give_back, delete) if first == "give-back" else (delete, give_back)
        levels = {give_back: "READ COMMITTED", delete: "SERIALIZABLE"}
        with migrated_engine.connect().execution_options(isolation_level=levels[outer]) as a:
            with a.begin():
                outer(a)
                with migrated_engine.connect().execution_options(isolation_level=levels[inner]) as b:
                    with b.begin():
                        inner(b)
    assert await server.claim() == []
    canceled_deleted(migrated_engine, ident)
    assert key_row(migrated_engine, "acme", "db").running == 0
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.select(attempts.c.status).where(attempts.c.execution_id == ident)).all() == []
    no_dead(migrated_engine)


async def transaction_of(store, call) -> Callable:
    """The function ``call`` (a coroutine of ``store``'s) runs in its
    transaction, taken without running it: the test runs it in a
    transaction of its own, interleaved with another."""
    taken: list = []

    class Taken(Exception):
        pass

    async def take(fn, **_options):
        taken.append(fn)
        raise Taken

    real, store._tx = store._tx, take
    try:
        await call()
    except Taken:
        pass
    finally:
        store._tx = real
    return taken[0]


def committed(engine, level: str, fn, inner=None) -> None:
    """``fn`` in a transaction at ``level``, ``inner`` (begun and committed
    inside it) before its COMMIT; each retried from the start on a
    serialization failure, as the store's transactions are."""
    for _ in range(5):
        try:
            with engine.connect().execution_options(isolation_level=level) as conn:
                with conn.begin():
                    fn(conn)
                    if inner is not None:
                        inner()
                        inner = None
            return
        except sa.exc.OperationalError as error:
            if sqlstate_of(error) not in CONFLICT_SQLSTATES:
                raise
    raise AssertionError("retried five times")


@pytest.mark.parametrize("first", ["requeue", "delete"])
async def test_a_delete_committing_amid_a_requeue_ends_the_run_canceled_once(
    migrated_engine, clock, tenants, first
) -> None:
    """The requeue of a lost worker's run and DeleteJob, each in its own
    transaction at the engine's level (SERIALIZABLE), the one begun first
    committing last, each retried on a serialization failure as the store
    retries it: the run ends canceled once, with one ``lost`` attempt,
    whichever commits first. On PostgreSQL the serializable checks fail
    the one committing last (40001: the requeue read the job the delete
    removed, the delete read the run the requeue put back), and its retry
    sees the other's commit (seen: one retry in each order); a requeue
    that got through anyway would leave the run to the next hand-out."""
    [ident] = occurrences(migrated_engine, clock, "job_rq", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1}))
    server = Server(migrated_engine, clock, "s1")
    clock.advance(1)
    [handed] = await server.claim()
    jobs = JobStore(migrated_engine, clock, partition_count=1)
    requeue = await transaction_of(server.store.requeues, lambda: server.store.requeues.requeue(
        "s1", [Lost(ident, handed.delivery, "worker w1 disconnected", "w1")], counts=True))
    delete = await transaction_of(jobs, lambda: jobs.delete("acme", "job_rq"))
    level = "SERIALIZABLE"
    if migrated_engine.dialect.name == "sqlite":  # one writer at a time: the one begun first commits first
        for step in (requeue, delete) if first == "requeue" else (delete, requeue):
            committed(migrated_engine, level, step)
    else:
        outer, inner = (requeue, delete) if first == "requeue" else (delete, requeue)
        committed(migrated_engine, level, outer, lambda: committed(migrated_engine, level, inner))
    assert await server.claim() == []
    canceled_deleted(migrated_engine, ident)
    assert key_row(migrated_engine, "acme", "db").running == 0
    with migrated_engine.connect() as conn:
        tried = conn.execute(sa.select(attempts.c.status).where(attempts.c.execution_id == ident)).scalars().all()
    assert tried == ["lost"]
    no_dead(migrated_engine)


# ----------------------------------------------------------------------------- 4. results


@pytest.mark.parametrize("outcome, attempt_status", [
    (worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, "failed"),
    (worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE, "failed"),
    (worker_pb2.RESULT_OUTCOME_TIMED_OUT, "timed_out"),
])
async def test_a_deleted_jobs_run_that_ran_and_failed_is_canceled_not_dead_lettered(
    migrated_engine, clock, tenants, outcome, attempt_status
) -> None:
    """It ran: its attempt says how it ended, with the worker's error; the
    run ends ``canceled: job deleted``: no retry (it would have no target),
    no dead letter, no alert. A run of the same batch that succeeded, and a
    live job's failure, are recorded as ever."""
    letters: list = []
    [doomed] = occurrences(migrated_engine, clock, "job_fail", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, {"db": 1}))
    [lucky] = occurrences(migrated_engine, clock, "job_ok", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW))
    [live] = occurrences(migrated_engine, clock, "job_alive", 1, job=spec(job_pb2.OVERLAP_POLICY_ALLOW, attempts_=1))
    server = Server(migrated_engine, clock, "s1", on_dead_letter=lambda conn, letter: letters.append(letter.execution_id))
    clock.advance(1)
    handed = {h.id: h for h in await server.claim()}
    jobs = JobStore(migrated_engine, clock, partition_count=1)
    for job in ("job_fail", "job_ok"):
        assert await jobs.delete("acme", job) == 0
    results = [
        ResultIn(doomed, handed[doomed].delivery, 1, outcome, "boom", "w1", ("acme",)),
        ResultIn(lucky, handed[lucky].delivery, 1, worker_pb2.RESULT_OUTCOME_SUCCEEDED, "", "w1", ("acme",)),
        ResultIn(live, handed[live].delivery, 1, outcome, "boom", "w1", ("acme",)),
    ]
    acks = await server.store.outcomes.record_results(results)
    assert all(ack.accepted for ack in acks) and all(ack.retry is None for ack in acks[:2])
    canceled_deleted(migrated_engine, doomed)
    assert row_of(migrated_engine, doomed).error == "boom"
    with migrated_engine.connect() as conn:
        tried = conn.execute(sa.select(attempts.c.status, attempts.c.error).where(attempts.c.execution_id == doomed)).all()
    assert [tuple(row) for row in tried] == [(attempt_status, "boom")]
    assert status(migrated_engine, lucky) == ["succeeded"]
    assert status(migrated_engine, live) == ["dead"] and letters == [live]  # a live job's failure: as ever
    assert key_row(migrated_engine, "acme", "db").running == 0
    assert all(s in TERMINAL for s in status(migrated_engine, doomed, lucky, live))
