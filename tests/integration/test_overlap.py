"""Overlap, concurrency keys and cancel across servers (issue 6, "Tests"):
real `tickwheel server` and `tickwheel worker` processes on one real
PostgreSQL and one real etcd, with long-running handlers (``sleep`` from
tests/support/handlers.py).

1. Each overlap policy: four minutely jobs (``skip``, ``queue_one``,
   ``allow``, ``replace``), each triggered so that the trigger still runs
   when the next minute's occurrence comes due. The occurrence is skipped
   (a skip range, no execution), waits and starts after the trigger ended,
   runs beside it, or has the trigger canceled through its worker and then
   starts.
2. A concurrency key with limit 1 across three jobs and two servers, each
   with its own worker: the three run one after another, never two at once,
   in ready order, and the waiting is recorded.
3. CancelExecution through one server for an execution running on a worker
   of another server: it ends canceled, with the reason.

Everything is read back from the store; no assertion is about timing except
the order of recorded instants.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, scheduler_pb2

from tests.support.attempts import ALL_ATTEMPTS

from .test_dispatch_faults import engine, eventually, now, scheduler, wait_worker_connected
from .test_worker_faults import handler, start_server, start_worker, tenant_and_credential

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]
__all__ = ["engine"]  # the fixture, imported for the tests below


def auth(api_key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {api_key}"),)


def create(address: str, api_key: str, name: str, job: job_pb2.Job) -> str:
    with scheduler(address) as stub:
        return stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=name), metadata=auth(api_key),
                              timeout=10).job.id


def sleeper(name: str, seconds: float, **fields) -> job_pb2.Job:
    return job_pb2.Job(name=name, target=handler("sleep"), payload=json.dumps({"seconds": seconds}).encode(), **fields)


def rows(engine: sa.Engine, sql: str, **params) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def executions_of(engine: sa.Engine, job_id: str) -> list[sa.Row]:
    return rows(engine, "SELECT * FROM executions WHERE job_id = :j ORDER BY nominal_at, id", j=job_id)


def attempt_rows(engine: sa.Engine, execution_id: str) -> list[sa.Row]:
    return rows(engine, f"SELECT * FROM {ALL_ATTEMPTS} AS a WHERE execution_id = :e ORDER BY delivery", e=execution_id)


def us(instant: datetime) -> int:
    return int(instant.timestamp() * 1_000_000)


# --------------------------------------------------------------------------- 1. each overlap policy


def test_each_overlap_policy_with_a_trigger_still_running_when_the_next_occurrence_is_due(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"ov-{os.getpid()}")
        api_key, credential = tenant_and_credential(server)
        start_worker(stack, tmp_path, server.address, credential, "sleepy", slots=8)
        wait_worker_connected(server, "sleepy")
        # The jobs' first occurrence: a minute boundary 20 to 80 s away.
        boundary = (now() + timedelta(seconds=80)).replace(second=0, microsecond=0)
        policies = {
            "skip": job_pb2.OVERLAP_POLICY_SKIP,
            "queue_one": job_pb2.OVERLAP_POLICY_QUEUE_ONE,
            "allow": job_pb2.OVERLAP_POLICY_ALLOW,
            "replace": job_pb2.OVERLAP_POLICY_REPLACE,
        }
        jobs: dict[str, str] = {}
        for name, policy in policies.items():
            job = sleeper(name, 1, overlap_policy=policy)
            job.schedule.cron.expression = "* * * * *"
            job.jitter.exact = True
            job.start_at.FromDatetime(boundary)
            jobs[name] = create(server.address, api_key, name, job)
        # Each job's trigger runs until 8 s past the minute: the occurrence due
        # at the minute finds it running.
        hold = (boundary - now()).total_seconds() + 8
        triggers: dict[str, str] = {}
        with scheduler(server.address) as stub:
            for name, job_id in jobs.items():
                reply = stub.TriggerJob(
                    scheduler_pb2.TriggerJobRequest(id=job_id, request_id=f"t-{name}",
                                                    payload=json.dumps({"seconds": hold}).encode()),
                    metadata=auth(api_key), timeout=10,
                )
                triggers[name] = reply.execution.id
        occurrence = {name: f"{job_id}:{boundary.strftime('%Y-%m-%dT%H:%M:%SZ')}" for name, job_id in jobs.items()}

        def settled() -> bool:
            ended = ("succeeded", "canceled", "dead")
            done = [r.status for name in jobs for r in executions_of(engine, jobs[name])
                    if r.id in (triggers[name], occurrence[name])]
            skipped = rows(engine, "SELECT 1 FROM skips WHERE job_id = :j AND reason = 'overlap'", j=jobs["skip"])
            return len(done) == 7 and all(status in ended for status in done) and bool(skipped)

        eventually(settled, hold + 60, "the triggers and the occurrences at the minute end")
        found = {name: {r.id: r for r in executions_of(engine, job_id)} for name, job_id in jobs.items()}
        first_attempts = {
            execution_id: attempt_rows(engine, execution_id)[0]
            for name in jobs for execution_id in (triggers[name], occurrence[name]) if execution_id in found[name]
        }
        # When a run began at its worker. The hand-out instant (``started_at``)
        # is the claim's own, read when it began: a claim that then waited on
        # the lock of a result being recorded starts after that result, yet
        # its instant may precede the recorded end by the wait.
        started = {execution_id: a.worker_started_at for execution_id, a in first_attempts.items()}
        handed_out = {execution_id: a.started_at for execution_id, a in first_attempts.items()}

    # skip: the occurrence never ran; one overlap skip range stands for it.
    assert occurrence["skip"] not in found["skip"]
    [(from_at, to_at, count)] = [tuple(r) for r in rows(
        engine, "SELECT from_at, to_at, count FROM skips WHERE job_id = :j AND reason = 'overlap'", j=jobs["skip"])]
    assert (from_at, to_at, count) == (us(boundary), us(boundary), 1)
    assert found["skip"][triggers["skip"]].status == "succeeded"
    # queue_one: it waited for the trigger, then ran; the wait is recorded.
    queued = found["queue_one"][occurrence["queue_one"]]
    assert queued.status == "succeeded"
    assert started[queued.id] >= found["queue_one"][triggers["queue_one"]].finished_at
    assert attempt_rows(engine, queued.id)[0].waited_us > 0
    # allow: it ran beside the trigger.
    beside = found["allow"][occurrence["allow"]]
    assert beside.status == "succeeded"
    assert handed_out[beside.id] < found["allow"][triggers["allow"]].finished_at
    # replace: the trigger was canceled through its worker, then the occurrence ran.
    replaced = found["replace"][triggers["replace"]]
    assert (replaced.status, replaced.dead_reason) == ("canceled", f"canceled: replaced by {occurrence['replace']}")
    assert [a.status for a in attempt_rows(engine, replaced.id)] == ["canceled"]
    replacement = found["replace"][occurrence["replace"]]
    assert replacement.status == "succeeded" and started[replacement.id] >= replaced.finished_at


# --------------------------------------------------------------------------- 2. a key across servers


def test_a_key_with_limit_one_across_three_jobs_and_two_servers_runs_them_one_at_a_time(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        first = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"key-a-{os.getpid()}")
        second = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"key-b-{os.getpid()}")
        api_key, credential = tenant_and_credential(first)
        start_worker(stack, tmp_path, first.address, credential, "wa", slots=4)
        start_worker(stack, tmp_path, second.address, credential, "wb", slots=4)
        wait_worker_connected(first, "wa")
        wait_worker_connected(second, "wb")
        at = now() + timedelta(seconds=3)
        job_ids = []
        for index, address in enumerate((first.address, second.address, first.address)):
            job = sleeper(f"billing-{index}", 2, overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW)
            job.schedule.once_at.FromDatetime(at)
            job.concurrency_keys.add(key="billing-db", limit=1)
            job_ids.append(create(address, api_key, f"billing-{index}", job))

        def all_ended() -> bool:
            found = rows(engine, "SELECT status FROM executions WHERE job_id = ANY(:ids)", ids=job_ids)
            return len(found) == 3 and all(r.status == "succeeded" for r in found)

        eventually(all_ended, 60, "the three jobs succeed")
        history = rows(
            engine,
            f"SELECT a.*, e.job_id FROM {ALL_ATTEMPTS} a JOIN executions e ON e.id = a.execution_id "
            "WHERE e.job_id = ANY(:ids) ORDER BY a.worker_started_at", ids=job_ids,
        )
        [key] = rows(engine, "SELECT * FROM concurrency_keys WHERE name = 'billing-db'")
    assert [a.status for a in history] == ["succeeded"] * 3
    # Each began at its worker after the one before it was recorded ended (see
    # the overlap test above for why not the hand-out instant).
    assert all(a.finished_at <= b.worker_started_at for a, b in zip(history, history[1:])), "two ran at once"
    assert sorted(a.waited_us > 0 for a in history) == [False, True, True]  # two waited, and it shows
    assert (key.max_running, key.running) == (1, 0)


# --------------------------------------------------------------------------- 3. cancel across servers


def test_cancel_execution_through_one_server_stops_it_on_a_worker_of_another(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    with ExitStack() as stack:
        holder = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"cx-a-{os.getpid()}")
        other = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"cx-b-{os.getpid()}")
        api_key, credential = tenant_and_credential(holder)
        start_worker(stack, tmp_path, holder.address, credential, "busy")
        wait_worker_connected(holder, "busy")
        job = sleeper("long", 600)
        job.schedule.once_at.FromDatetime(now() + timedelta(seconds=1))
        job_id = create(holder.address, api_key, "long", job)
        # Running and past its send instant: a run started ahead of its
        # instant reads as scheduled until then (architecture, "Never seen early").
        running = eventually(
            lambda: next((r for r in executions_of(engine, job_id)
                          if r.status == "running" and r.handed_out_at <= us(now())), None), 30,
            "the execution runs",
        )
        with scheduler(other.address) as stub:
            reply = stub.CancelExecution(
                scheduler_pb2.CancelExecutionRequest(id=running.id, reason="operator says stop"),
                metadata=auth(api_key), timeout=10,
            )
        assert reply.execution.status == job_pb2.EXECUTION_STATUS_RUNNING  # told, not yet ended
        eventually(lambda: executions_of(engine, job_id)[0].status != "running", 60, "the execution ends")
        [ended] = executions_of(engine, job_id)
        [attempt] = attempt_rows(engine, ended.id)
    assert (ended.status, ended.dead_reason) == ("canceled", "canceled: operator says stop")
    assert (attempt.status, attempt.worker_id) == ("canceled", "busy")
    assert ended.owner is None and ended.cancel_requested_at is None
