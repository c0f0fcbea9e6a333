"""A known outage (the store or etcd unreachable, a connection refused or
closed) is one WARNING line per component when it begins, one more
STILL_EVERY later, then after gaps doubling up to STILL_AT_MOST while it
lasts, and one INFO line when a pass succeeds again; anything else stays
an ERROR with its traceback, every time."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
import sqlalchemy.exc

from tickwheel.shared.clock import FakeClock
from tests.unit.dispatcher.test_dispatcher_wake import Ownership, Runner
from tickwheel_server.dispatcher.dispatcher import Dispatcher
from tickwheel_server.lease.types import LeaseStoreFatal, LeaseStoreUnavailable, SessionLost
from tickwheel_server.store.dispatch import ClaimResult
from tickwheel_server.store.errors import AmbiguousCommitError, StoreUnavailableError, TransactionConflictError
from tickwheel_server.telemetry.outages import STILL_AT_MOST, STILL_EVERY, OutageLog, log_failure, one_line, outage_of

LOGGER = "tickwheel.test.outages"


def store_down() -> StoreUnavailableError:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise StoreUnavailableError(
                'connection to server at "127.0.0.1", port 5432 failed: Connection refused\n'
                "\tIs the server running on that host and accepting TCP/IP connections?",
                attempts=5,
            ) from cause
    except StoreUnavailableError as error:
        return error


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == level]


# --------------------------------------------------------------------------- what an outage is


def test_known_outages_are_classified_by_what_went_away() -> None:
    assert outage_of(store_down()) == "store"
    assert outage_of(AmbiguousCommitError("connection closed during COMMIT")) == "store"
    assert outage_of(LeaseStoreUnavailable("etcd 127.0.0.1:2379: connection refused")) == "etcd"
    assert outage_of(SessionLost("lease expired")) == "etcd"
    assert outage_of(ConnectionResetError(104, "Connection reset by peer")) == "connection"
    lost = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    lost.connection_invalidated = True
    assert outage_of(lost) == "store"


def test_an_outage_wrapped_in_another_error_is_still_one() -> None:
    try:
        try:
            raise store_down()
        except StoreUnavailableError as cause:
            raise RuntimeError("claiming partition 3 failed") from cause
    except RuntimeError as error:
        assert outage_of(error) == "store"


def test_defects_and_refusals_are_not_outages() -> None:
    assert outage_of(ValueError("bad row")) is None
    assert outage_of(KeyError("x")) is None
    assert outage_of(LeaseStoreFatal("permission denied")) is None
    # A conflict is retried by the store; if it escapes, something is wrong.
    assert outage_of(TransactionConflictError("40001 every attempt", attempts=5)) is None
    integrity = sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
    assert outage_of(integrity) is None
    assert outage_of(sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("syntax"))) is None


def test_one_line_keeps_the_first_line_only() -> None:
    assert one_line(store_down()) == (
        'StoreUnavailableError: connection to server at "127.0.0.1", port 5432 failed: Connection refused'
    )
    assert one_line(ValueError()) == "ValueError"


# --------------------------------------------------------------------------- the log of one component


def test_an_outage_is_one_warning_then_one_a_minute_then_one_recovery(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = FakeClock()
    outages = OutageLog(logging.getLogger(LOGGER), "reaper", clock)
    outages.ok()  # nothing was down: nothing to say
    for _ in range(30):
        outages.failed("the reaper's pass", store_down())
        clock.advance(1.0)
    warnings = records(caplog, logging.WARNING)
    assert len(warnings) == 1
    assert warnings[0].getMessage() == (
        "reaper: the reaper's pass failed, store unavailable: StoreUnavailableError: connection to server at "
        '"127.0.0.1", port 5432 failed: Connection refused; retrying'
    )
    assert warnings[0].exc_info is None
    assert len(records(caplog, logging.DEBUG)) == 29
    assert outages.down

    clock.advance(STILL_EVERY)
    outages.failed("cluster duty check_once", LeaseStoreUnavailable("etcd: connection refused"))
    outages.failed("cluster duty check_once", LeaseStoreUnavailable("etcd: connection refused"))
    warnings = records(caplog, logging.WARNING)
    assert len(warnings) == 2
    assert warnings[1].getMessage().startswith("reaper: still failing for 90 s (31 failures), etcd unavailable:")

    outages.ok()
    outages.ok()
    infos = records(caplog, logging.INFO)
    assert [r.getMessage() for r in infos] == ["reaper: recovered after 90 s (32 failures)"]
    assert not outages.down
    assert not records(caplog, logging.ERROR)
    assert not any(r.exc_info for r in caplog.records if r.name == LOGGER)

    # An outage a minute after the last line is a new one: its own first line.
    clock.advance(STILL_EVERY)
    outages.failed("the reaper's pass", ConnectionRefusedError(111, "Connection refused"))
    assert len(records(caplog, logging.WARNING)) == 3
    assert "connection unavailable: ConnectionRefusedError" in records(caplog, logging.WARNING)[2].getMessage()


def test_an_unexpected_error_is_an_error_with_its_traceback_every_time(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    outages = OutageLog(logging.getLogger(LOGGER), "dispatcher", FakeClock())
    outages.failed("the dispatch tick", store_down())
    for _ in range(3):
        try:
            raise ZeroDivisionError("division by zero")
        except ZeroDivisionError as error:
            outages.failed("the dispatch tick", error)
    errors = records(caplog, logging.ERROR)
    assert len(errors) == 3
    assert all(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in errors)
    assert errors[0].getMessage() == "dispatcher: the dispatch tick failed; retrying"
    assert caplog.text.count("Traceback") == 3
    assert len(records(caplog, logging.WARNING)) == 1  # the outage's line, not repeated


# --------------------------------------------------------------------------- a component through an outage


class FailingStore:
    """A dispatch store whose claims fail with ``errors`` in turn, then succeed."""

    def __init__(self, errors: list[BaseException]) -> None:
        self.errors = errors
        self.claims = 0

    async def claim_due(self, owned, now, *, lookahead, batch, **_options) -> ClaimResult:
        self.claims += 1
        if self.errors:
            raise self.errors.pop(0)
        return ClaimResult(executions=[])

    async def scheduled_in(self, partitions, until):
        return []

    async def review_quarantine(self, owned) -> list[str]:
        return []


async def run_dispatcher(errors: list[BaseException], ticks: int) -> FailingStore:
    """A dispatcher over a store failing with ``errors``, through ``ticks`` more ticks."""
    clock, store, runner = FakeClock(), FailingStore(errors), Runner()
    dispatcher = Dispatcher(store, Ownership(), runner, clock, tick=1.0, lookahead=timedelta(0))
    task = asyncio.create_task(dispatcher.run())
    try:
        for _ in range(ticks):
            done = dispatcher.tick_done
            clock.advance(1.0)
            await asyncio.wait_for(done.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not runner.inserted  # nothing was claimed
    return store


async def test_the_dispatcher_logs_a_store_outage_once_and_its_end(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = await run_dispatcher([store_down() for _ in range(8)], 10)
    assert store.claims >= 9
    mine = [r for r in caplog.records if r.getMessage().startswith("dispatcher:")]
    assert [r.levelno for r in mine if r.levelno >= logging.INFO] == [logging.WARNING, logging.INFO]
    assert "the dispatch tick failed, store unavailable" in mine[0].getMessage()
    assert mine[-1].getMessage().startswith("dispatcher: recovered after ")
    assert mine[-1].getMessage().endswith(" s (8 failures)")
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_the_dispatcher_keeps_a_traceback_for_a_defect(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await run_dispatcher([TypeError("claim_due() got an unexpected keyword argument")], 2)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info[0] is TypeError
    assert not [r for r in caplog.records if "recovered" in r.getMessage()]  # no outage was on


def test_one_line_names_the_cause_a_wrapper_only_names_by_type() -> None:
    try:
        try:
            raise ConnectionRefusedError("connection failed: connection to server at \"127.0.0.1\", port 1 failed")
        except ConnectionRefusedError as cause:
            raise StoreUnavailableError("store unreachable after 10 attempts: ConnectionRefusedError", attempts=10) from cause
    except StoreUnavailableError as error:
        assert one_line(error) == (
            "StoreUnavailableError: store unreachable after 10 attempts: ConnectionRefusedError "
            '(connection failed: connection to server at "127.0.0.1", port 1 failed)'
        )


def test_log_failure_is_one_warning_line_for_an_outage_and_a_traceback_for_a_defect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    logger = logging.getLogger(LOGGER)
    log_failure(logger, "partition ownership failed", LeaseStoreUnavailable("etcd: no leader"),
                then="releasing and starting again")
    try:
        raise KeyError("partition 9")
    except KeyError as error:
        log_failure(logger, "partition ownership failed", error)
    warning, error = caplog.records
    assert (warning.levelno, warning.exc_info) == (logging.WARNING, None)
    assert warning.getMessage() == (
        "partition ownership failed, etcd unavailable: LeaseStoreUnavailable: etcd: no leader; "
        "releasing and starting again"
    )
    assert error.levelno == logging.ERROR and error.exc_info[0] is KeyError
    assert error.getMessage() == "partition ownership failed; retrying"


def test_a_flapping_outage_is_still_one_warning_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    """Passes that need no store succeed between those that fail: the
    component's lines stay rate-limited, across the outages it sees."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = FakeClock()
    outages = OutageLog(logging.getLogger(LOGGER), "gateway", clock)
    for _ in range(50):
        outages.failed("the hand-out round", store_down())
        clock.advance(0.5)
        outages.ok()
        clock.advance(0.5)
    assert len(records(caplog, logging.WARNING)) == 1
    assert len(records(caplog, logging.INFO)) == 1  # the recovery of the announced outage only
    clock.advance(STILL_EVERY)
    outages.failed("the hand-out round", store_down())
    outages.ok()
    assert len(records(caplog, logging.WARNING)) == 2
    assert len(records(caplog, logging.INFO)) == 2
    # A relapse that lasts past the minute is announced then, and so is its end.
    clock.advance(1.0)
    outages.failed("the hand-out round", store_down())
    clock.advance(STILL_EVERY)
    outages.failed("the hand-out round", store_down())
    outages.ok()
    warnings = records(caplog, logging.WARNING)
    assert len(warnings) == 3 and warnings[2].getMessage().startswith("gateway: still failing for 60 s (2 failures)")
    assert len(records(caplog, logging.INFO)) == 3


