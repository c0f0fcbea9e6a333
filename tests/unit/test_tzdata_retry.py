"""The tzdata recompute at a server's start waits out a refusing store.

It runs once a start: given up on a store refusal (a table locked by an
operator, PostgreSQL restarting), the cursors of jobs recorded with another
tzdata release stayed stale until the next start, and the refusal was
logged at ERROR with its traceback. Now it is a WARNING and the recompute
tries again with backoff; an unexpected error is still logged whole."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from tickwheel.shared.clock import FakeClock
from tickwheel_server.app import TZDATA_RETRY_FIRST_S, TZDATA_RETRY_MAX_S, TickwheelServer
from tickwheel_server.store import StoreUnavailableError, TransactionConflictError


class Tzdata:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.recorded = 0
        self.recomputed = 0

    async def record(self, version, prints) -> None:
        self.recorded += 1

    async def recompute(self, engine, version, tenant, now, *, dry_run):
        if self.failures:
            raise self.failures.pop(0)
        self.recomputed += 1
        return 0, []


def refusal(kind=StoreUnavailableError) -> Exception:
    return kind("store refusing locks (lock timeout) after 2 attempts", attempts=2, sqlstate="55P03")


async def test_a_refusing_store_is_waited_out_with_backoff_and_no_traceback(caplog) -> None:
    clock = FakeClock(autojump=True)
    tzdata = Tzdata([refusal() for _ in range(8)] + [refusal(TransactionConflictError)])
    server = SimpleNamespace(tzdata=tzdata, clock=clock)
    started = clock.monotonic()
    with caplog.at_level(logging.INFO, logger="tickwheel.server"):
        await TickwheelServer._recompute_tzdata(server)
    assert tzdata.recomputed == 1 and tzdata.recorded == 10
    waits = [TZDATA_RETRY_FIRST_S * 2**n for n in range(9)]
    assert clock.monotonic() - started == sum(min(w, TZDATA_RETRY_MAX_S) for w in waits)
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 9
    assert not any(r.exc_info for r in caplog.records)


async def test_an_unexpected_error_is_logged_whole_and_not_retried(caplog) -> None:
    tzdata = Tzdata([RuntimeError("a bug")])
    server = SimpleNamespace(tzdata=tzdata, clock=FakeClock(autojump=True))
    with caplog.at_level(logging.ERROR, logger="tickwheel.server"):
        await TickwheelServer._recompute_tzdata(server)
    assert tzdata.recomputed == 0 and tzdata.recorded == 1
    [record] = caplog.records
    assert "recomputing stored next runs failed" in record.getMessage() and record.exc_info


async def test_a_stopping_server_cancels_the_wait() -> None:
    clock = FakeClock()
    tzdata = Tzdata([refusal()])
    task = asyncio.create_task(TickwheelServer._recompute_tzdata(SimpleNamespace(tzdata=tzdata, clock=clock)))
    for _ in range(100):  # until it sleeps on the clock (no time passes: a fake clock)
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tzdata.recomputed == 0
