"""The credential-less streams' bounds, per peer and in all (``api/openstreams.py``)."""

from __future__ import annotations

import contextlib

import grpc
import pytest

from tickwheel_server.api.openstreams import OpenStreams


class Aborted(Exception):
    pass


class Context:
    def __init__(self, peer: str) -> None:
        self._peer = peer
        self.aborted: tuple | None = None

    def peer(self) -> str:
        return self._peer

    async def abort(self, code, details):
        self.aborted = (code, details)
        raise Aborted


async def test_a_peer_and_the_server_hold_at_most_their_bounds_and_closing_frees_one() -> None:
    streams = OpenStreams(per_peer=2, overall=3)
    async with contextlib.AsyncExitStack() as stack:
        for port in (1, 2):
            await stack.enter_async_context(streams.holding(Context(f"ipv4:10.0.0.1:{port}")))
        refused = Context("ipv4:10.0.0.1:3")
        with pytest.raises(Aborted):
            await stack.enter_async_context(streams.holding(refused))
        assert refused.aborted[0] == grpc.StatusCode.RESOURCE_EXHAUSTED and "ipv4:10.0.0.1" in refused.aborted[1]
        await stack.enter_async_context(streams.holding(Context("ipv6:[2001:db8::1]:1")))
        full = Context("ipv6:[2001:db9::1]:1")
        with pytest.raises(Aborted):
            await stack.enter_async_context(streams.holding(full))
        assert "the server holds 3" in full.aborted[1]
        assert streams.open == 3 and streams.refused == 2
    assert streams.open == 0, "every stream that ended is uncounted"
    async with streams.holding(Context("ipv4:10.0.0.1:4")):
        assert streams.open == 1
