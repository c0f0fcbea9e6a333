"""An HTTP request as the context of a gRPC call, for answering it with a
servicer method of the gRPC API itself.

The method reads the caller's credential from the request's
``Authorization`` header (as :class:`~tickwheel_server.web.auth.HeaderMetadata`)
and its errors arrive as :class:`CallAborted`, carrying the gRPC status,
which the console maps to HTTP as gRPC-to-HTTP gateways do.
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2

from .auth import HeaderMetadata

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
"""gRPC status → HTTP status (anything else: 500)."""


class CallAborted(grpc.aio.AbortError):
    """The servicer ended the call with a status other than OK."""

    def __init__(self, code: grpc.StatusCode, details: str, fields: list[dict[str, str]]) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.fields = fields
        """BadRequest field violations, as ``{"field", "description"}``."""

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)


def _fields(trailing_metadata) -> list[dict[str, str]]:
    fields = []
    for key, value in trailing_metadata or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                fields += [{"field": v.field, "description": v.description} for v in bad.field_violations]
    return fields


class HttpCallContext(HeaderMetadata):
    """The part of ``grpc.aio.ServicerContext`` the servicers use: the
    caller's metadata, and ``abort``."""

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata=()) -> None:
        raise CallAborted(code, details, _fields(trailing_metadata))
