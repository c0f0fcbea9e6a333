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


class InvalidArgument(TickwheelError):
    """The request is malformed; nothing was written. → INVALID_ARGUMENT with BadRequest."""

    def __init__(self, violations: list[FieldViolation] | FieldViolation) -> None:
        self.violations = [violations] if isinstance(violations, FieldViolation) else list(violations)
        if not self.violations:
            raise ValueError("InvalidArgument needs at least one violation")
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in self.violations))

    @classmethod
    def field(cls, field: str, description: str) -> "InvalidArgument":
        return cls(FieldViolation(field, description))


class NotFound(TickwheelError):
    """No such resource visible to the caller. → NOT_FOUND (never a hint it exists elsewhere)."""

    def __init__(self, kind: str, ident: str) -> None:
        self.kind, self.ident = kind, ident
        super().__init__(f"{kind} {ident!r} not found")


class AlreadyExists(TickwheelError):
    """A resource with that name exists. → ALREADY_EXISTS."""

    def __init__(self, kind: str, ident: str) -> None:
        self.kind, self.ident = kind, ident
        super().__init__(f"{kind} {ident!r} already exists")


class FailedPrecondition(TickwheelError):
    """The resource is not in a state that allows the call. → FAILED_PRECONDITION."""

    def __init__(self, subject: str, description: str, kind: str = "STATE") -> None:
        self.subject, self.description, self.kind = subject, description, kind
        super().__init__(f"{subject}: {description}")


class VersionConflict(FailedPrecondition):
    """Optimistic concurrency: the caller's version is stale."""

    def __init__(self, subject: str, expected: int, actual: int) -> None:
        super().__init__(subject, f"version {expected} is stale; the current version is {actual}", kind="VERSION")
        self.expected, self.actual = expected, actual


class QuotaExceeded(TickwheelError):
    """A tenant quota would be exceeded; nothing was written. → RESOURCE_EXHAUSTED with QuotaFailure."""

    def __init__(self, tenant: str, quota: str, limit: int, description: str) -> None:
        self.tenant, self.quota, self.limit = tenant, quota, limit
        super().__init__(f"tenant {tenant!r}: {description} (quota {quota} = {limit})")


class RateLimited(TickwheelError):
    """Too many calls of some kind from ``subject`` (a peer, a server); nothing
    was done. → RESOURCE_EXHAUSTED with QuotaFailure and RetryInfo."""

    def __init__(self, subject: str, description: str, *, retry_after: float = 1.0) -> None:
        self.subject, self.description, self.retry_after = subject, description, retry_after
        super().__init__(description)


class Unauthenticated(TickwheelError):
    """No credential, or one that is wrong, expired or revoked. → UNAUTHENTICATED."""


class PermissionDenied(TickwheelError):
    """A valid credential that may not make this call. → PERMISSION_DENIED."""
