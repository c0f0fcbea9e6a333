"""DeleteJob of jobs whose runs are handed out, ready, claimed ahead and
triggered, on a real server and worker over PostgreSQL and etcd (hardening,
session 25; docs/architecture.md, Semantics: "A deleted job's runs").

Every job's target answers 500 after a hold, and its retry policy would
retry it: the runs a worker holds when their jobs are deleted fail after
the delete. Before this, such a failure was retried, the retry was handed
out with no definition (the job gone), the worker had no target and failed
it permanently, and the run ended ``dead``: a dead letter, and an alert,
for a job that no longer exists.

Asserted on the store's rows once every run ended, never on timings: each
run ends in exactly one terminal state, none ``dead``; no dead-letter or
poison alert; no concurrency-key slot and no manual-run unit held.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.conformance.test_manual_quota import slots_hold as manual_slots_hold
from tests.support.faults import (
    RecordingTarget, count, eventually, migrated_store, now, start_server, start_worker, wait_connected,
)

from .test_api_faults import make_tenant

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

SLOTS = 3
READY = 4
AHEAD = 3
TRIGGERS = 3
HOLD = 12.0
"""Seconds a call is held before it fails: the deletes come while the runs hold the worker's slots."""
TERMINAL = ("succeeded", "dead", "canceled")


def runs_of(engine: sa.Engine, job_ids: list[str]) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT id, job_id, status, dead_reason, delivery, attempt FROM executions WHERE job_id = ANY(:ids)"
        ), {"ids": job_ids}).all()  # fmt: skip


def test_deleting_jobs_with_runs_handed_ready_ahead_and_triggered_ends_each_run_once_none_dead(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget(hold=HOLD)
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        server = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"deleted-{os.getpid()}")
        key, credential = make_tenant(server, "acme", max_pending_manual_runs=TRIGGERS)
        meta = (("authorization", f"Bearer {key}"),)
        channel = stack.enter_context(grpc.insecure_channel(server.address))
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)

        def create(name: str, at) -> str:
            """A one-off at ``at`` whose call fails after the hold, retried up
            to 3 attempts, holding a slot of key ``db`` while it runs."""
            job = job_pb2.Job(name=name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=target.url("/holdfail"))),
                              overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW)  # fmt: skip
            job.schedule.once_at.FromDatetime(at)
            job.retry_policy.max_attempts = 3
            job.retry_policy.initial_backoff.FromMilliseconds(100)
            job.retry_policy.max_backoff.FromMilliseconds(300)
            job.concurrency_keys.add(key="db", limit=50)
            request = scheduler_pb2.CreateJobRequest(job=job, request_id=name)
            return stub.CreateJob(request, metadata=meta, timeout=10).job.id

        worker = start_worker(stack, tmp_path, f"ipv4:{server.address}", credential, "deleted-w", slots=SLOTS)
        wait_connected(server, "deleted-w")
        # SLOTS of these run on the worker (each call held HOLD s, then failing);
        # the others stay ready: no slot is free.
        now_jobs = [create(f"now-{index}", now() + timedelta(seconds=1)) for index in range(SLOTS + READY)]
        ahead = [create(f"ahead-{index}", now() + timedelta(seconds=4)) for index in range(AHEAD)]
        manual = create("manual", now() + timedelta(days=1))
        every = now_jobs + ahead + [manual]
        eventually(lambda: sum(run.status == "running" for run in runs_of(engine, every)) == SLOTS, 30,
                   "the worker's slots are full")
        triggered = [stub.TriggerJob(scheduler_pb2.TriggerJobRequest(id=manual, request_id=f"t{index}"),
                                     metadata=meta, timeout=10).execution.id for index in range(TRIGGERS)]  # fmt: skip
        eventually(lambda: len(runs_of(engine, ahead)) == AHEAD, 30, "the later runs are claimed")
        before = {run.id: run.status for run in runs_of(engine, every)}
        assert sum(status == "running" for status in before.values()) == SLOTS, before
        assert sum(status == "scheduled" for status in before.values()) >= READY + TRIGGERS, before
        for job in every:
            stub.DeleteJob(scheduler_pb2.DeleteJobRequest(id=job), metadata=meta, timeout=10)

        eventually(lambda: all(run.status in TERMINAL for run in runs_of(engine, every)), 60, "every run ends")
        # What ended must stay ended: a run put back (or retried) and handed out
        # with no target would end again, dead, moments later.
        eventually(lambda: len(target.calls) >= SLOTS and all(call.ended for call in target.calls), 30,
                   "the calls under way end")
        eventually(lambda: worker.poll() is None and count(engine, "SELECT count(*) FROM executions "
                                                                 "WHERE status IN ('scheduled', 'running')") == 0,
                   30, "nothing left to run")
        runs = runs_of(engine, every)
        assert sorted(before) == sorted(run.id for run in runs), "a run appeared or vanished"
        assert set(triggered) <= {run.id for run in runs}
        assert [run for run in runs if run.status != "canceled"] == [], "a deleted job's run did not end canceled"
        assert {run.dead_reason for run in runs} == {"canceled: job deleted"}
        ran = [run for run in runs if before[run.id] == "running"]
        assert len(ran) == SLOTS and all(run.attempt == 1 for run in ran), ran  # ended where it failed: no retry
        with engine.connect() as conn:
            alerts = conn.execute(sa.text("SELECT kind, execution_id FROM alerts WHERE tenant = 'acme' "
                                          "AND kind IN ('dead_letter', 'poison')")).all()
            failed = conn.execute(sa.text(
                "SELECT a.status FROM attempts AS a WHERE a.execution_id = ANY(:ids)"), {"ids": [r.id for r in ran]}
            ).scalars().all()  # fmt: skip
            slots = conn.execute(sa.text("SELECT coalesce(sum(running), 0) FROM concurrency_keys "
                                         "WHERE tenant = 'acme'")).scalar()
        assert alerts == [], alerts
        assert failed == ["failed"] * SLOTS, "each run that ran keeps its failed attempt"
        assert slots == 0, "a key slot is held by a run that ended"
        assert manual_slots_hold(engine, "acme") == 0, "a manual-run unit is held by a run that ended"
        assert server.process.poll() is None, server.log()
