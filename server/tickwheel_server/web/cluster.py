"""The cluster view: ClusterStatus itself, as JSON, with partitions counted
per owner.

The answer is AdminService's own ClusterStatus (every live server with its
published figures, each partition's holder in etcd, the deepest ready
queues), called through the request's credential, so the console shows
exactly what ``tickwheel admin status`` and grpcurl show. The per-partition
list is summed up per owner here (:func:`partitions_by_owner`, pure)
instead of being sent whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf import json_format
from tickwheel.v1 import admin_pb2

from ..api.admin import AdminServicer
from ..store.operations import READY_COUNT_CAP
from .auth import credential_of
from .call import HttpCallContext
from .router import Request


@dataclass(frozen=True)
class OwnerShare:
    server_id: str
    partitions: int
    live: bool
    """The owner is among the live servers."""


def partitions_by_owner(partitions: Iterable[admin_pb2.PartitionStatus], live: set[str]) -> list[OwnerShare]:
    """How many partitions each owner holds, most first (ties by id);
    partitions without an owner are left out (see :func:`unowned`)."""
    counts = Counter(p.server_id for p in partitions if p.server_id)
    return [
        OwnerShare(owner, count, owner in live)
        for owner, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def unowned(partitions: Iterable[admin_pb2.PartitionStatus], partition_count: int) -> int:
    """Partitions nobody holds: listed without an owner, or never given an epoch."""
    listed = list(partitions)
    return sum(1 for p in listed if not p.server_id) + max(0, partition_count - len(listed))


class ClusterView:
    def __init__(self, admin: AdminServicer, server_id: str) -> None:
        self._admin = admin
        self._server_id = server_id

    async def status(self, request: Request, top: int) -> dict:
        """``cluster``: the ClusterStatusResponse without its partition list;
        ``owners``: partitions per owner; ``unownedPartitions``;
        ``answeredBy``: this server; ``readyCountCap``: the figure a
        deeper queue's ready count stops at. The call's errors arrive as
        :class:`~tickwheel_server.web.call.CallAborted`."""
        context = HttpCallContext(credential_of(request).secret, request.peer)
        reply = await self._admin.ClusterStatus(admin_pb2.ClusterStatusRequest(top_tenants=top), context)
        live = {server.server_id for server in reply.servers}
        owners = partitions_by_owner(reply.partitions, live)
        nobody = unowned(reply.partitions, reply.partition_count)
        reply.ClearField("partitions")
        return {
            "cluster": json_format.MessageToDict(reply),
            "owners": [{"serverId": s.server_id, "partitions": s.partitions, "live": s.live} for s in owners],
            "unownedPartitions": nobody,
            "answeredBy": self._server_id,
            "readyCountCap": READY_COUNT_CAP,
        }
