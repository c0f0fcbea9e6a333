"""ListApiKeys and ListWorkerCredentials page through the real server, on
SQLite and PostgreSQL: more than a thousand credentials, many sharing their
creation instant, are each listed exactly once by following
``next_page_token`` (an old client that sends no page field gets the first
page and a token); a token is good only for the listing and the tenant that
made it; an altered one and an out-of-range ``page_size`` are refused
INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import base64
import json

import grpc
import pytest
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tickwheel.shared.ids import to_us
from tickwheel_server.store.tables import api_keys, worker_credentials

MANY = 1050
"""More than the 1000 a listing answered before it paged."""
TIE = 7
"""Credentials made in each microsecond: a page boundary falls inside a tie."""


def _insert(server, table, rows: list[dict]) -> None:
    with server.server.engine.begin() as conn:
        conn.execute(table.insert(), rows)


def _seed(server) -> tuple[set[str], set[str], set[str]]:
    """acme's live keys, the live credentials serving acme (some serve globex
    too), and the live credentials that serve globex alone; beside them
    expired keys, revoked credentials and globex's keys, never listed."""
    now = to_us(server.server.clock.now())
    keys = [dict(id=f"k{n:05d}", tenant="acme", secret_hash=b"x", description="", created_at=now - n // TIE,
                 expires_at=None) for n in range(MANY)]  # fmt: skip
    keys += [dict(id=f"kx{n}", tenant="acme", secret_hash=b"x", description="", created_at=now - n,
                  expires_at=now - 1) for n in range(20)]  # fmt: skip
    keys += [dict(id=f"kg{n}", tenant="globex", secret_hash=b"x", description="", created_at=now - n,
                  expires_at=None) for n in range(30)]  # fmt: skip
    _insert(server, api_keys, keys)

    def credential(ident: str, served: list[str], created: int, revoked: int | None = None) -> dict:
        return dict(id=ident, secret_hash=b"x", tenants=json.dumps(served), handlers="[]", http=False,
                    description="", created_at=created, revoked_at=revoked)  # fmt: skip

    creds = [credential(f"c{n:05d}", ["acme"] if n % 3 else ["acme", "globex"], now - n // TIE) for n in range(MANY)]
    creds += [credential(f"cg{n:04d}", ["globex"], now - n // 2) for n in range(300)]
    creds += [credential(f"cx{n}", ["acme"], now - n, revoked=now) for n in range(20)]
    _insert(server, worker_credentials, creds)
    return ({k["id"] for k in keys[:MANY]}, {c["id"] for c in creds[:MANY]},
            {c["id"] for c in creds[MANY : MANY + 300]})  # fmt: skip


async def _every(call, request, field: str) -> list[str]:
    """The ids on every page of ``call`` from ``request``, in order."""
    listed: list[str] = []
    while True:
        reply = await call(request)
        listed += [item.id for item in getattr(reply, field)]
        if not reply.next_page_token:
            return listed
        assert reply.next_page_token != request.page_token
        request.page_token = reply.next_page_token


def _listings(channel, meta):
    """ListApiKeys and ListWorkerCredentials as an operator: request in, answer out."""
    admin = admin_pb2_grpc.AdminServiceStub(channel)

    async def list_keys(request):
        return await admin.ListApiKeys(request, metadata=meta)

    async def list_credentials(request):
        return await admin.ListWorkerCredentials(request, metadata=meta)

    return list_keys, list_credentials


async def _refused(call, request, field: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(request)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert field in refused.value.details(), refused.value.details()


async def test_more_than_a_thousand_credentials_are_each_listed_once_across_pages(server) -> None:
    for name in ("acme", "globex"):
        await server.create_tenant(name)  # each with a key of its own, listed too
    keys, serving_acme, globex_alone = _seed(server)
    meta = server.admin_metadata()
    async with grpc.aio.insecure_channel(server.address) as channel:
        list_keys, list_credentials = _listings(channel, meta)

        first = await list_keys(admin_pb2.ListApiKeysRequest(tenant="acme"))
        assert len(first.api_keys) == 1000 and first.next_page_token, "an old client's request: the first page"
        for size in (0, 7, 1000):
            listed = await _every(list_keys, admin_pb2.ListApiKeysRequest(tenant="acme", page_size=size), "api_keys")
            assert len(listed) == len(set(listed)) == MANY + 1, size
            assert keys < set(listed) and not any(ident.startswith(("kx", "kg")) for ident in listed)

            every = await _every(list_credentials, admin_pb2.ListWorkerCredentialsRequest(page_size=size),
                                 "credentials")  # fmt: skip
            assert len(every) == len(set(every)) and set(every) == serving_acme | globex_alone, size
            mine = await _every(list_credentials,
                                admin_pb2.ListWorkerCredentialsRequest(tenant="acme", page_size=size),
                                "credentials")  # fmt: skip
            assert len(mine) == len(set(mine)) and set(mine) == serving_acme, size
            theirs = await _every(list_credentials,
                                  admin_pb2.ListWorkerCredentialsRequest(tenant="globex", page_size=size),
                                  "credentials")  # fmt: skip
            assert set(theirs) == globex_alone | {c for c in serving_acme if int(c[1:]) % 3 == 0}, size
        page = await list_keys(admin_pb2.ListApiKeysRequest(tenant="acme", page_size=1000))
        assert len(page.api_keys) == 1000 and page.next_page_token


async def test_a_page_token_serves_only_the_listing_and_tenant_that_made_it(server) -> None:
    for name in ("acme", "globex"):
        await server.create_tenant(name)
    _seed(server)
    meta = server.admin_metadata()
    async with grpc.aio.insecure_channel(server.address) as channel:
        list_keys, list_credentials = _listings(channel, meta)

        acme_keys = (await list_keys(admin_pb2.ListApiKeysRequest(tenant="acme", page_size=5))).next_page_token
        acme_creds = (await list_credentials(admin_pb2.ListWorkerCredentialsRequest(tenant="acme", page_size=5))
                      ).next_page_token  # fmt: skip
        all_creds = (await list_credentials(admin_pb2.ListWorkerCredentialsRequest(page_size=5))).next_page_token
        tenants = (await admin_pb2_grpc.AdminServiceStub(channel).ListTenants(
            admin_pb2.ListTenantsRequest(page_size=1), metadata=meta)).next_page_token  # fmt: skip
        assert acme_keys and acme_creds and all_creds and tenants
        decoded = base64.urlsafe_b64decode(acme_keys).decode()

        def encoded(text: str) -> str:
            return base64.urlsafe_b64encode(text.encode()).decode()

        altered = [
            encoded(decoded[:-1] + ("z" if decoded[-1] != "z" else "y")),  # another id, the check unchanged
            encoded(decoded.replace("ListApiKeys", "ListWorkerCredentials")),
            acme_keys[:-4], "nonsense", "x" * 2000, "\x00",
        ]  # fmt: skip
        foreign = [
            (list_keys, admin_pb2.ListApiKeysRequest(tenant="globex", page_token=acme_keys)),
            (list_keys, admin_pb2.ListApiKeysRequest(tenant="acme", page_token=acme_creds)),
            (list_credentials, admin_pb2.ListWorkerCredentialsRequest(tenant="acme", page_token=acme_keys)),
            (list_credentials, admin_pb2.ListWorkerCredentialsRequest(tenant="globex", page_token=acme_creds)),
            (list_credentials, admin_pb2.ListWorkerCredentialsRequest(page_token=acme_creds)),
            (list_credentials, admin_pb2.ListWorkerCredentialsRequest(tenant="acme", page_token=all_creds)),
            (list_keys, admin_pb2.ListApiKeysRequest(tenant="acme", page_token=tenants)),
            (list_credentials, admin_pb2.ListWorkerCredentialsRequest(page_token=tenants)),
        ]
        foreign += [(list_keys, admin_pb2.ListApiKeysRequest(tenant="acme", page_token=t)) for t in altered]
        foreign += [(list_credentials, admin_pb2.ListWorkerCredentialsRequest(page_token=t)) for t in altered]
        for call, request in foreign:
            await _refused(call, request, "page_token")
        # Its own listing takes it: the next page.
        assert len((await list_keys(admin_pb2.ListApiKeysRequest(tenant="acme", page_token=acme_keys,
                                                                  page_size=5))).api_keys) == 5  # fmt: skip


async def test_page_size_is_bounded(server) -> None:
    await server.create_tenant("acme")
    async with grpc.aio.insecure_channel(server.address) as channel:
        list_keys, list_credentials = _listings(channel, server.admin_metadata())
        for size in (-1, 1001, 2**31 - 1):
            await _refused(list_keys, admin_pb2.ListApiKeysRequest(tenant="acme", page_size=size), "page_size")
            await _refused(list_credentials, admin_pb2.ListWorkerCredentialsRequest(page_size=size), "page_size")
        answered = await list_keys(admin_pb2.ListApiKeysRequest(tenant="acme", page_size=1000))
        assert len(answered.api_keys) == 1 and not answered.next_page_token
