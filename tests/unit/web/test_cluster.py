"""The cluster view: ClusterStatus called with the request's credential,
partitions summed per owner, and the call's errors as HTTP statuses."""

from __future__ import annotations

from datetime import timedelta

import grpc
import pytest
from tickwheel.v1 import admin_pb2

from tickwheel_server.api.status import abort
from tickwheel_server.errors import InvalidArgument, PermissionDenied
from tickwheel_server.store.operations import READY_COUNT_CAP
from tickwheel_server.web.call import CallAborted, HttpCallContext
from tickwheel_server.web.cluster import ClusterView, OwnerShare, partitions_by_owner, unowned
from tickwheel_server.web.router import HttpError, Request


def partitions(*owners: str) -> list[admin_pb2.PartitionStatus]:
    return [admin_pb2.PartitionStatus(partition=n, server_id=owner, epoch=10 + n) for n, owner in enumerate(owners)]


def test_partitions_are_counted_per_owner_most_first_and_marked_live_or_not() -> None:
    shown = partitions("b", "a", "b", "gone", "", "a", "b")
    assert partitions_by_owner(shown, live={"a", "b"}) == [
        OwnerShare("b", 3, True), OwnerShare("a", 2, True), OwnerShare("gone", 1, False)]  # fmt: skip
    assert unowned(shown, partition_count=7) == 1
    assert unowned(shown, partition_count=10) == 4  # three never had an epoch
    assert partitions_by_owner([], live={"a"}) == []


class Admin:
    """Stands in for AdminServicer: answers ClusterStatus, recording the call."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[tuple[int, tuple]] = []

    async def ClusterStatus(self, request, context):
        self.calls.append((request.top_tenants, tuple(context.invocation_metadata())))
        if self.error is not None:
            await abort(context, self.error)
        reply = admin_pb2.ClusterStatusResponse(
            servers=[admin_pb2.ServerStatus(server_id="s1", workers=3), admin_pb2.ServerStatus(server_id="s2")],
            partitions=partitions("s1", "s2", "s1", ""),
            partition_count=4, reaper_server_id="s2", store_engine="postgresql",
        )  # fmt: skip
        queue = reply.queues.add(tenant="acme", ready=7, running=2)
        queue.oldest_ready_age.FromTimedelta(timedelta(seconds=3))
        return reply


def request(credential: str = "admin-token") -> Request:
    return Request("GET", "/api/cluster", "/api/cluster", {}, {"authorization": f"Bearer {credential}"})


async def test_the_view_is_cluster_status_called_with_the_requests_credential() -> None:
    admin = Admin()
    shown = await ClusterView(admin, "s1").status(request(), top=5)
    assert admin.calls == [(5, (("authorization", "Bearer admin-token"),))]
    assert [s["serverId"] for s in shown["cluster"]["servers"]] == ["s1", "s2"]
    assert shown["cluster"]["queues"] == [{"tenant": "acme", "ready": "7", "running": "2", "oldestReadyAge": "3s"}]
    assert (shown["cluster"]["reaperServerId"], shown["cluster"]["partitionCount"]) == ("s2", 4)
    assert "partitions" not in shown["cluster"]
    assert shown["owners"] == [
        {"serverId": "s1", "partitions": 2, "live": True}, {"serverId": "s2", "partitions": 1, "live": True}]  # fmt: skip
    assert (shown["unownedPartitions"], shown["answeredBy"], shown["readyCountCap"]) == (1, "s1", READY_COUNT_CAP)


@pytest.mark.parametrize(
    ("error", "status", "fields"),
    [
        (InvalidArgument.field("top_tenants", "must be between 0 and 100"), 400, [
            {"field": "top_tenants", "description": "must be between 0 and 100"}]),
        (PermissionDenied("AdminService needs the admin credential"), 403, []),
    ],
)  # fmt: skip
async def test_the_calls_errors_arrive_with_their_http_status_and_fields(error, status, fields) -> None:
    with pytest.raises(CallAborted) as aborted:
        await ClusterView(Admin(error), "s1").status(request(), top=10)
    assert (aborted.value.http_status, aborted.value.fields, aborted.value.details) == (status, fields, str(error))


async def test_a_request_without_a_credential_never_reaches_the_call() -> None:
    admin = Admin()
    with pytest.raises(HttpError) as error:
        await ClusterView(admin, "s1").status(Request("GET", "/", "/", {}, {}), top=10)
    assert error.value.status == 401 and admin.calls == []


async def test_an_abort_with_an_unmapped_code_is_500() -> None:
    with pytest.raises(CallAborted) as aborted:
        await HttpCallContext("x").abort(grpc.StatusCode.DATA_LOSS, "lost")
    assert aborted.value.http_status == 500
