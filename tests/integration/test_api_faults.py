"""The job API under faults: calls in flight when a server is SIGKILLed or
PostgreSQL restarts, retried by their clients with the same request ids
(hardening, session 24).

Real `tickwheel server` and `tickwheel worker` processes on the test's
PostgreSQL and etcd. The other fault tests (test_dispatch_faults.py,
test_fault_outages.py, test_chaos.py, …) audit what the dispatch does with
jobs created before the fault; these audit the writes the fault cut:

1. BatchCreateJobs and CreateJob from several clients while a server is
   SIGKILLed (the clients move to the other server) or PostgreSQL restarts
   (the clients retry on the same one): every requested job exists exactly
   once, under the job its request id answers; nothing is half-created (a
   job without its cursor or a cursor without its job); the tenant's
   max-jobs slots count exactly its jobs (docs/architecture.md, "Job writes
   at scale"), and its quota, set to exactly what the clients ask for,
   refuses none of them.
2. TriggerJob, BackfillJob and ReplayDeadLetter from several clients while
   the server the only worker is connected to is SIGKILLed, and the worker
   too (its runs requeued, to another worker): each manual run
   is one execution that ends in one terminal state, and when all have
   ended the manual-run slots hold no unit (docs/architecture.md, "Manual
   runs under a quota": a unit leaked or given back twice shows).
3. PauseJob, ResumeJob and DeleteJob of jobs whose runs are running on a
   worker that is then SIGKILLed, and then the server it was connected to:
   each run ends once; a deleted job's run is canceled (it ended dead,
   "failed permanently", before the requeue learnt of deleted jobs).

The assertions are on the store's rows after the fault, never on timings;
every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.conformance.test_job_writes import slots_hold as job_slots_hold
from tests.conformance.test_manual_quota import slots_hold as manual_slots_hold
from tests.support.faults import (
    RecordingTarget, count, eventually, migrated_store, now, start_server, start_worker, wait_connected,
)
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

TERMINAL = ("succeeded", "failed", "dead", "canceled")


def make_tenant(server: ServerProcess, name: str, *, max_jobs: int = 0, max_pending_manual_runs: int = 0) -> tuple[str, str]:
    """A tenant with room for a burst of calls; its API key and a worker credential (HTTP targets)."""
    meta = (("authorization", f"Bearer {server.admin_token}"),)
    quotas = admin_pb2.TenantQuotas(max_jobs=max_jobs, requests_per_second=5000,
                                    max_pending_manual_runs=max_pending_manual_runs)  # fmt: skip
    with grpc.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        key = admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=name, quotas=quotas)),
                                 metadata=meta, timeout=10).api_key.secret  # fmt: skip
        credential = admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=[name], http=True), metadata=meta, timeout=10
        ).credential.secret
    return key, credential


class Client:
    """Calls one SchedulerService method on the first server in ``servers``
    that answers, the same request each try (so the same request ids), until
    one answers OK or ``patience`` seconds pass. Counts the tries refused."""

    def __init__(self, servers: Callable[[], list[ServerProcess]], api_key: str, patience: float = 60.0) -> None:
        self.servers, self.patience = servers, patience
        self.meta = (("authorization", f"Bearer {api_key}"),)
        self.refused: list[grpc.StatusCode] = []

    def _try(self, server: ServerProcess, method: str, request):
        with grpc.insecure_channel(server.address) as channel:
            return getattr(scheduler_pb2_grpc.SchedulerServiceStub(channel), method)(
                request, metadata=self.meta, timeout=10)

    def call(self, method: str, request):
        deadline = time.monotonic() + self.patience
        while True:
            for server in self.servers():
                if server.process.poll() is not None:
                    continue
                try:
                    return self._try(server, method, request)
                except grpc.RpcError as exc:
                    self.refused.append(exc.code())
                    last = exc
            if time.monotonic() >= deadline:
                raise AssertionError(f"{method} not answered within {self.patience:.0f} s: {last!r}")
            time.sleep(0.1)  # every server refused: try again as the fault ends


def run_all(work: list[Callable[[], None]]) -> Callable[[], None]:
    """Start each of ``work`` on a thread of its own; the returned join
    re-raises the first failure."""
    failures: list[BaseException] = []

    def guarded(item: Callable[[], None]) -> None:
        try:
            item()
        except BaseException as exc:  # noqa: BLE001 (handed to the test's thread)
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(item,), daemon=True) for item in work]
    for thread in threads:
        thread.start()

    def join() -> None:
        """Wait for every thread; re-raise the first failure."""
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads), "a client never finished"
        if failures:
            raise failures[0]

    join.failures = failures  # type: ignore[attr-defined]  (a client's failure ends the test's waits early)
    return join


@contextlib.contextmanager
def two_servers(tmp_path: Path, postgres_url: str, etcd_endpoint: str, tag: str, *,
                hold: float = 1.0) -> Iterator[tuple[ExitStack, sa.Engine, RecordingTarget, ServerProcess, ServerProcess]]:
    """Servers a and b on the test's store, and a target holding ``/hold`` calls ``hold`` s; all stopped after."""
    target = RecordingTarget(hold=hold)
    with ExitStack() as stack, migrated_store(postgres_url) as engine:
        stack.callback(target.close)
        a = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"{tag}-a-{os.getpid()}")
        b = start_server(stack, tmp_path, postgres_url, etcd_endpoint, f"{tag}-b-{os.getpid()}")
        yield stack, engine, target, a, b


