"""Failed authentications on the real server: a repeated bogus key costs one
store read, a peer over its failures gets RESOURCE_EXHAUSTED with a clear
message and no store read, a credential it used before keeps working, and
no failed call logs a traceback; on the embedded stores and on PostgreSQL +
etcd."""

from __future__ import annotations

import logging
import secrets

import grpc
from tickwheel.v1 import scheduler_pb2, scheduler_pb2_grpc

from tickwheel_server.auth.failures import FailureLimits

BURST = 20


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


def random_key() -> str:
    return f"twk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}"


async def code_of(scheduler, secret: str) -> tuple[grpc.StatusCode, str]:
    try:
        await scheduler.ListJobs(scheduler_pb2.ListJobsRequest(), metadata=bearer(secret))
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details()
    return grpc.StatusCode.OK, ""


async def test_failed_authentications_are_cheap_limited_and_quiet(server, monkeypatch, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    key = await server.create_tenant("acme")
    tenants = server.server.stores.tenants
    reads = []
    verify = tenants.verify_key_until

    async def counted(secret):
        reads.append(secret)
        return await verify(secret)

    monkeypatch.setattr(tenants, "verify_key_until", counted)
    # The real clock runs: a refill this slow adds nothing while the test runs.
    server.server.auth.failures.limits = FailureLimits(peer_burst=BURST, peer_rate=1e-6)
    # The key's cached principal must outlive the test (its 5 s default may
    # not on a loaded machine): once it expires, a peer over its failures
    # is refused whatever it presents (auth/failures.py).
    monkeypatch.setattr(server.server.auth, "cache_ttl", 3600.0)
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        assert (await code_of(scheduler, key))[0] == grpc.StatusCode.OK  # cached from here on
        bogus = random_key()
        for _ in range(5):
            assert (await code_of(scheduler, bogus))[0] == grpc.StatusCode.UNAUTHENTICATED
        assert reads.count(bogus) == 1, "the negative cache answers the repeats"

        outcomes = [await code_of(scheduler, random_key()) for _ in range(BURST + 10)]
        codes = [code for code, _ in outcomes]
        assert codes.count(grpc.StatusCode.UNAUTHENTICATED) == BURST - 5
        assert codes[BURST - 5 :] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 15
        assert "too many failed authentications from ipv4:127.0.0.1" in outcomes[-1][1]
        assert len(reads) == 1 + BURST - 5 + 1, "refused calls read nothing"
        assert (await code_of(scheduler, key))[0] == grpc.StatusCode.OK, "a credential it used keeps working"
    tracebacks = [r for r in caplog.records if r.exc_info and r.name.startswith("tickwheel")]
    assert tracebacks == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "authenticat" in r.getMessage()]
