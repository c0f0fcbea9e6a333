"""CreateJob group commit (coalescer.py) with a fake store driven by
asyncio events: a lone call is written at once, calls that arrive during a
write go together in the next, each gets its own outcome, a failed write
fails its group only, a caller that goes away leaves nothing behind, the
queue is bounded, a repeated request id never shares a write, and the
callers of a write of several are gathered into the next (queued or not)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import grpc
import pytest

from tickwheel_server.api.status import status_for
from tickwheel_server.coalescer import CALL_RETURN_S, GATHER_MAX_S, CreateCoalescer, plan_group
from tickwheel_server.errors import NotFound, QuotaExceeded, RateLimited
from tickwheel_server.store.errors import StoreUnavailableError
from tickwheel_server.store.jobrecords import JobRecord, NewJob

AT = datetime(2026, 12, 5, 3, 0, tzinfo=timezone.utc)
TIMEOUT = 5


def job(ident: str, tenant: str = "acme", spec: bytes = b"spec") -> NewJob:
    return NewJob(
        id=ident, tenant=tenant, name=ident, spec=spec, time_zone="UTC", next_run_at=AT, next_due_at=AT,
        tzdata_version="2026a", payload_size=0,
    )  # fmt: skip


def record(new: NewJob) -> JobRecord:
    return JobRecord(
        id=new.id, tenant=new.tenant, partition=0, name=new.name, state="active", spec=new.spec, time_zone="UTC",
        next_run_at=AT, next_due_at=AT, run_count=0, tzdata_version="2026a", pause_reason="", version=1,
        created_at=AT, updated_at=AT, paused_at=None,
    )  # fmt: skip


class FakeStore:
    """``create_many`` that records each write and holds it until the test
    releases it; request ids seen before answer their first job (created
    False); an item whose request id is in ``refuse`` gets QuotaExceeded;
    ``fail`` makes the next write raise (nothing recorded)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, list[str]]] = []
        self.release: asyncio.Event = asyncio.Event()
        self.hold = False
        self.fail: Exception | None = None
        self.refuse: set[str] = set()
        self.seen: dict[tuple[str, str], JobRecord] = {}

    async def create_many(self, tenant, items):
        self.writes.append((tenant, [request_id for _, request_id in items]))
        if self.hold:
            await self.release.wait()
            self.release = asyncio.Event()
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error
        outcomes = []
        for new, request_id in items:
            if (tenant, request_id) in self.seen:
                outcomes.append((self.seen[tenant, request_id], False))
            elif request_id in self.refuse:
                outcomes.append(QuotaExceeded(tenant, "max_jobs", 1, "full"))
            else:
                self.seen[tenant, request_id] = record(new)
                outcomes.append((self.seen[tenant, request_id], True))
        return outcomes


async def until(predicate) -> None:
    """Let the loop run until ``predicate()`` holds (bounded by TIMEOUT)."""

    async def spin() -> None:
        while not predicate():
            await asyncio.sleep(0)

    await asyncio.wait_for(spin(), TIMEOUT)


@pytest.mark.parametrize(
    ("queued", "max_items", "max_bytes", "taken"),
    [
        ([], 10, 100, []),
        ([("a", 1), ("b", 1), ("c", 1)], 10, 100, [0, 1, 2]),
        ([("a", 1), ("b", 1), ("c", 1)], 2, 100, [0, 1]),  # the item bound
        ([("a", 60), ("b", 30), ("c", 20)], 10, 100, [0, 1]),  # the bytes bound: c would pass 100
        ([("a", 500), ("b", 1)], 10, 100, [0]),  # the first always goes, however large
        ([("a", 1), ("a", 1), ("b", 1), ("a", 1)], 10, 100, [0, 2]),  # a repeat waits for the next write
        ([("a", 1), ("a", 1), ("b", 1)], 1, 100, [0]),
    ],
)
def test_plan_group(queued, max_items, max_bytes, taken) -> None:
    assert plan_group(queued, max_items=max_items, max_bytes=max_bytes) == taken


async def test_a_lone_call_is_written_at_once_and_the_tenant_forgotten_after() -> None:
    store = FakeStore()
    coalescer = CreateCoalescer(store.create_many)
    created, fresh = await asyncio.wait_for(coalescer.create(job("j1"), "r1"), TIMEOUT)
    assert (created.id, fresh) == ("j1", True)
    assert store.writes == [("acme", ["r1"])]
    assert not coalescer.writing("acme")