# --------------------------------------------------------------------------- 1. job creates


BATCH_CLIENTS, BATCHES, BATCH_SIZE = 3, 5, 120
SINGLE_CLIENTS, SINGLES = 3, 40
REQUESTED = BATCH_CLIENTS * BATCHES * BATCH_SIZE + SINGLE_CLIENTS * SINGLES


def once_item(request_id: str, url: str) -> scheduler_pb2.CreateJobRequest:
    job = job_pb2.Job(name=request_id, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
    job.schedule.once_at.FromDatetime(now() + timedelta(days=1))  # nothing runs: only the writes are audited
    return scheduler_pb2.CreateJobRequest(job=job, request_id=request_id)


def create_work(client: Client, answered: dict[str, str]) -> list[Callable[[], None]]:
    """The clients' calls: batches and single creates, each request id answered into ``answered``."""
    url = "http://127.0.0.1:9/unused"

    def batches(number: int) -> None:
        for batch in range(BATCHES):
            ids = [f"b{number}-{batch}-{item}" for item in range(BATCH_SIZE)]
            reply = client.call("BatchCreateJobs", scheduler_pb2.BatchCreateJobsRequest(
                items=[once_item(request_id, url) for request_id in ids], view=scheduler_pb2.JOB_VIEW_BASIC))
            for request_id, result in zip(ids, reply.results, strict=True):
                assert result.WhichOneof("result") == "job", f"{request_id}: {result.error}"
                answered[request_id] = result.job.job.id

    def singles(number: int) -> None:
        for index in range(SINGLES):
            request_id = f"s{number}-{index}"
            answered[request_id] = client.call("CreateJob", once_item(request_id, url)).job.id

    return ([lambda n=n: batches(n) for n in range(BATCH_CLIENTS)]
            + [lambda n=n: singles(n) for n in range(SINGLE_CLIENTS)])  # fmt: skip


def assert_created_once(engine: sa.Engine, tenant: str, answered: dict[str, str]) -> None:
    assert len(answered) == REQUESTED
    assert len(set(answered.values())) == REQUESTED, "two request ids answered with one job"
    with engine.connect() as conn:
        jobs = {row[0] for row in conn.execute(sa.text("SELECT id FROM jobs WHERE tenant = :t"), {"t": tenant})}
        cursors = {row[0] for row in conn.execute(sa.text("SELECT job_id FROM job_cursors WHERE tenant = :t"),
                                                  {"t": tenant})}  # fmt: skip
        requests = conn.execute(sa.text("SELECT count(*) FROM request_ids WHERE tenant = :t"), {"t": tenant}).scalar()
    assert jobs == set(answered.values()), (
        f"{len(jobs - set(answered.values()))} jobs no request id answers, "
        f"{len(set(answered.values()) - jobs)} answered jobs missing"
    )
    assert cursors == jobs, f"{len(jobs - cursors)} jobs without a cursor, {len(cursors - jobs)} cursors without a job"
    assert requests == REQUESTED
    job_slots_hold(engine, tenant)


@pytest.mark.parametrize("fault", ["server_sigkill", "postgres_restart"])
def test_creates_in_flight_across_a_fault_create_each_job_once_and_count_it(
    fault: str, tmp_path: Path, postgres_url: str, postgres_server: PostgresServer, etcd_endpoint: str
) -> None:
    with two_servers(tmp_path, postgres_url, etcd_endpoint, "create") as (_, engine, _, a, b):
        # The quota is exactly what the clients ask for: a unit counted twice
        # (or a job of a cut call counted and then created again) refuses one.
        key, _ = make_tenant(a, "acme", max_jobs=REQUESTED)
        client = Client(lambda: [a, b], key)
        answered: dict[str, str] = {}
        join = run_all(create_work(client, answered))
        tenant_jobs = "SELECT count(*) FROM jobs WHERE tenant = 'acme'"
        eventually(lambda: join.failures or count(engine, tenant_jobs) >= REQUESTED // 5, 60, "the creates are under way")
        assert not join.failures, join.failures
        if fault == "server_sigkill":
            a.kill()
        else:
            postgres_server.stop(mode="fast")  # see test_fault_outages.py for why not immediate
            eventually(lambda: len(client.refused) >= 3, 30, "calls are refused while the store is down")
            postgres_server.start()  # forked while the clients' calls are under way
            engine.dispose()
        join()
        assert client.refused, "no call met the fault: nothing was in flight"
        assert_created_once(engine, "acme", answered)
        assert b.process.poll() is None, b.log()


# --------------------------------------------------------------------------- 2. manual runs


TRIGGER_CLIENTS, TRIGGERS = 3, 8
BACKFILL_HOURS = 8
DEAD = 6


def manual_runs(engine: sa.Engine, tenant: str) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT id, origin, status, delivery FROM executions WHERE tenant = :t"
            " AND (origin IN ('trigger', 'backfill') OR manual_slot IS NOT NULL)"), {"t": tenant}).all()  # fmt: skip


