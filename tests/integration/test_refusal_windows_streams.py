"""A worker (or anything) that keeps opening Pull streams after
RESOURCE_EXHAUSTED, through the real server on the embedded stores and on
PostgreSQL + etcd: once its peer is over its failed authentications, its
streams inside the retry delay are refused as they open, before the
authenticator or the servicer runs (a first message that is not a hello
gets the refusal, not FAILED_PRECONDITION), the refusals are counted as
the windows' and a client that kept opening is told a longer delay than
the failures' own; a worker whose credential verified here keeps its
stream and opens new ones. (On main the windows held unary calls only:
each such stream was a whole Pull run, authenticator included.)"""

from __future__ import annotations

import asyncio
from collections import Counter

import grpc
from tickwheel.v1 import worker_pb2, worker_pb2_grpc

from tests.integration.test_refusal_windows_api import retry_delay
from tests.integration.test_server_api import bearer
from tickwheel_server.telemetry.prometheus import parse_samples

FLOOD = 120
"""Streams at once: past the peer's 20 failures at once and the windows' slack (16)."""
UNKNOWN = "tww_AAAAAAAAAAAAAAAA_" + "B" * 43
"""A well-formed worker credential no one holds."""


def hello(worker_id: str) -> worker_pb2.PullRequest:
    return worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(worker_id=worker_id, handlers=["echo"]))


async def first_answer(channel, secret: str, first: worker_pb2.PullRequest):
    """Open a Pull stream, send ``first``: its first message, or the status that ended it."""
    call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(secret))
    try:
        await call.write(first)
        return await asyncio.wait_for(call.read(), 30)
    except grpc.aio.AioRpcError as error:
        return error
    finally:
        call.cancel()


async def test_streams_inside_the_retry_delay_are_refused_as_they_open(server) -> None:
    await server.create_tenant("acme")
    honest = await server.issue_worker_credential(["acme"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        kept = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(honest))
        await kept.write(hello("honest"))
        assert (await asyncio.wait_for(kept.read(), 30)).WhichOneof("message") == "welcome"

        # The first flood's streams that arrive while the secret's one store
        # read is in flight share it (and its UNAUTHENTICATED, or under load
        # the hello timeout's UNAVAILABLE): how many depends on when that read
        # answers. Once it has, the peer is past its failures: the second
        # flood opens inside the window.
        first = await asyncio.gather(*(first_answer(channel, UNKNOWN, hello(f"h{n}")) for n in range(FLOOD)))
        assert all(isinstance(a, grpc.aio.AioRpcError) for a in first), "no unknown credential is welcomed"
        flood = await asyncio.gather(*(first_answer(channel, UNKNOWN, hello(f"i{n}")) for n in range(FLOOD)))
        codes = [a.code() for a in flood if isinstance(a, grpc.aio.AioRpcError)]
        assert len(codes) == FLOOD, "no unknown credential is welcomed"
        refused = [a for a in flood if a.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) >= FLOOD // 2, ("past the peer's failures, refused with a delay", Counter(codes))
        assert all(retry_delay(e) is not None for e in refused), "each refusal says when to retry"
        assert max(retry_delay(e) for e in refused) > 1.0, "kept opening inside its delay: told a longer one"

        inside = await first_answer(channel, UNKNOWN, worker_pb2.PullRequest())  # not a hello
        assert isinstance(inside, grpc.aio.AioRpcError)
        assert inside.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "refused as it opened, its messages unread"
        assert retry_delay(inside) is not None

        scraped = parse_samples(await server.server.metrics.scrape())
        assert scraped[("tickwheel_refusal_windows_refused_total", ())] >= FLOOD // 2, "the streams met the windows"

        # The worker that verified here keeps its stream, and opens another.
        again = await first_answer(channel, honest, hello("honest-2"))
        assert not isinstance(again, grpc.aio.AioRpcError), again
        assert again.WhichOneof("message") == "welcome"
        kept.cancel()
