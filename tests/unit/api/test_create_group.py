"""CreateJob's group writer (api/scheduler.py: _write_group): each call's
job is validated at the instant its call arrived, however long it waited
for its group, and a refused call answers alone while the others of its
group are stored and answered."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from tickwheel.v1 import job_pb2, scheduler_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel_server.api import scheduler
from tickwheel_server.api.decoding import Serialized
from tickwheel_server.errors import InvalidArgument
from tickwheel_server.store.jobcreate import CREATED

FIRE = datetime(2027, 3, 1, 3, 0, tzinfo=timezone.utc)


class Jobs:
    """What the group writer uses of a JobStore: every job created."""

    partition_count = 16

    def __init__(self, clock: FakeClock) -> None:
        self.engine = sa.create_engine("sqlite://")
        self.clock = clock
        self.batches = []

    async def create_batch(self, batch):
        self.batches.append(batch)
        return [CREATED] * len(batch), self.clock.now()


def daily_at_three(name: str) -> job_pb2.Job:
    return job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 3 * * *", time_zone="UTC")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="report")),
    )


async def test_a_call_queued_past_a_fire_keeps_the_fire_after_its_own_arrival() -> None:
    clock = FakeClock(FIRE + timedelta(milliseconds=100))  # the group is written after 03:00
    jobs = Jobs(clock)
    servicer = scheduler.SchedulerServicer(None, jobs, clock)
    early = scheduler._Pending("acme", daily_at_three("early"), FIRE - timedelta(milliseconds=100))
    late = scheduler._Pending("acme", daily_at_three("late"), FIRE + timedelta(milliseconds=50))
    bad = job_pb2.Job(name="bad", target=daily_at_three("x").target)  # no schedule
    refused = scheduler._Pending("acme", bad, FIRE)
    answers = await servicer._write_group("acme", [(early, "e"), (refused, "r"), (late, "l")])
    assert isinstance(answers[1], InvalidArgument)
    first, third = (scheduler_pb2.CreateJobResponse.FromString(a.data) for a in (answers[0], answers[2]))
    assert isinstance(answers[0], Serialized) and first.created and third.created
    assert first.job.next_run_at.ToDatetime(tzinfo=timezone.utc) == FIRE, "the fire after the call's arrival"
    assert third.job.next_run_at.ToDatetime(tzinfo=timezone.utc) == FIRE + timedelta(days=1)
    assert [list(b.request_ids) for b in jobs.batches] == [["e", "l"]], "one write, the refused call not in it"


async def test_an_unexpected_error_validating_one_call_fails_that_call_alone(monkeypatch) -> None:
    """Whatever validating a call's job raises (here a stand-in for a
    validator's bug: not a domain error) is that call's answer; the
    group's other calls are stored and answered."""
    clock = FakeClock(FIRE - timedelta(hours=1))
    jobs = Jobs(clock)
    servicer = scheduler.SchedulerServicer(None, jobs, clock)
    checked = scheduler.validate.new_definition

    def new_definition(job, *args, **kwargs):
        if job.name == "boom":
            raise OverflowError("date value out of range")
        return checked(job, *args, **kwargs)

    monkeypatch.setattr(scheduler.validate, "new_definition", new_definition)
    calls = [(scheduler._Pending("acme", daily_at_three(name), clock.now()), name) for name in ("a", "boom", "c")]
    answers = await servicer._write_group("acme", calls)
    assert isinstance(answers[1], OverflowError)
    assert all(scheduler_pb2.CreateJobResponse.FromString(answers[i].data).created for i in (0, 2))
    assert [list(b.request_ids) for b in jobs.batches] == [["a", "c"]], "one write, the failed call not in it"
