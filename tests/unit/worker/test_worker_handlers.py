"""The handler registry, the context, output encoding, and one Attempt on a FakeClock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tickwheel.v1 import worker_pb2
from tickwheel.shared.clock import FakeClock
from tickwheel_worker import HandlerRegistry, JobContext, Worker, WorkerConfig, echo, register_builtins
from tickwheel_worker.attempt import Attempt, AttemptSettings, truncate_utf8
from tickwheel_worker.slots import Slots
from tickwheel_worker.timers import Timers
from tickwheel_worker.handlers import encode_output
from tests.unit.worker.worker_fakes import make_assignment

OUTCOME = worker_pb2.ResultOutcome


def test_registry_takes_sync_and_async_handlers_and_refuses_bad_or_duplicate_names() -> None:
    registry = HandlerRegistry()

    @registry.handler("billing.charge")
    async def charge(ctx: JobContext) -> None: ...

    @registry.handler("reports:daily-1")
    def daily(ctx: JobContext) -> None: ...

    class AsyncCallable:
        async def __call__(self, ctx: JobContext) -> None: ...

    registry.register("obj", AsyncCallable())

    assert registry.names() == ["billing.charge", "obj", "reports:daily-1"]
    assert registry.get("billing.charge").is_async and registry.get("obj").is_async  # type: ignore[union-attr]
    assert not registry.get("reports:daily-1").is_async  # type: ignore[union-attr]
    assert charge.__name__ == "charge"  # the decorator returns the function unchanged
    with pytest.raises(ValueError, match="already registered"):
        registry.register("billing.charge", daily)
    for bad in ["", "has space", "x" * 201, "ü"]:
        with pytest.raises(ValueError, match="handler name"):
            registry.register(bad, daily)
    with pytest.raises(TypeError):
        registry.register("not.callable", 5)  # type: ignore[arg-type]


def test_worker_handler_decorator_registers_into_its_config() -> None:
    worker = Worker(WorkerConfig(address="127.0.0.1:1", credential="c"))

    @worker.handler("x")
    def x(ctx: JobContext) -> None: ...

    assert worker.config.handlers.names() == ["x"]


def test_config_is_validated_when_built() -> None:
    with pytest.raises(ValueError, match="address"):
        WorkerConfig(address="", credential="c")
    with pytest.raises(ValueError, match="credential"):
        WorkerConfig(address="a:1", credential="")
    with pytest.raises(ValueError, match="slots"):
        WorkerConfig(address="a:1", credential="c", slots=0)
    with pytest.raises(ValueError, match="worker_id"):
        WorkerConfig(address="a:1", credential="c", worker_id="no spaces")
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert WorkerConfig(address="a:1", credential="c", root_certificates=pem).tls
    with pytest.raises(ValueError, match="PEM"):
        WorkerConfig(address="a:1", credential="c", root_certificates=b"pem")
    with pytest.raises(ValueError, match="go together"):
        WorkerConfig(address="a:1", credential="c", certificate_chain=pem)
    default_id = WorkerConfig(address="a:1", credential="c").worker_id
    assert 1 <= len(default_id) <= 128 and default_id != WorkerConfig(address="a:1", credential="c").worker_id


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(b"raw", b"raw"), (bytearray(b"ba"), b"ba"), ("text é", "text é".encode()), (None, b""),
     ({"n": 1}, b'{"n":1}'), ([1, 2], b"[1,2]")],
)
def test_encode_output(value: object, encoded: bytes) -> None:
    assert encode_output(value) == encoded


def test_truncate_utf8_never_splits_a_character() -> None:
    assert truncate_utf8("ab", 10) == "ab"
    assert truncate_utf8("aé", 2) == "a"
    assert len(truncate_utf8("x" * 5000, 4096).encode()) == 4096


async def test_echo_returns_the_payload_and_register_builtins_adds_it() -> None:
    registry = HandlerRegistry()
    register_builtins(registry)
    assert registry.names() == ["echo"]
    ctx = _context()
    assert await echo(ctx) == b"payload"


async def test_heartbeat_progress_is_truncated_and_cancel_is_visible_to_threads() -> None:
    ctx = _context()
    await ctx.heartbeat(progress="p" * 300)
    assert ctx.progress == "p" * 256
    ctx.heartbeat_sync("")  # empty keeps the previous progress
    assert ctx.progress == "p" * 256
    assert not ctx.cancel_requested
    ctx._signal_cancel("deadline passed")
    assert ctx.cancel_requested and ctx.canceled.is_set() and ctx.cancel_reason == "deadline passed"
    assert await asyncio.to_thread(ctx.wait_canceled_sync, 1.0)


def _context() -> JobContext:
    from tickwheel_worker.attempt import context_from_assignment

    return context_from_assignment(make_assignment("e:1", payload=b"payload"))


async def test_an_attempt_times_out_by_its_clock() -> None:
    """The deadline is measured on the injected clock: nothing happens until it moves."""
    clock = FakeClock()
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.handler("wait")
    async def wait(ctx: JobContext) -> None:
        await release.wait()

    assignment = make_assignment("e:fake", handler="wait")
    assignment.deadline_at.FromDatetime(clock.now() + timedelta(seconds=60))
    reported: list[worker_pb2.ExecutionResult] = []
    timers = Timers(clock)
    settings = AttemptSettings(
        registry=registry, clock=clock, timers=timers, slots=Slots(1), report=lambda key, r: reported.append(r),
        finished=lambda attempt: None, http_enabled=False, address_policy=lambda h, a: True, cancel_grace=0.0,
        user_agent="test",
    )
    attempt = Attempt(assignment, settings)
    ticking = asyncio.create_task(timers.run())
    task = attempt.start()
    for _ in range(5):
        await asyncio.sleep(0)
    clock.advance(59)
    for _ in range(5):
        await asyncio.sleep(0)
    assert reported == [] and not attempt.decided
    clock.advance(1)
    await asyncio.wait_for(task, 5)
    (result,) = reported
    assert result.outcome == OUTCOME.RESULT_OUTCOME_TIMED_OUT
    assert result.finished_at.ToDatetime() - result.started_at.ToDatetime() == timedelta(seconds=60)
    assert attempt.context.cancel_requested
    ticking.cancel()