async def test_calls_during_a_write_go_together_in_the_next_each_with_its_outcome() -> None:
    store = FakeStore()
    store.hold = True
    store.refuse = {"r3"}
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    later = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in range(1, 5)]
    await until(lambda: coalescer.queued("acme") == 4)
    assert len(store.writes) == 1, "nothing else is written while a write is in flight"
    store.release.set()
    await until(lambda: len(store.writes) == 2)
    assert store.writes[1] == ("acme", ["r1", "r2", "r3", "r4"])
    store.release.set()
    assert (await first)[0].id == "j0"
    results = await asyncio.gather(*later, return_exceptions=True)
    assert [r[0].id if isinstance(r, tuple) else r for r in results[:2]] == ["j1", "j2"]
    assert isinstance(results[2], QuotaExceeded), "an item's error goes to its call alone"
    assert results[3][0].id == "j4" and results[3][1] is True
    # The writer waits for the four callers (at most as long as their write took), then ends.
    await until(lambda: not coalescer.writing("acme"))
    assert len(store.writes) == 2


async def test_a_failed_write_fails_every_call_of_its_group_and_no_other() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    group = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in range(1, 4)]
    await until(lambda: coalescer.queued("acme") == 3)
    store.release.set()
    await until(lambda: len(store.writes) == 2)
    store.fail = StoreUnavailableError("the store went away", attempts=3)
    store.release.set()
    assert (await first)[1] is True
    results = await asyncio.gather(*group, return_exceptions=True)
    assert all(isinstance(r, StoreUnavailableError) for r in results)
    assert all(status_for(r)[0] == grpc.StatusCode.UNAVAILABLE for r in results)
    store.hold = False
    retried = [await coalescer.create(job(f"k{i}"), f"r{i}") for i in range(1, 4)]
    assert [r[1] for r in retried] == [True, True, True], "nothing of the failed group was written"
    assert not coalescer.writing("acme")


async def test_a_caller_gone_while_queued_leaves_nothing_behind() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    gone = asyncio.create_task(coalescer.create(job("j1"), "r1"))
    stays = asyncio.create_task(coalescer.create(job("j2"), "r2"))
    await until(lambda: coalescer.queued("acme") == 2)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert coalescer.queued("acme") == 1
    store.release.set()
    await until(lambda: len(store.writes) == 2)
    assert store.writes[1] == ("acme", ["r2"]), "the call that went away is not written"
    store.release.set()
    assert (await first)[1] and (await stays)[1]
    assert not coalescer.writing("acme")


async def test_a_caller_gone_during_its_write_does_not_break_the_others() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    group = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in range(1, 4)]
    await until(lambda: coalescer.queued("acme") == 3)
    store.release.set()
    await until(lambda: len(store.writes) == 2)
    group[1].cancel()  # its write is in flight: the others still get their answers
    store.release.set()
    await first
    assert (await group[0])[1] and (await group[2])[1]
    with pytest.raises(asyncio.CancelledError):
        await group[1]
    await until(lambda: not coalescer.writing("acme"))  # after the gather for the group's callers
    store.hold = False
    assert (await coalescer.create(job("j9"), "r1"))[1] is False, "its job may be created, as after a commit"


async def test_a_full_queue_refuses_at_once_and_writes_nothing_for_the_refused() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many, max_queued=2, max_queued_bytes=100)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    queued = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in (1, 2)]
    await until(lambda: coalescer.queued("acme") == 2)
    with pytest.raises(RateLimited) as refused:
        await coalescer.create(job("j3"), "r3")
    assert status_for(refused.value)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Another tenant has a queue of its own, and a write in flight beside acme's.
    store.hold = False
    assert (await asyncio.wait_for(coalescer.create(job("b1", "bravo"), "r1"), TIMEOUT))[1] is True
    store.release.set()
    await first
    await asyncio.gather(*queued)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1"], ["r1", "r2"]]
    # Bytes bound the queue too: one large call fills it.
    store.hold = True
    first = asyncio.create_task(coalescer.create(job("j4"), "r4"))
    await until(lambda: len(store.writes) == 4)
    big = asyncio.create_task(coalescer.create(job("j5", spec=b"x" * 90), "r5"))
    await until(lambda: coalescer.queued("acme") == 1)
    with pytest.raises(RateLimited):
        await coalescer.create(job("j6", spec=b"x" * 20), "r6")
    store.hold = False
    store.release.set()
    await first
    await big
    assert ("acme", ["r6"]) not in store.writes and not coalescer.writing("acme")


