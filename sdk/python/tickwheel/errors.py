"""Errors raised by the Tickwheel client.

Every failed RPC surfaces as one :class:`TickwheelError` carrying the gRPC
status code, the server's message, and the structured details the server put
in the ``grpc-status-details-bin`` trailer (a ``google.rpc.Status``):
``BadRequest`` field violations for INVALID_ARGUMENT, ``PreconditionFailure``
for FAILED_PRECONDITION and ``QuotaFailure`` for RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

__all__ = ["FieldViolation", "TickwheelError"]


@dataclass(frozen=True)
class FieldViolation:
    """One invalid field of a request, from a ``google.rpc.BadRequest``.

    ``field`` is the path within the request (``job.schedule.cron.expression``),
    ``description`` says what is wrong with it.
    """

    field: str
    description: str

    def __str__(self) -> str:
        return f"{self.field}: {self.description}" if self.field else self.description


class TickwheelError(Exception):
    """A call to a Tickwheel server failed.

    Attributes:
        code: the gRPC status code (``grpc.StatusCode.INVALID_ARGUMENT``, ...).
        message: the status message as the server sent it (may be empty).
        field_violations: the BadRequest violations, in the server's order;
            empty when the server sent none.
        details: every detail message the server attached, unpacked where the
            type is known (``BadRequest``, ``PreconditionFailure``,
            ``QuotaFailure``, ``ErrorInfo``, ...), otherwise the raw ``Any``.

    ``str(error)`` is one line: ``CODE: field: description; ...`` followed by
    the message in parentheses when it adds something, or ``CODE: message``
    when there are no violations.
    """

    code: grpc.StatusCode
    message: str
    field_violations: tuple[FieldViolation, ...]
    details: tuple[Any, ...]

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str = "",
        field_violations: tuple[FieldViolation, ...] | list[FieldViolation] = (),
        details: tuple[Any, ...] | list[Any] = (),
    ) -> None:
        self.code = code
        self.message = message
        self.field_violations = tuple(field_violations)
        self.details = tuple(details)
        super().__init__(self._one_line())

    @property
    def code_name(self) -> str:
        """The status code's canonical name, for example ``INVALID_ARGUMENT``."""
        return self.code.name

    def _one_line(self) -> str:
        text = "; ".join(str(v) for v in self.field_violations)
        message = " ".join(self.message.split())  # one line, whatever the server sent
        if not text:
            text = message or "(no message)"
        elif message and message not in text:
            text = f"{text} ({message})"
        return f"{self.code.name}: {text}"

    def __repr__(self) -> str:
        return (
            f"TickwheelError(code={self.code.name}, message={self.message!r}, "
            f"field_violations={list(self.field_violations)!r})"
        )

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> TickwheelError:
        """Builds the error from a failed call (sync ``grpc.RpcError`` or
        ``grpc.aio.AioRpcError``; both expose ``code()``, ``details()`` and
        ``trailing_metadata()`` synchronously once the call has ended).

        A malformed or inconsistent details trailer is ignored rather than
        masking the status code.
        """
        code = _call_attr(error, "code") or grpc.StatusCode.UNKNOWN
        message = _call_attr(error, "details") or ""
        try:
            status = rpc_status.from_call(error)  # type: ignore[arg-type]
        except Exception:  # inconsistent (ValueError) or corrupt (DecodeError) trailer
            status = None
        violations, details = _parse_details(status.details if status is not None else ())
        return cls(code, message, violations, details)

    @classmethod
    def from_status(cls, status: status_pb2.Status) -> TickwheelError:
        """Builds the error from a ``google.rpc.Status`` carried in a response
        (a BatchCreateJobs item's ``error``), mapped as :meth:`from_rpc_error`
        maps a failed call's. A code outside gRPC's range, or OK (an error
        that claims success), reads as UNKNOWN."""
        code = _CODES.get(status.code, grpc.StatusCode.UNKNOWN)
        if code == grpc.StatusCode.OK:
            code = grpc.StatusCode.UNKNOWN
        violations, details = _parse_details(status.details)
        return cls(code, status.message, violations, details)


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _parse_details(any_details: Any) -> tuple[list[FieldViolation], list[Any]]:
    """The BadRequest field violations and every detail, unpacked where known."""
    details: list[Any] = []
    violations: list[FieldViolation] = []
    for any_detail in any_details:
        unpacked = _unpack(any_detail)
        details.append(unpacked)
        if isinstance(unpacked, error_details_pb2.BadRequest):
            violations.extend(FieldViolation(v.field, v.description) for v in unpacked.field_violations)
    return violations, details


_KNOWN_DETAILS = (
    error_details_pb2.BadRequest,
    error_details_pb2.PreconditionFailure,
    error_details_pb2.QuotaFailure,
    error_details_pb2.ErrorInfo,
    error_details_pb2.RetryInfo,
    error_details_pb2.ResourceInfo,
    error_details_pb2.DebugInfo,
)


def _unpack(any_detail: Any) -> Any:
    for message_type in _KNOWN_DETAILS:
        if any_detail.Is(message_type.DESCRIPTOR):
            message = message_type()
            any_detail.Unpack(message)
            return message
    return any_detail


def _call_attr(error: Any, name: str) -> Any:
    getter = getattr(error, name, None)
    if getter is None:
        return None
    try:
        return getter()
    except Exception:
        return None
