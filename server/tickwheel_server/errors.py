"""Domain errors, raised by stores and services and mapped to gRPC statuses
in one place (``tickwheel_server.api.status``).

Each names what the caller got wrong, so the status message and its details
can point at the field, the resource or the quota.
"""

from __future__ import annotations

from dataclasses import dataclass


class TickwheelError(Exception):
    """Base of the errors a caller can act on."""


@dataclass(frozen=True)
class FieldViolation:
    """One invalid field: ``field`` is the request path (``job.schedule.cron.expression``)."""

    field: str
    description: str


MAX_LISTED_VIOLATIONS = 20
"""At most this many violations are listed in one error (the rest are counted)."""
MAX_VIOLATION_FIELD = 160
MAX_VIOLATION_DESCRIPTION = 400
"""Each listed field path and description is cut to this many characters."""
MAX_LISTED_BYTES = 1400
"""The listed violations' fields and descriptions in all, in UTF-8 (the first is listed whatever its size).
The status goes out twice in the trailers, as ``grpc-message`` and inside
``grpc-status-details-bin`` (base64, a third more), and a client refuses
trailers over 8 KiB at random (grpcio's soft limit, 16 KiB always): twenty
violations of 560 characters made 40 KiB, ten made 11.7 KiB."""
MAX_SHOWN_IDENT = 160
"""A resource's name or id as a NOT_FOUND, ALREADY_EXISTS or FAILED_PRECONDITION
shows it (the caller's text, echoed): cut to this many characters, so that no
status outgrows the trailers a client accepts (16 KiB in gRPC's default)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class InvalidArgument(TickwheelError):
    """The request is malformed; nothing was written. → INVALID_ARGUMENT with BadRequest.

    Bounded, so that the status fits in the trailers a client accepts: only
    the first :data:`MAX_LISTED_VIOLATIONS` violations, and of those no more
    than :data:`MAX_LISTED_BYTES` hold, are kept in ``violations`` (each
    field and description cut to a fixed length); ``total`` counts them
    all, and the message says how many were left out.
    """

    def __init__(self, violations: list[FieldViolation] | FieldViolation) -> None:
        found = [violations] if isinstance(violations, FieldViolation) else list(violations)
        if not found:
            raise ValueError("InvalidArgument needs at least one violation")
        self.total = len(found)
        self.violations = []
        listed_bytes = 0
        for v in found[:MAX_LISTED_VIOLATIONS]:
            cut = FieldViolation(_cut(v.field, MAX_VIOLATION_FIELD), _cut(v.description, MAX_VIOLATION_DESCRIPTION))
            listed_bytes += len(cut.field.encode()) + len(cut.description.encode())
            if self.violations and listed_bytes > MAX_LISTED_BYTES:
                break
            self.violations.append(cut)
        message = "; ".join(f"{v.field}: {v.description}" if v.field else v.description for v in self.violations)
        if self.total > len(self.violations):
            message += f"; and {self.total - len(self.violations)} more violations not listed"
        super().__init__(message)

    @classmethod
    def field(cls, field: str, description: str) -> "InvalidArgument":
        return cls(FieldViolation(field, description))


class AnswerTooLarge(InvalidArgument):
    """A batch whose answer would be over what a default client reads,
    refused before anything is written. → INVALID_ARGUMENT ``items`` with
    an ErrorInfo reason BATCH_ANSWER_TOO_LARGE."""

    def __init__(self, size: int, budget: int) -> None:
        super().__init__(FieldViolation(
            "items",
            f"the answer would be about {size} bytes, over the {budget} a batch answers (a default client reads "
            "4 MiB); nothing was written: send fewer items, or view JOB_VIEW_BASIC to answer each job without "
            "its definition",
        ))  # fmt: skip
        self.size = size
        self.budget = budget


class NotFound(TickwheelError):
    """No such resource visible to the caller. → NOT_FOUND (never a hint it exists elsewhere)."""

    def __init__(self, kind: str, ident: str) -> None:
        self.kind, self.ident = kind, _cut(ident, MAX_SHOWN_IDENT)
        super().__init__(f"{kind} {self.ident!r} not found")


class AlreadyExists(TickwheelError):
    """A resource with that name exists. → ALREADY_EXISTS."""

    def __init__(self, kind: str, ident: str) -> None:
        self.kind, self.ident = kind, _cut(ident, MAX_SHOWN_IDENT)
        super().__init__(f"{kind} {self.ident!r} already exists")


class FailedPrecondition(TickwheelError):
    """The resource is not in a state that allows the call. → FAILED_PRECONDITION."""

    def __init__(self, subject: str, description: str, kind: str = "STATE") -> None:
        self.subject = _cut(subject, MAX_SHOWN_IDENT)
        self.description, self.kind = _cut(description, MAX_VIOLATION_DESCRIPTION), kind
        super().__init__(f"{self.subject}: {self.description}")


class VersionConflict(FailedPrecondition):
    """Optimistic concurrency: the caller's version is stale."""

    def __init__(self, subject: str, expected: int, actual: int) -> None:
        super().__init__(subject, f"version {expected} is stale; the current version is {actual}", kind="VERSION")
        self.expected, self.actual = expected, actual


class QuotaExceeded(TickwheelError):
    """A tenant quota would be exceeded; nothing was written. → RESOURCE_EXHAUSTED with QuotaFailure
    (and RetryInfo when ``retry_after`` is given: a rate, not a count)."""

    def __init__(
        self, tenant: str, quota: str, limit: int, description: str, *, retry_after: float | None = None
    ) -> None:
        self.tenant, self.quota, self.limit = tenant, quota, limit
        self.retry_after = retry_after
        super().__init__(f"tenant {tenant!r}: {description} (quota {quota} = {limit})")


class RateLimited(TickwheelError):
    """Too many calls of some kind from ``subject`` (a peer, a server); nothing
    was done. → RESOURCE_EXHAUSTED with QuotaFailure and RetryInfo."""

    def __init__(self, subject: str, description: str, *, retry_after: float = 1.0) -> None:
        self.subject, self.description, self.retry_after = subject, description, retry_after
        super().__init__(description)


class Unavailable(TickwheelError):
    """This server cannot do it now, another may, or this one shortly (its
    session is in doubt, say). → UNAVAILABLE with RetryInfo."""

    def __init__(self, description: str, *, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(description)


class Unauthenticated(TickwheelError):
    """No credential, or one that is wrong, expired or revoked. → UNAUTHENTICATED."""


class PermissionDenied(TickwheelError):
    """A valid credential that may not make this call. → PERMISSION_DENIED."""