def test_manual_runs_racing_a_server_sigkill_end_once_and_give_every_unit_back(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    with two_servers(tmp_path, postgres_url, etcd_endpoint, "manual") as (stack, engine, target, a, b):
        limit = TRIGGER_CLIENTS * TRIGGERS + BACKFILL_HOURS + DEAD
        key, credential = make_tenant(a, "acme", max_pending_manual_runs=limit)
        client = Client(lambda: [a, b], key)

        def job(name: str, url: str) -> job_pb2.Job:
            return job_pb2.Job(name=name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
                               overlap_policy=job_pb2.OVERLAP_POLICY_ALLOW)  # fmt: skip

        held = job("held", target.url("/hold"))
        held.schedule.once_at.FromDatetime(now() + timedelta(days=1))
        held_id = client.call("CreateJob", scheduler_pb2.CreateJobRequest(job=held, request_id="held")).job.id
        hourly = job("hourly", target.url("/brief"))
        hourly.schedule.cron.expression = "0 * * * *"
        hourly_id = client.call("CreateJob", scheduler_pb2.CreateJobRequest(job=hourly, request_id="hourly")).job.id
        failing = job("failing", target.url("/fail"))
        failing.schedule.once_at.FromDatetime(now() + timedelta(days=1))
        failing.retry_policy.max_attempts = 1
        failing_id = client.call("CreateJob", scheduler_pb2.CreateJobRequest(job=failing, request_id="failing")).job.id

        # The worker prefers a (b is its second address), so a hands out and a's death cuts hand-outs and results.
        doomed = start_worker(stack, tmp_path, f"ipv4:{a.address},{b.address}", credential, "manual-w", slots=6)
        wait_connected(a, "manual-w")
        dead = [client.call("TriggerJob", scheduler_pb2.TriggerJobRequest(id=failing_id, request_id=f"f{i}")).execution.id
                for i in range(DEAD)]  # fmt: skip
        eventually(lambda: count(engine, "SELECT count(*) FROM executions WHERE status = 'dead'") == DEAD, 60,
                   "the failing runs are dead letters")

        triggered: dict[str, str] = {}

        def triggers(number: int) -> None:
            for index in range(TRIGGERS):
                request_id = f"t{number}-{index}"
                reply = client.call("TriggerJob", scheduler_pb2.TriggerJobRequest(id=held_id, request_id=request_id))
                triggered[request_id] = reply.execution.id

        def backfill() -> None:
            to_at = now().replace(minute=0, second=0, microsecond=0)
            request = scheduler_pb2.BackfillJobRequest(id=hourly_id, allow_overlap=True)
            request.from_at.FromDatetime(to_at - timedelta(hours=BACKFILL_HOURS))
            request.to_at.FromDatetime(to_at)
            eventually(lambda: count(engine, "SELECT count(*) FROM executions WHERE status = 'running'") >= 2, 30,
                       "triggered runs are running")
            client.call("BackfillJob", request)

        def replays() -> None:
            eventually(lambda: count(engine, "SELECT count(*) FROM executions WHERE status = 'running'") >= 2, 30,
                       "triggered runs are running")
            for execution in dead:
                client.call("ReplayDeadLetter", scheduler_pb2.ReplayDeadLetterRequest(execution_id=execution))

        join = run_all([lambda n=n: triggers(n) for n in range(TRIGGER_CLIENTS)] + [backfill, replays])
        eventually(lambda: count(engine, "SELECT count(*) FROM executions WHERE status = 'running'") >= 3, 30,
                   "the runs are under way")
        a.kill()
        doomed.kill()  # its runs are requeued: each takes its unit back until it starts again
        doomed.wait(10)
        start_worker(stack, tmp_path, f"ipv4:{b.address}", credential, "heir-w", slots=6)
        join()

        def ended() -> bool:
            runs = manual_runs(engine, "acme")
            return runs and all(run.status in TERMINAL for run in runs)

        eventually(ended, 90, "every manual run ends")
        runs = manual_runs(engine, "acme")
        by_origin: dict[str, int] = {}
        for run in runs:
            by_origin[run.origin] = by_origin.get(run.origin, 0) + 1
        assert by_origin.get("trigger", 0) == TRIGGER_CLIENTS * TRIGGERS + DEAD, by_origin
        assert by_origin.get("backfill", 0) == BACKFILL_HOURS, by_origin
        assert len(set(triggered.values())) == TRIGGER_CLIENTS * TRIGGERS
        statuses = {run.id: run.status for run in runs}
        assert all(statuses[execution] == "succeeded" for execution in triggered.values()), statuses
        assert all(statuses[execution] == "dead" for execution in dead)
        requeued = sum(run.delivery - 1 for run in runs)
        assert requeued, "no manual run was requeued: the take-back was not exercised"
        assert manual_slots_hold(engine, "acme", requeued_past=requeued) == 0, "units held by runs that ended"
        assert b.process.poll() is None, b.log()


# --------------------------------------------------------------------------- 3. job changes


EACH = 3


def executions_of(engine: sa.Engine, job_ids: list[str]) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.text("id, job_id, status, delivery, dead_reason, error")).select_from(
            sa.text("executions")).where(sa.text("job_id = ANY(:ids)")), {"ids": job_ids}).all()  # fmt: skip


