"""Calls waiting for their request message (api/awaited.py): a message
already there costs no timer; one that never comes is answered
DEADLINE_EXCEEDED by the sweep; other cancellations pass through."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from tickwheel_server.api.awaited import AwaitedRequests


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


class Context:
    """A call's context whose message is ``message`` at once, or never (None)."""

    def __init__(self, message: bytes | None) -> None:
        self._message = message

    def peer(self) -> str:
        return "ipv4:10.0.0.1:5000"

    async def read(self) -> bytes:
        if self._message is None:
            await asyncio.Event().wait()
        return self._message

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


async def test_messages_already_sent_set_no_timer_a_call(monkeypatch) -> None:
    """Before, every call pushed a timer (``asyncio.timeout``) on the loop's
    heap and cancelled it; now the sweep's one sleep is the only timer."""
    loop = asyncio.get_running_loop()
    timers = 0
    call_at = loop.call_at

    def counting(*args, **kwargs):
        nonlocal timers
        timers += 1
        return call_at(*args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting)
    awaited = AwaitedRequests()
    for n in range(200):
        assert await awaited.read(Context(b"m%d" % n), None) == b"m%d" % n
    assert timers <= 1 and awaited.waiting() == 0 and awaited.timed_out == 0


async def test_a_message_that_never_comes_is_answered_deadline_exceeded() -> None:
    awaited = AwaitedRequests(seconds=0.05, sweep_seconds=0.01)
    calls = [asyncio.create_task(awaited.read(Context(None), None)) for _ in range(3)]
    await asyncio.sleep(0)
    sent = await awaited.read(Context(b"x"), None)
    assert sent == b"x" and awaited.waiting() == 3
    for call in calls:
        with pytest.raises(Aborted) as aborted:
            await asyncio.wait_for(call, 10)
        assert aborted.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "did not arrive within 0.05 s" in aborted.value.details
    assert (awaited.timed_out, awaited.waiting()) == (3, 0)
    assert await awaited.read(Context(b"y"), None) == b"y", "served after the sweep"


async def test_a_call_cancelled_otherwise_stays_cancelled() -> None:
    """The client's cancel (or the server's stop) is not a timeout, even
    when the sweep cancels the same call too."""
    awaited = AwaitedRequests(seconds=0.05, sweep_seconds=0.01)
    call = asyncio.create_task(awaited.read(Context(None), None))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (awaited.timed_out, awaited.waiting()) == (0, 0)

    class CancelledToo(set):
        """The sweep's expired tasks, each cancelled by its client too as the sweep cancels it."""

        def add(self, task: asyncio.Task) -> None:
            super().add(task)
            task.cancel()

    awaited._expired = CancelledToo()
    both = asyncio.create_task(awaited.read(Context(None), None))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(both, 10)
    assert (awaited.timed_out, awaited.waiting(), len(awaited._expired)) == (0, 0, 0)


async def test_the_bound_per_caller_still_refuses_at_once() -> None:
    awaited = AwaitedRequests(per_peer=2, seconds=5, sweep_seconds=0.01)
    held = [asyncio.create_task(awaited.read(Context(None), None)) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(Aborted) as refused:
        await awaited.read(Context(b"x"), None)
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and awaited.refused == 1
    for call in held:
        call.cancel()
    await asyncio.gather(*held, return_exceptions=True)
    assert awaited.waiting() == 0
