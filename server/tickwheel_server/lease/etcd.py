"""The lease store on a real etcd cluster (v3 API over gRPC).

Why our own client: the server is asyncio, and the Python etcd clients (etcd3
0.12 and its maintained fork etcd-sdk-python, imported as ``pyetcd``) are
synchronous; etcd3 0.12 also only imports with protobuf in its slow
pure-Python mode. So we use only the *generated stubs* that etcd-sdk-python
ships (``pyetcd.etcdrpc``: ``KVStub``, ``LeaseStub``, ``WatchStub`` and their
messages, which work under the upb protobuf runtime and on a ``grpc.aio``
channel) and write the small async client on top, in four parts:

* :mod:`~tickwheel_server.lease.etcd_transport`: channels, endpoint failover
  and unary calls with a deadline;
* :mod:`~tickwheel_server.lease.etcd_session`: a ``LeaseKeepAlive`` bidi
  stream per session, and when a session counts as lost;
* :mod:`~tickwheel_server.lease.etcd_watch`: ``Watch`` streams that resume
  from the last revision seen;
* this module: :class:`EtcdLeaseStore`, the keys and elections as KV and Txn
  calls, compaction (KV Compact) and alarms (Maintenance Alarm), and closing
  it all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import grpc
from pyetcd.etcdrpc import kv_pb2, rpc_pb2

from tickwheel.shared.clock import Clock
from tickwheel_server.lease.base import DEFAULT_SESSION_TTL, LeaseStore, Session, Watch
from tickwheel_server.lease.etcd_session import EtcdSession
from tickwheel_server.lease.etcd_transport import Stubs, Transport
from tickwheel_server.lease.etcd_watch import EtcdWatch
from tickwheel_server.lease.types import (
    KeyValue,
    LeaseStoreClosed,
    LeaseStoreFatal,
    Ownership,
    SessionLost,
    prefix_range_end,
    to_bytes,
    validate_key,
    validate_revision,
    validate_ttl,
)

DEFAULT_REQUEST_TIMEOUT = 5.0


class EtcdLeaseStore(LeaseStore):
    """:class:`LeaseStore` on etcd; see the module docstring.

    ``endpoints`` are ``host:port`` strings (plaintext gRPC). Channels are
    created on first use, inside the running event loop; nothing is contacted
    at construction. ``request_timeout`` is the deadline of each unary call.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        clock: Clock,
        *,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self._transport = Transport(endpoints, clock, request_timeout)
        self._clock = clock
        self._sessions: set[EtcdSession] = set()
        self._watches: set[EtcdWatch] = set()

    @property
    def endpoints(self) -> list[str]:
        return list(self._transport.endpoints.endpoints)

    # -- calls ----------------------------------------------------------------------

    async def _session_call(
        self, session: Session, pick: Callable[[Stubs], Callable[..., Any]], request: Any, what: str
    ) -> Any:
        """A call made under ``session``: refused if it is lost; if etcd no
        longer knows its lease, the session is marked lost."""
        session.raise_if_lost()
        try:
            return await self._transport.call(pick, request, what)
        except SessionLost as exc:
            reason = f"etcd no longer knows the lease ({exc})"
            if isinstance(session, EtcdSession):
                session.expire(reason)
            else:
                session._mark_lost(reason)
            raise session._lost_error() from exc

    @staticmethod
    def _kv(kv: kv_pb2.KeyValue) -> KeyValue:
        return KeyValue(kv.key.decode(), kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)

    # -- sessions ---------------------------------------------------------------------

    async def open_session(self, ttl: int = DEFAULT_SESSION_TTL, *, keepalive: bool = True) -> EtcdSession:
        validate_ttl(ttl)
        if self._transport.closing:
            raise LeaseStoreClosed("lease store closed")
        sent_at = self._clock.monotonic()
        response = await self._transport.call(
            lambda s: s.lease.LeaseGrant, rpc_pb2.LeaseGrantRequest(TTL=ttl), "lease grant"
        )
        if response.error:
            raise LeaseStoreFatal(f"etcd lease grant: {response.error}")
        session = EtcdSession(self._transport, response.ID, response.TTL, sent_at + response.TTL, self._sessions)
        self._sessions.add(session)
        session.start(keepalive)
        return session

    # -- keys ---------------------------------------------------------------------------

    async def put(self, key: str, value: bytes | str, *, session: Session | None = None) -> int:
        request = rpc_pb2.PutRequest(key=validate_key(key).encode(), value=to_bytes(value))
        if session is None:
            response = await self._transport.call(lambda s: s.kv.Put, request, "put")
        else:
            request.lease = session.id
            response = await self._session_call(session, lambda s: s.kv.Put, request, "put")
        return response.header.revision

    async def get(self, key: str) -> KeyValue | None:
        request = rpc_pb2.RangeRequest(key=validate_key(key).encode())
        response = await self._transport.call(lambda s: s.kv.Range, request, "get")
        return self._kv(response.kvs[0]) if response.kvs else None

    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        raw = prefix.encode()
        request = rpc_pb2.RangeRequest(
            key=raw or b"\0",
            range_end=prefix_range_end(raw),
            sort_order=rpc_pb2.RangeRequest.ASCEND,
            sort_target=rpc_pb2.RangeRequest.KEY,
        )
        response = await self._transport.call(lambda s: s.kv.Range, request, "get prefix")
        return [self._kv(kv) for kv in response.kvs]

    async def delete(self, key: str) -> bool:
        request = rpc_pb2.DeleteRangeRequest(key=validate_key(key).encode())
        response = await self._transport.call(lambda s: s.kv.DeleteRange, request, "delete")
        return response.deleted > 0

    async def current_revision(self) -> int:
        request = rpc_pb2.RangeRequest(key=b"\0", limit=1, count_only=True)
        response = await self._transport.call(lambda s: s.kv.Range, request, "revision")
        return response.header.revision

    async def compact(self, revision: int) -> bool:
        request = rpc_pb2.CompactionRequest(revision=validate_revision(revision), physical=False)
        try:
            await self._transport.call(lambda s: s.kv.Compact, request, "compact")
        except LeaseStoreFatal as exc:
            cause = exc.__cause__
            if isinstance(cause, grpc.aio.AioRpcError) and cause.code() is grpc.StatusCode.OUT_OF_RANGE:
                details = cause.details() or ""
                if "compacted" in details:
                    return False  # already compacted at or past it (by us or etcd's own compactor)
                if "future revision" in details:
                    raise ValueError(f"cannot compact to revision {revision}: {details}") from None
            raise
        return True

    async def alarms(self) -> list[str]:
        request = rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET, memberID=0, alarm=rpc_pb2.NONE)
        response = await self._transport.call(lambda s: s.maintenance.Alarm, request, "alarm")
        return sorted({rpc_pb2.AlarmType.Name(member.alarm) for member in response.alarms if member.alarm})

    def watch(self, key: str, *, prefix: bool = False, start_revision: int | None = None) -> Watch:
        if self._transport.closing:
            raise LeaseStoreClosed("lease store closed")
        if prefix:
            raw = key.encode()
            return EtcdWatch(self._transport, raw or b"\0", prefix_range_end(raw), start_revision, self._watches)
        return EtcdWatch(self._transport, validate_key(key).encode(), b"", start_revision, self._watches)

    # -- elections --------------------------------------------------------------------

    async def _acquire_once(self, key: str, value: bytes, session: Session) -> tuple[Ownership | None, int]:
        raw = validate_key(key).encode()
        request = rpc_pb2.TxnRequest(
            compare=[
                rpc_pb2.Compare(
                    result=rpc_pb2.Compare.EQUAL, target=rpc_pb2.Compare.CREATE, key=raw, create_revision=0
                )
            ],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=raw, value=value, lease=session.id))],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=raw))],
        )
        response = await self._session_call(session, lambda s: s.kv.Txn, request, "acquire")
        revision = response.header.revision
        if response.succeeded:
            return Ownership(key, value, revision, session), revision
        kvs = response.responses[0].response_range.kvs
        if kvs and kvs[0].lease == session.id:
            return Ownership(key, kvs[0].value, kvs[0].create_revision, session), revision
        return None, revision

    async def _delete_if_created_at(self, key: str, create_revision: int) -> bool:
        raw = validate_key(key).encode()
        request = rpc_pb2.TxnRequest(
            compare=[
                rpc_pb2.Compare(
                    result=rpc_pb2.Compare.EQUAL,
                    target=rpc_pb2.Compare.CREATE,
                    key=raw,
                    create_revision=create_revision,
                )
            ],
            success=[rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=raw))],
        )
        response = await self._transport.call(lambda s: s.kv.Txn, request, "resign")
        return bool(response.succeeded and response.responses[0].response_delete_range.deleted)

    # -- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        if self._transport.closing:
            return
        self._transport.begin_close()
        for watch in list(self._watches):
            watch.cancel_for_close()
        self._watches.clear()
        # Sessions revoke their leases before the channels close.
        await asyncio.gather(*(session.close() for session in list(self._sessions)), return_exceptions=True)
        await self._transport.close()