def test_jobs_paused_resumed_or_deleted_while_running_on_a_killed_worker_end_each_run_once(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    """PauseJob, ResumeJob and DeleteJob of jobs whose executions run on a
    worker that is then SIGKILLed, and then the server it was connected to:
    a deleted job's run ends once (run again or canceled, never left
    waiting); a paused one waits for ResumeJob and then ends succeeded once;
    one paused and resumed before the kill ends succeeded once."""
    with two_servers(tmp_path, postgres_url, etcd_endpoint, "change", hold=4.0) as (stack, engine, target, a, b):
        key, credential = make_tenant(a, "acme")
        client = Client(lambda: [a, b], key)
        doomed = start_worker(stack, tmp_path, f"ipv4:{a.address},{b.address}", credential, "doomed-w", slots=12)
        wait_connected(a, "doomed-w")
        due = now() + timedelta(seconds=1.5)
        ids: dict[str, list[str]] = {}
        for kind in ("paused", "deleted", "resumed"):
            for index in range(EACH):
                spec = job_pb2.Job(name=f"{kind}-{index}", target=job_pb2.Target(http=job_pb2.HttpTarget(url=target.url("/hold"))))
                spec.schedule.once_at.FromDatetime(due)
                request = scheduler_pb2.CreateJobRequest(job=spec, request_id=f"{kind}-{index}")
                ids.setdefault(kind, []).append(client.call("CreateJob", request).job.id)
        every = [job for jobs in ids.values() for job in jobs]
        eventually(lambda: sum(run.status == "running" for run in executions_of(engine, every)) == len(every), 30,
                   "every run is running on the doomed worker")
        for job in ids["paused"] + ids["resumed"]:
            client.call("PauseJob", scheduler_pb2.PauseJobRequest(id=job))
        for job in ids["resumed"]:
            client.call("ResumeJob", scheduler_pb2.ResumeJobRequest(id=job))
        for job in ids["deleted"]:
            client.call("DeleteJob", scheduler_pb2.DeleteJobRequest(id=job))
        doomed.kill()
        doomed.wait(10)
        start_worker(stack, tmp_path, f"ipv4:{b.address}", credential, "heir-w", slots=12)
        a.kill()

        settled = ids["deleted"] + ids["resumed"]
        eventually(lambda: all(run.status in TERMINAL for run in executions_of(engine, settled)), 60,
                   "the deleted and resumed jobs' runs end")
        eventually(lambda: all(run.status in TERMINAL + ("waiting",) for run in executions_of(engine, ids["paused"])),
                   60, "the paused jobs' runs end or wait")
        for job in ids["paused"]:
            client.call("ResumeJob", scheduler_pb2.ResumeJobRequest(id=job))
        eventually(lambda: all(run.status in TERMINAL for run in executions_of(engine, every)), 60, "every run ends")
        runs = executions_of(engine, every)
        assert sorted(run.job_id for run in runs) == sorted(every), "a job has no run or two"
        kind_of = {job: kind for kind, jobs in ids.items() for job in jobs}
        assert [(kind_of[run.job_id], *run) for run in runs if run.status not in ("succeeded", "canceled")] == []
        for run in runs:
            if run.job_id in ids["deleted"]:
                assert run.status in ("succeeded", "canceled"), run
            else:
                assert run.status == "succeeded", run
        assert b.process.poll() is None, b.log()