async def test_a_repeated_request_id_waits_for_the_next_write_and_answers_the_first_job() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    calls = [asyncio.create_task(coalescer.create(job(f"j{i}"), rid)) for i, rid in enumerate(["x", "x", "y", "x"], 1)]
    await until(lambda: coalescer.queued("acme") == 4)
    store.hold = False
    store.release.set()
    await first
    results = await asyncio.gather(*calls)
    assert [ids for _, ids in store.writes] == [["r0"], ["x", "y"], ["x"], ["x"]]
    assert [(r[0].id, r[1]) for r in results] == [("j1", True), ("j1", False), ("j3", True), ("j1", False)]


async def test_a_group_is_bounded_by_items() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many, max_group=2)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    calls = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in range(1, 6)]
    await until(lambda: coalescer.queued("acme") == 5)
    store.hold = False
    store.release.set()
    await first
    await asyncio.gather(*calls)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"], ["r3", "r4"], ["r5"]]


async def test_a_tenant_that_does_not_exist_fails_each_call_as_alone() -> None:
    async def missing(tenant, items):
        raise NotFound("tenant", tenant)

    coalescer = CreateCoalescer(missing)
    with pytest.raises(NotFound):
        await coalescer.create(job("j0", "ghost"), "r0")
    assert not coalescer.writing("ghost")


async def test_a_stopping_writer_answers_every_waiting_call() -> None:
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many)
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    queued = asyncio.create_task(coalescer.create(job("j1"), "r1"))
    await until(lambda: coalescer.queued("acme") == 1)
    writer = coalescer._queues["acme"].writer
    writer.cancel()
    for call in (first, queued):
        with pytest.raises(Exception) as error:
            await asyncio.wait_for(call, TIMEOUT)
        assert status_for(error.value)[0] == grpc.StatusCode.UNAVAILABLE
    assert not coalescer.writing("acme")


class Ticks:
    """A monotonic clock for the writes' durations: ``step`` seconds a read."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.at = 0.0

    def __call__(self) -> float:
        self.at += self.step
        return self.at


async def a_write_of_two(step: float, queued: tuple[int, ...], *, call_return_s: float = 0.0):
    """A coalescer whose writes each take ``step`` seconds (``Ticks``) and
    gather for up to 30 s (``call_return_s`` a caller of the write before
    the gather: 0 leaves the write's duration alone as the bound), its store
    held: r0 written alone, then r1 and r2 together, held; meanwhile the
    calls of ``queued`` (j3, r3, …) queued. (the store, the coalescer, the
    first call, r1's and r2's, the queued)."""
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many, gather_max_s=30, call_return_s=call_return_s, now=Ticks(step))
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    cohort = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in (1, 2)]
    await until(lambda: coalescer.queued("acme") == 2)
    store.release.set()
    await until(lambda: len(store.writes) == 2)
    later = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in queued]
    await until(lambda: coalescer.queued("acme") == len(queued))
    return store, coalescer, first, cohort, later


async def test_the_callers_of_a_write_of_several_share_the_next_with_those_queued() -> None:
    """Callers that each wait for their answer: those of the write that just
    ended come back with their next calls and go in the next write with
    the calls queued meanwhile, rather than in a write of their own."""
    store, coalescer, first, cohort, others = await a_write_of_two(10.0, (3, 4))
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, *cohort), TIMEOUT)
    back = [asyncio.create_task(coalescer.create(job(f"j{i}"), f"r{i}")) for i in (5, 6)]
    await until(lambda: len(store.writes) == 3)
    store.hold = False
    store.release.set()
    await asyncio.wait_for(asyncio.gather(*others, *back), TIMEOUT)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"], ["r3", "r4", "r5", "r6"]]
    # Nothing queued after that write of four: the writer waits for its four callers.
    await until(lambda: coalescer._queues["acme"].gather is not None)
    assert coalescer._queues["acme"].gather[0] == 4
    coalescer._queues["acme"].writer.cancel()
    await until(lambda: not coalescer.writing("acme"))


async def test_a_gather_whose_callers_do_not_come_back_ends_at_its_bound() -> None:
    store, coalescer, first, cohort, others = await a_write_of_two(0.01, (3, 4))
    store.hold = False
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, *cohort, *others), TIMEOUT)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"], ["r3", "r4"]]


async def back_one_after_the_other(store, coalescer, first, cohort, _queued) -> None:
    """The write of r1 and r2 (``a_write_of_two``, nothing queued) ends;
    its two callers come back one after the other: they share the next write."""
    store.hold = False
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, *cohort), TIMEOUT)
    back = asyncio.create_task(coalescer.create(job("j3"), "r3"))
    await until(lambda: coalescer.queued("acme") == 1 or len(store.writes) == 3)
    later = asyncio.create_task(coalescer.create(job("j4"), "r4"))
    await asyncio.wait_for(asyncio.gather(back, later), TIMEOUT)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"], ["r3", "r4"]]


async def test_the_callers_of_a_write_of_several_share_the_next_when_none_was_queued() -> None:
    """A write of several ends with nothing queued: its callers, back one
    after another, go in one write rather than the first alone and the
    rest behind it (fails without the gather on an empty queue: ``["r3"]``
    then ``["r4"]``)."""
    await back_one_after_the_other(*await a_write_of_two(10.0, ()))


async def test_callers_slower_back_than_their_write_took_still_share_the_next() -> None:
    """The write took next to nothing (a microsecond on its clock), its
    callers take longer to come back (each its answer out and its next call
    in, one after the other on the loop): the gather allows them
    ``call_return_s`` each, so they share the next write rather than the
    first back being written alone (fails with the write's duration as the
    only bound: ``["r3"]`` then ``["r4"]``)."""
    await back_one_after_the_other(*await a_write_of_two(1e-6, (), call_return_s=10.0))


def test_the_gather_allows_each_caller_its_way_back_within_the_bound() -> None:
    """The gather's bound by the figures: the write's duration or the
    callers' way back, whichever is longer, never over ``gather_max_s``."""
    assert CALL_RETURN_S * 16 > 0.005, "16 callers' way back outlasts a 5 ms write"
    assert CALL_RETURN_S * 16 <= GATHER_MAX_S, "16 closed-loop callers fit within the bound"


async def test_a_gather_with_nothing_queued_ends_at_its_bound_and_forgets_the_tenant() -> None:
    """None of the callers comes back: the writer ends at the bound, nothing
    written, and a later lone call is written alone."""
    store, coalescer, first, cohort, _ = await a_write_of_two(0.01, ())
    store.hold = False
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, *cohort), TIMEOUT)
    await until(lambda: not coalescer.writing("acme"))
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"]]
    await asyncio.wait_for(coalescer.create(job("j3"), "r3"), TIMEOUT)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"], ["r3"]]


