"""The gateway fence's comparisons of the clocks (gateway/fence.py) on a
FakeClock, with the database's clock read through an injected reader whose
reads take as long as the test says: an inconclusive reading is not a skew
(retaken at once, alerted on only once the comparisons stayed inconclusive
for the grace), a skew found is alerted on at once, and hand-out waits
throughout for a conclusive comparison (never early). A round is stood in
for by asking the fence and noting its refusal, as every round does."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.gateway import clockguard
from tickwheel_server.gateway.fence import SKEW_GRACE, SKEW_RETRY_INTERVAL, SKEW_SAMPLE_TIME, Fence

FENCE_LOG = "tickwheel_server.gateway.fence"


@dataclass(frozen=True)
class Read:
    """One read of the database's clock: it takes ``took`` seconds, and the
    database reads its clock ``at`` that fraction of the way through
    (a half: at the midpoint, where the fence assumes it)."""

    took: float
    at: float = 0.5


FAILS = None
"""A read that fails (the store unreachable)."""


class Database:
    """The database's clock, ``behind`` seconds behind this server's; each
    read is the next of ``reads`` (the last one repeats once they run out)."""

    def __init__(self, clock: FakeClock, reads: list[Read | None], behind: float = 0.0) -> None:
        self.clock = clock
        self.reads = list(reads)
        self.behind = behind
        self.count = 0

    async def __call__(self):
        self.count += 1
        read = self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]
        if read is None:
            raise ConnectionError("the store is unreachable")
        self.clock.advance(read.took * read.at)
        answer = self.clock.now() - timedelta(seconds=self.behind)
        self.clock.advance(read.took * (1 - read.at))
        return answer


class Alerts:
    """Stands in for the server's ClockSkewAlert: records each verdict with
    the monotonic instant it came at."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.verdicts: list[tuple[float | None, bool]] = []
        self.at: list[float] = []

    async def __call__(self, skew: float | None, ok: bool) -> None:
        self.verdicts.append((None if skew is None else round(skew, 6), ok))
        self.at.append(self.clock.monotonic())


def fence_for(clock: FakeClock, database: Database, alerts: Alerts) -> Fence:
    return Fence(clock, owner="s1", db_clock=database, on_skew=alerts)


async def a_round(fence: Fence) -> bool:
    """What the hand-out loop does before each round: compare the clocks if
    due, then ask the fence and note its answer. True if it hands out."""
    await fence.check_skew_if_due()
    refused = fence.refusal()
    fence.note_refusal(refused)
    return refused is None


def errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_a_slow_first_read_is_retaken_at_once_and_raises_nothing(clock, caplog) -> None:
    caplog.set_level(logging.INFO, logger=FENCE_LOG)
    database = Database(clock, [Read(0.7), Read(0.002)])  # a loaded start: the first read takes 700 ms
    alerts = Alerts(clock)
    fence = fence_for(clock, database, alerts)
    assert not fence.handing_out  # never compared: fail closed
    assert await a_round(fence)
    assert database.count >= 2 and fence.clock_skew == 0.0
    assert alerts.verdicts == [(0.0, True)]
    assert errors(caplog) == []


async def test_a_comparison_too_slow_to_decide_waits_quietly_and_settles_a_second_later(clock, caplog) -> None:
    caplog.set_level(logging.INFO, logger=FENCE_LOG)
    database = Database(clock, [Read(0.6), Read(0.6), Read(0.002)])
    alerts = Alerts(clock)
    fence = fence_for(clock, database, alerts)
    assert not await a_round(fence)  # two reads of 600 ms: no verdict, hand-out waits
    assert alerts.verdicts == [] and errors(caplog) == []  # no skew was found: no alert, no error
    assert database.count == 2 and fence.clock_skew is None
    assert any(r.levelno == logging.INFO and r.getMessage().startswith("handing out waits: " + clockguard.NOT_CHECKED)
               for r in caplog.records)
    clock.advance(SKEW_RETRY_INTERVAL)
    assert await a_round(fence)
    assert alerts.verdicts == [(0.0, True)]
    assert errors(caplog) == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a start on a busy machine is no warning"


