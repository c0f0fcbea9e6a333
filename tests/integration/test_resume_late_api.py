"""The resume rule through the real gRPC server, its dispatcher and gateway
running, a real worker, on the embedded stores and on PostgreSQL + etcd
(docs/architecture.md, "Job changes": "Resume releases").

An occurrence that came due while its job was paused runs late, once,
never before its instant, when the resume is within the job's misfire
threshold of it, whether the dispatcher claimed it ahead (a held
execution) or not; past the threshold it ends in the resume's one
``job_paused`` skip range, and the next occurrence runs on time. Every
occurrence ends in exactly one terminal state: one execution that
succeeded, or a place in one skip range.

No timing is asserted: the tests wait for instants and check order
(started at or after the due instant, after the resume) and counts.
The cases that wait a minute or more run on both backends at once
(``on_each_backend``): the minutes are waited once, not once a backend.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest
from tickwheel.v1 import calendar_pb2, execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.server import Running, on_each_backend
from tests.support.workers import builtin_handlers, running_worker

WAIT = 30.0
MINUTE = timedelta(minutes=1)


def _job(name: str, threshold: timedelta) -> job_pb2.Job:
    job = job_pb2.Job(
        name=name, target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
        misfire_policy=job_pb2.MISFIRE_POLICY_SKIP,
    )
    job.misfire_threshold.FromTimedelta(threshold)
    job.jitter.exact = True
    return job


def _once(name: str, at: datetime, threshold: timedelta) -> job_pb2.Job:
    job = _job(name, threshold)
    job.schedule.once_at.FromDatetime(at)
    return job


def _minutely(name: str, threshold: timedelta) -> job_pb2.Job:
    job = _job(name, threshold)
    job.schedule.cron.expression = "* * * * *"
    job.schedule.cron.time_zone = "UTC"
    return job


def _at(stamp) -> datetime:
    return stamp.ToDatetime(tzinfo=timezone.utc)


async def _sleep_until(at: datetime) -> None:
    await asyncio.sleep(max(0.0, (at - datetime.now(timezone.utc)).total_seconds()))


class Api:
    def __init__(self, channel, key: str) -> None:
        self.scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        self.meta = (("authorization", f"Bearer {key}"),)

    async def create(self, job: job_pb2.Job, request_id: str) -> job_pb2.Job:
        return (await self.scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=job, request_id=request_id), metadata=self.meta
        )).job  # fmt: skip

    async def pause(self, job_id: str) -> scheduler_pb2.PauseJobResponse:
        request = scheduler_pb2.PauseJobRequest(id=job_id, reason="test")
        return await self.scheduler.PauseJob(request, metadata=self.meta)

    async def resume(self, job_id: str) -> scheduler_pb2.ResumeJobResponse:
        return await self.scheduler.ResumeJob(scheduler_pb2.ResumeJobRequest(id=job_id), metadata=self.meta)

    async def history(self, job_id: str) -> tuple[list[execution_pb2.Execution], list[execution_pb2.SkipRange]]:
        reply = await self.scheduler.ListExecutions(
            scheduler_pb2.ListExecutionsRequest(job_id=job_id, page_size=500), metadata=self.meta
        )
        assert not reply.next_page_token
        return list(reply.executions), list(reply.skips)

    async def claimed(self, job_id: str) -> list[execution_pb2.Execution]:
        """The executions of ``job_id`` once there is one (polled)."""
        deadline = asyncio.get_running_loop().time() + WAIT
        while not (found := (await self.history(job_id))[0]):
            assert asyncio.get_running_loop().time() < deadline, f"no run of {job_id} was created"
            await asyncio.sleep(0.05)
        return found

    async def succeeded(self, job_id: str, nominal: datetime) -> execution_pb2.Execution:
        """The execution of ``job_id`` at ``nominal`` once it succeeded (polled as a user would)."""
        ahead = max(0.0, (nominal - datetime.now(timezone.utc)).total_seconds())
        deadline = asyncio.get_running_loop().time() + WAIT + ahead
        found: list = []
        while asyncio.get_running_loop().time() < deadline:
            found, _ = await self.history(job_id)
            done = [
                e for e in found if _at(e.nominal_at) == nominal and e.status == job_pb2.EXECUTION_STATUS_SUCCEEDED
            ]
            if done:
                return done[0]
            await asyncio.sleep(0.1)
        raise AssertionError(f"the run of {job_id} at {nominal} did not succeed: {found}")


def one_terminal_state_each(
    occurrences: list[datetime], executions: list[execution_pb2.Execution], skips: list[execution_pb2.SkipRange]
) -> dict[datetime, str]:
    """Each occurrence's one terminal state ("succeeded" or the skip
    reason); fails when one has none, or more than one."""
    states: dict[datetime, list[str]] = {at: [] for at in occurrences}
    for execution in executions:
        at = _at(execution.nominal_at)
        if at in states:
            assert execution.status == job_pb2.EXECUTION_STATUS_SUCCEEDED, execution
            states[at].append("succeeded")
    for skip in skips:
        for at in states:
            if _at(skip.from_at) <= at <= _at(skip.to_at):
                states[at].append(execution_pb2.SkipReason.Name(skip.reason))
    assert all(len(found) == 1 for found in states.values()), states
    return {at: found[0] for at, found in states.items()}


async def test_a_held_one_off_resumed_within_its_threshold_runs_once_late(server) -> None:
    """Claimed ahead and held by a pause before its instant; resumed after
    it, within the threshold: released, run once, after the resume. The
    worker connects only after the pause, so nothing can take the run
    before it is held."""
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    async with grpc.aio.insecure_channel(server.address) as channel:
        api = Api(channel, key)
        due = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=0)
        job = await api.create(_once("held", due, timedelta(seconds=60)), "r1")
        await api.claimed(job.id)  # by the dispatcher, in its look-ahead
        assert (await api.pause(job.id)).held_executions == 1
        await _sleep_until(due + timedelta(seconds=1))
        resumed_at = datetime.now(timezone.utc)
        resumed = await api.resume(job.id)
        assert resumed.released_executions == 1 and not resumed.HasField("skipped")
        async with running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=4):
            execution = await api.succeeded(job.id, due)
        [attempt] = execution.attempts
        assert _at(attempt.started_at) >= resumed_at > due, "late, never early"
        executions, skips = await api.history(job.id)
        assert one_terminal_state_each([due], executions, skips) == {due: "succeeded"}
        assert len(executions) == 1 and not skips


async def test_a_held_one_off_resumed_past_its_threshold_is_one_paused_skip(server) -> None:
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    async with grpc.aio.insecure_channel(server.address) as channel:
        api = Api(channel, key)
        due = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=0)
        job = await api.create(_once("expired", due, timedelta(seconds=1)), "r1")
        await api.claimed(job.id)
        assert (await api.pause(job.id)).held_executions == 1
        await _sleep_until(due + timedelta(seconds=2))
        resumed = await api.resume(job.id)
        assert resumed.released_executions == 0 and resumed.job.state == job_pb2.JOB_STATE_COMPLETED
        skip = resumed.skipped
        assert (skip.reason, _at(skip.from_at), _at(skip.to_at), skip.count) == (
            execution_pb2.SKIP_REASON_JOB_PAUSED, due, due, 1
        )
        async with running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=4):
            # A gateway round with the worker connected finds nothing to hand out.
            gateway = server.server.gateway
            rounds = gateway.rounds_run
            while gateway.rounds_run < rounds + 3:
                gateway.wake()
                await asyncio.wait_for(gateway.round_done.wait(), WAIT)
        executions, skips = await api.history(job.id)
        assert not executions
        assert one_terminal_state_each([due], executions, skips) == {due: "SKIP_REASON_JOB_PAUSED"}


@pytest.mark.postgres
@pytest.mark.etcd  # its second case runs on PostgreSQL + etcd (marked as in BACKENDS)
async def test_a_paused_minutely_job_skips_the_expired_runs_the_late_one_then_the_next_on_time(
    servers_on_each_backend,
) -> None:
    await on_each_backend(servers_on_each_backend, _paused_minutely_job)


async def _paused_minutely_job(server: Running) -> None:
    """Every minute, threshold 30 s, paused at least 5 s before its next
    occurrence N1 (claimed ahead and held, or not yet: either way it
    expires) and so more than the 60 s look-ahead before N2 (never claimed
    while paused); resumed 3 s after N2: N1 is the ``job_paused`` range, N2
    runs late once (after the resume), N3 runs on time (not missed: the
    policy would skip it)."""
    key = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], http=True)
    threshold = timedelta(seconds=30)
    async with grpc.aio.insecure_channel(server.address) as channel:
        api = Api(channel, key)
        now = datetime.now(timezone.utc)
        n1 = now.replace(second=0, microsecond=0) + MINUTE
        if n1 - now < timedelta(seconds=10):
            await _sleep_until(n1)
            n1 += MINUTE
        n2, n3 = n1 + MINUTE, n1 + 2 * MINUTE
        job = await api.create(_minutely("minutely", threshold), "r1")
        paused = await api.pause(job.id)
        assert datetime.now(timezone.utc) < n1, "paused before N1 (the test's own premise)"
        assert paused.held_executions in (0, 1)  # N1 claimed ahead or not: both expire
        # The worker connects after the pause: nothing can have run N1 before it.
        async with running_worker(server.address, credential, builtin_handlers(), worker_id="w1", slots=4):
            await _sleep_until(n2 + timedelta(seconds=3))
            resumed_at = datetime.now(timezone.utc)
            resumed = await api.resume(job.id)
            assert resumed_at - n2 <= threshold, "resumed within N2's threshold (the test's own premise)"
            skip = resumed.skipped
            assert (skip.reason, _at(skip.from_at), _at(skip.to_at), skip.count) == (
                execution_pb2.SKIP_REASON_JOB_PAUSED, n1, n1, 1
            )
            assert _at(resumed.job.next_run_at) == n2
            late = await api.succeeded(job.id, n2)
            assert _at(late.attempts[0].started_at) >= resumed_at > n2, "late, never early"
            on_time = await api.succeeded(job.id, n3)
            assert _at(on_time.attempts[0].started_at) >= n3 and on_time.missed_count == 1
            await api.pause(job.id)  # N4 and later held, not part of the audit
        executions, skips = await api.history(job.id)
        states = one_terminal_state_each([n1, n2, n3], executions, skips)
        assert states == {n1: "SKIP_REASON_JOB_PAUSED", n2: "succeeded", n3: "succeeded"}
        assert [e for e in executions if _at(e.nominal_at) < n1] == []
        assert len([e for e in executions if _at(e.nominal_at) in (n2, n3)]) == 2  # each once


@pytest.mark.postgres
@pytest.mark.etcd  # its second case runs on PostgreSQL + etcd (marked as in BACKENDS)
async def test_a_calendar_job_resumed_after_its_nominal_instant_runs_at_its_moved_one(
    servers_on_each_backend,
) -> None:
    await on_each_backend(servers_on_each_backend, _calendar_job_resumed_late)


async def _calendar_job_resumed_late(server: Running) -> None:
    """A one-off at N (more than the look-ahead away: never claimed while
    paused) on a holiday of its calendar, so due a day later (``next``);
    paused at once, resumed after N plus its 1 s threshold: the claim
    creates its run, due at the moved instant (the ResumeJob read the
    calendar). It was a ``job_paused`` skip, a day before it was due."""
    key = await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        api = Api(channel, key)
        nominal = (datetime.now(timezone.utc) + timedelta(seconds=75)).replace(microsecond=0)
        moved = nominal + timedelta(days=1)
        await api.scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(
                name="days", time_zone="UTC", business_days=[1, 2, 3, 4, 5, 6, 7],
                holidays=[nominal.date().isoformat()],
            ),
            request_id="cal-1",
        ), metadata=api.meta)  # fmt: skip
        job = _once("moved", nominal, timedelta(seconds=1))
        job.calendar.name, job.calendar.rule = "days", job_pb2.CALENDAR_RULE_NEXT
        created = await api.create(job, "r1")
        assert (await api.pause(created.id)).held_executions == 0
        assert datetime.now(timezone.utc) < nominal - timedelta(seconds=60), "paused before the claim reached it"
        await _sleep_until(nominal + timedelta(seconds=3))
        resumed = await api.resume(created.id)
        assert not resumed.HasField("skipped") and _at(resumed.job.next_run_at) == nominal
        [execution] = await api.claimed(created.id)
        assert (_at(execution.nominal_at), _at(execution.due_at)) == (nominal, moved)
        assert execution.status == job_pb2.EXECUTION_STATUS_SCHEDULED and not execution.attempts
        assert not (await api.history(created.id))[1]  # no skip range
