"""Domain errors → gRPC statuses with google.rpc error details, in one place.

Every servicer method is wrapped by :func:`rpc`, so a handler raises domain
errors (``tickwheel_server.errors``) and never builds a status itself.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from .. import errors
from ..store.errors import AmbiguousCommitError, StoreUnavailableError, TransactionConflictError
from ..store.classify import unavailable_reason
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)
R = TypeVar("R")


def _status(code: grpc.StatusCode, message: str, *details) -> status_pb2.Status:
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    return status


def _retry_info(seconds: float) -> error_details_pb2.RetryInfo:
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromMilliseconds(max(1, int(seconds * 1000)))
    return retry


def store_unavailable(error: Exception) -> str:
    """The message of a call refused because the store is unavailable: what
    it does (refusing writes, cancelling statements, …) when its SQLSTATE
    says, nothing more of the error (the log has that)."""
    if isinstance(error, StoreUnavailableError) and error.sqlstate:
        return f"the store is unavailable ({unavailable_reason(error.sqlstate)}); nothing was written; retry later"
    return "the store is unavailable; retry later"


COMMIT_UNKNOWN = (
    "the store did not answer the commit: the change may or may not have been made; read it back before "
    "repeating it (a call with the same request id is safe to repeat)"
)
"""The message of a call whose COMMIT went unanswered (the connection broke
while it was in flight, or CockroachDB's 40003): UNAVAILABLE, as the store's
outages are, but saying that this one may have been applied, with
``ErrorInfo`` reason ``COMMIT_OUTCOME_UNKNOWN`` for a client to tell it from
a refusal that wrote nothing."""


def status_for(error: Exception) -> tuple[grpc.StatusCode, status_pb2.Status]:
    """The gRPC code and rich status for a domain error (INTERNAL for anything unknown)."""
    if isinstance(error, errors.InvalidArgument):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                for v in error.violations
            ]
        )
        details = [bad]
        if isinstance(error, errors.AnswerTooLarge):
            details.append(error_details_pb2.ErrorInfo(
                reason="BATCH_ANSWER_TOO_LARGE", domain="tickwheel",
                metadata={"answer_bytes": str(error.size), "limit": str(error.budget)},
            ))  # fmt: skip
        if error.total > len(error.violations):
            details.append(error_details_pb2.ErrorInfo(
                reason="TOO_MANY_VIOLATIONS", domain="tickwheel",
                metadata={"violations": str(error.total), "listed": str(len(error.violations))},
            ))  # fmt: skip
        return grpc.StatusCode.INVALID_ARGUMENT, _status(grpc.StatusCode.INVALID_ARGUMENT, str(error), *details)
    if isinstance(error, errors.NotFound):
        info = error_details_pb2.ResourceInfo(resource_type=error.kind, resource_name=error.ident)
        return grpc.StatusCode.NOT_FOUND, _status(grpc.StatusCode.NOT_FOUND, str(error), info)
    if isinstance(error, errors.AlreadyExists):
        info = error_details_pb2.ResourceInfo(resource_type=error.kind, resource_name=error.ident)
        return grpc.StatusCode.ALREADY_EXISTS, _status(grpc.StatusCode.ALREADY_EXISTS, str(error), info)
    if isinstance(error, errors.FailedPrecondition):
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=error.kind, subject=error.subject, description=error.description
                )
            ]
        )
        return grpc.StatusCode.FAILED_PRECONDITION, _status(grpc.StatusCode.FAILED_PRECONDITION, str(error), failure)
    if isinstance(error, errors.QuotaExceeded):
        failure = error_details_pb2.QuotaFailure(
            violations=[
                error_details_pb2.QuotaFailure.Violation(subject=f"tenant:{error.tenant}", description=str(error))
            ]
        )
        info = error_details_pb2.ErrorInfo(
            reason="QUOTA_EXCEEDED", domain="tickwheel", metadata={"quota": error.quota, "limit": str(error.limit)}
        )
        retry = [] if error.retry_after is None else [_retry_info(error.retry_after)]
        return grpc.StatusCode.RESOURCE_EXHAUSTED, _status(
            grpc.StatusCode.RESOURCE_EXHAUSTED, str(error), failure, info, *retry
        )
    if isinstance(error, errors.RateLimited):
        failure = error_details_pb2.QuotaFailure(
            violations=[error_details_pb2.QuotaFailure.Violation(subject=error.subject, description=str(error))]
        )
        return grpc.StatusCode.RESOURCE_EXHAUSTED, _status(
            grpc.StatusCode.RESOURCE_EXHAUSTED, str(error), failure, _retry_info(error.retry_after)
        )
    if isinstance(error, errors.Unavailable):
        retry = _retry_info(error.retry_after)
        return grpc.StatusCode.UNAVAILABLE, _status(grpc.StatusCode.UNAVAILABLE, str(error), retry)
    if isinstance(error, errors.Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED, _status(grpc.StatusCode.UNAUTHENTICATED, str(error))
    if isinstance(error, errors.PermissionDenied):
        return grpc.StatusCode.PERMISSION_DENIED, _status(grpc.StatusCode.PERMISSION_DENIED, str(error))
    if isinstance(error, (StoreUnavailableError, TransactionConflictError)):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(500)
        return grpc.StatusCode.UNAVAILABLE, _status(grpc.StatusCode.UNAVAILABLE, store_unavailable(error), retry)
    if isinstance(error, AmbiguousCommitError):
        info = error_details_pb2.ErrorInfo(reason="COMMIT_OUTCOME_UNKNOWN", domain="tickwheel")
        return grpc.StatusCode.UNAVAILABLE, _status(grpc.StatusCode.UNAVAILABLE, COMMIT_UNKNOWN, info)
    return grpc.StatusCode.INTERNAL, _status(grpc.StatusCode.INTERNAL, "internal error")


def refusal_answer(error: errors.TickwheelError, retry_after: float) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """(code, message, trailing metadata) of ``error`` (a refusal with a
    retry delay) told to retry after ``retry_after`` seconds: what a call
    inside its caller's refusal window is answered
    (:mod:`tickwheel_server.auth.windows`), built once a window."""
    code, status = status_for(error)
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            detail.Pack(_retry_info(retry_after))
    return code, status.message, (("grpc-status-details-bin", status.SerializeToString()),)


def retry_delay(trailing_metadata) -> float | None:
    """The RetryInfo delay, in seconds, in a refusal's trailing metadata
    (:func:`refusal_answer`, :func:`abort`); None when it holds none."""
    for key, value in trailing_metadata or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    return info.retry_delay.ToTimedelta().total_seconds()
    return None


async def abort(context: grpc.aio.ServicerContext, error: Exception) -> None:
    code, status = status_for(error)
    assert status.code != code_pb2.OK
    await context.abort(code, status.message, trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),))


_outages: dict[str, OutageLog] = {}
"""Per method (one each: the services' methods are a fixed set), its calls
refused because the store is unavailable, logged as a background loop's
failures are (:class:`~tickwheel_server.telemetry.outages.OutageLog`): an
outage fails every call, and a line per call would flood the log with what
one line a minute says (docs/operations.md, "Outages of the store or etcd")."""


def _outage(name: str) -> OutageLog:
    found = _outages.get(name)
    if found is None:
        found = _outages[name] = OutageLog(log, name, time, then="refused UNAVAILABLE")
    return found


def rpc(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Wrap a unary servicer method: domain errors become statuses, the rest INTERNAL (logged)."""

    @functools.wraps(method)
    async def wrapper(self, request, context: grpc.aio.ServicerContext) -> R:
        try:
            answer = await method(self, request, context)
        except errors.TickwheelError as error:
            await abort(context, error)
        except (StoreUnavailableError, AmbiguousCommitError) as error:  # the store went away: one outage's lines
            _outage(method.__qualname__).failed("a call", error)
            await abort(context, error)
        except TransactionConflictError as error:  # conflicts past the retries: rare, each its own line
            log.warning("%s: store unavailable: %s", method.__qualname__, error)
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            log.exception("%s failed", method.__qualname__)
            await abort(context, error)
        else:
            outage = _outages.get(method.__qualname__)
            if outage is not None and outage.down:
                outage.ok()
            return answer
        raise AssertionError("unreachable")

    return wrapper