def test_a_long_outage_backs_its_lines_off_to_one_a_quarter_hour(caplog: pytest.LogCaptureFixture) -> None:
    """A failure every ten seconds for a day: the first line at once, then
    after 1, 2, 4, 8 and then every 15 minutes; the recovery says the whole
    day and every failure."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = FakeClock()
    outages = OutageLog(logging.getLogger(LOGGER), "reaper", clock)
    day = 24 * 3600
    for _ in range(day // 10):
        outages.failed("the reaper's pass", store_down())
        clock.advance(10.0)
    outages.ok()
    warnings = records(caplog, logging.WARNING)
    still = [int(r.getMessage().split("still failing for ")[1].split(" s")[0]) for r in warnings[1:]]
    assert still[:5] == [60, 180, 420, 900, 1800]
    assert all(b - a == STILL_AT_MOST for a, b in zip(still[4:], still[5:]))
    assert len(warnings) == 1 + 4 + (day - 10 - 900) // 900, len(warnings)  # 99, not a day's 1441
    assert [r.getMessage() for r in records(caplog, logging.INFO)] == [
        f"reaper: recovered after {day} s ({day // 10} failures)"
    ]
    # The next outage starts over: its second line a minute after its first.
    clock.advance(STILL_EVERY)
    for _ in range(7):
        outages.failed("the reaper's pass", store_down())
        clock.advance(10.0)
    warnings = records(caplog, logging.WARNING)
    assert warnings[-2].getMessage().startswith("reaper: the reaper's pass failed, store unavailable")
    assert warnings[-1].getMessage().startswith("reaper: still failing for 60 s (7 failures)")


def test_an_outage_log_refuses_gaps_that_do_not_grow() -> None:
    with pytest.raises(ValueError):
        OutageLog(logging.getLogger(LOGGER), "reaper", FakeClock(), every=0)