@pytest.mark.parametrize("first", [Read(0.002), Read(0.7)], ids=["fast", "after a slow read"])
async def test_a_skew_found_is_alerted_at_once(clock, caplog, first) -> None:
    caplog.set_level(logging.INFO, logger=FENCE_LOG)
    database = Database(clock, [first, Read(0.002)], behind=0.4)
    alerts = Alerts(clock)
    fence = fence_for(clock, database, alerts)
    assert not await a_round(fence)
    assert alerts.verdicts == [(0.4, False)]
    assert errors(caplog) == [
        "clock skew 0.400 s between this server and the database exceeds 0.250 s: "
        "handing out stops until they agree (never early)",
        f"handing out stops: {clockguard.SKEWED}",
    ]


@pytest.mark.parametrize("read", [Read(0.6), FAILS], ids=["too slow", "failing"])
async def test_comparisons_that_stay_inconclusive_past_the_grace_are_alerted(clock, caplog, read) -> None:
    caplog.set_level(logging.INFO, logger=FENCE_LOG)
    database = Database(clock, [read])
    alerts = Alerts(clock)
    fence = fence_for(clock, database, alerts)
    start = clock.monotonic()
    while not alerts.verdicts:
        assert not await a_round(fence), "handed out without a conclusive comparison"
        if not alerts.verdicts:
            assert clock.monotonic() - start < SKEW_GRACE + SKEW_RETRY_INTERVAL + SKEW_SAMPLE_TIME + 1
            assert errors(caplog) == [] or read is FAILS  # a failed read is logged as such
        clock.advance(SKEW_RETRY_INTERVAL)
    assert alerts.verdicts == [(None, False)]
    # Within one retry (and its reads) after the grace, not before it.
    assert SKEW_GRACE <= alerts.at[0] - start <= SKEW_GRACE + SKEW_RETRY_INTERVAL + SKEW_SAMPLE_TIME + 1
    assert f"handing out stops: {clockguard.NOT_CHECKED}" in errors(caplog)
    assert not fence.handing_out


async def test_the_read_with_the_smallest_round_trip_decides(clock) -> None:
    # The database read its clock at the start of the slow reads: judged at
    # their midpoint they would say this server is 150 ms and 50 ms ahead.
    database = Database(clock, [Read(0.3, at=0.0), Read(0.02), Read(0.1, at=0.0)])
    alerts = Alerts(clock)
    fence = fence_for(clock, database, alerts)
    assert await fence.check_skew()
    assert database.count == 3
    assert fence.clock_skew == pytest.approx(0.0)
    assert alerts.verdicts == [(0.0, True)]


async def test_a_comparison_stops_reading_once_it_spent_its_time(clock) -> None:
    database = Database(clock, [Read(0.6)])
    fence = fence_for(clock, database, Alerts(clock))
    assert not await fence.check_skew()
    assert database.count == 2  # 1.2 s of reading: no third read


async def test_a_failed_read_ends_the_comparison(clock) -> None:
    database = Database(clock, [FAILS])
    fence = fence_for(clock, database, Alerts(clock))
    assert not await fence.check_skew()
    assert database.count == 1


async def test_once_compared_a_stale_verdict_is_alerted_at_once(clock) -> None:
    # The grace counts from the first inconclusive comparison: by the time
    # the last conclusive one is two minutes old, it is long over.
    database = Database(clock, [Read(0.002), FAILS])
    alerts = Alerts(clock)
    fence = fence_for(clock, database, alerts)
    assert await a_round(fence)
    for _ in range(130):
        clock.advance(SKEW_RETRY_INTERVAL)
        await a_round(fence)
        if alerts.verdicts[-1] != (0.0, True):
            break
    assert fence.refusal() == clockguard.STALE
    assert alerts.verdicts == [(0.0, True), (None, False)]


def test_the_grace_is_validated(clock) -> None:
    with pytest.raises(ValueError, match="skew_grace"):
        Fence(clock, owner="s1", skew_grace=-1)