async def test_a_writer_stopped_while_gathering_with_nothing_queued_forgets_the_tenant() -> None:
    store, coalescer, first, cohort, _ = await a_write_of_two(100.0, ())
    store.hold = False
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, *cohort), TIMEOUT)
    await until(lambda: coalescer._queues["acme"].gather is not None)
    coalescer._queues["acme"].writer.cancel()
    await until(lambda: not coalescer.writing("acme"))
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"]]


async def test_nothing_gathers_after_a_write_of_one_call() -> None:
    """A write of one call is followed at once by the next (the bound here
    is far past the test's timeout: a gather would fail it)."""
    store = FakeStore()
    store.hold = True
    coalescer = CreateCoalescer(store.create_many, gather_max_s=30, now=Ticks(100.0))
    first = asyncio.create_task(coalescer.create(job("j0"), "r0"))
    await until(lambda: len(store.writes) == 1)
    queued = asyncio.create_task(coalescer.create(job("j1"), "r1"))
    await until(lambda: coalescer.queued("acme") == 1)
    store.hold = False
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, queued), TIMEOUT)
    assert [ids for _, ids in store.writes] == [["r0"], ["r1"]]


async def test_a_writer_stopped_while_gathering_answers_its_queued_calls_with_nothing_written() -> None:
    store, coalescer, first, cohort, (queued,) = await a_write_of_two(100.0, (3,))
    store.release.set()
    await asyncio.wait_for(asyncio.gather(first, *cohort), TIMEOUT)
    await until(lambda: coalescer._queues["acme"].gather is not None)
    coalescer._queues["acme"].writer.cancel()
    with pytest.raises(Exception) as error:
        await asyncio.wait_for(queued, TIMEOUT)
    assert status_for(error.value)[0] == grpc.StatusCode.UNAVAILABLE
    assert [ids for _, ids in store.writes] == [["r0"], ["r1", "r2"]], "nothing written for the queued call"
    assert not coalescer.writing("acme")


@pytest.mark.parametrize("bound", [-0.001, 61])
def test_the_gather_bound_is_refused_outside_its_range(bound) -> None:
    with pytest.raises(ValueError):
        CreateCoalescer(FakeStore().create_many, gather_max_s=bound)
    with pytest.raises(ValueError):
        CreateCoalescer(FakeStore().create_many, call_return_s=bound)
