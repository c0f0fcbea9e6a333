"""A tenant's operator-set settings from a Tenant message: UpdateTenant's mask and every value bounded (pure).

The contract is ``UpdateTenantRequest`` in ``proto/tickwheel/v1/admin.proto``:
``quotas`` replaces all four quotas (a quota left 0 takes its default), a
``quotas.<name>`` path changes that quota alone, and a mask that is not
exactly a set of those paths is refused whole, naming each bad path.
"""

from __future__ import annotations

from collections.abc import Collection

from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2

from ..errors import FieldViolation, InvalidArgument
from ..store.tenants import (
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_PENDING_MANUAL_RUNS,
    DEFAULT_REQUESTS_PER_SECOND,
    LIMIT_MAX_JOBS,
    LIMIT_MAX_PAYLOAD_BYTES,
    LIMIT_MAX_PENDING_MANUAL_RUNS,
    LIMIT_REQUESTS_PER_SECOND,
)
from .text import shown

QUOTAS = {
    "max_jobs": (DEFAULT_MAX_JOBS, LIMIT_MAX_JOBS),
    "max_payload_bytes": (DEFAULT_MAX_PAYLOAD_BYTES, LIMIT_MAX_PAYLOAD_BYTES),
    "requests_per_second": (DEFAULT_REQUESTS_PER_SECOND, LIMIT_REQUESTS_PER_SECOND),
    "max_pending_manual_runs": (DEFAULT_MAX_PENDING_MANUAL_RUNS, LIMIT_MAX_PENDING_MANUAL_RUNS),
}
"""Each ``TenantQuotas`` field: (what 0 means, the largest value taken)."""
WHOLE_SETTINGS = ("weight", "max_concurrency", "quotas")
"""What an empty UpdateTenant mask means (CreateTenant takes the same)."""
QUOTA_PATHS = tuple(f"quotas.{name}" for name in QUOTAS)
UPDATE_PATHS = frozenset((*WHOLE_SETTINGS, *QUOTA_PATHS))
"""Every path an UpdateTenant mask may name."""
SHOWN_PATHS = 4
"""A refused mask's answer names at most this many of its bad paths (each cut
to 40 characters), so that it fits in one violation's description."""


def update_paths(mask: field_mask_pb2.FieldMask) -> frozenset[str]:
    """The paths an UpdateTenant changes: the mask's, or
    :data:`WHOLE_SETTINGS` when it is empty. INVALID_ARGUMENT
    ``update_mask`` naming the paths that are not in :data:`UPDATE_PATHS`,
    those given twice, and a ``quotas.<name>`` given beside ``quotas``
    (which sets that quota already: which value was meant is not clear)."""
    if not mask.paths:
        return frozenset(WHOLE_SETTINGS)
    unknown: list[str] = []
    twice: list[str] = []
    seen: set[str] = set()
    for path in mask.paths:
        if path in seen:
            twice.append(path)
        elif path not in UPDATE_PATHS:
            unknown.append(path)
        seen.add(path)
        if len(unknown) + len(twice) == SHOWN_PATHS:  # the answer stays small whatever the mask holds
            break
    beside = [path for path in QUOTA_PATHS if path in seen] if "quotas" in seen else []
    problems = []
    if unknown:
        problems.append(f"not a tenant setting that can change: {_listed(unknown)} "
                        f"(allowed: {', '.join(sorted(UPDATE_PATHS))})")  # fmt: skip
    if twice:
        problems.append(f"given twice: {_listed(twice)}")
    if beside:
        problems.append(f"'quotas' sets all four quotas: give it alone, not with {_listed(beside)}")
    if problems:
        raise InvalidArgument.field("update_mask", "; ".join(problems))
    return frozenset(seen)


def _listed(paths: list[str]) -> str:
    return ", ".join(f"'{shown(path, 40)}'" for path in dict.fromkeys(paths))


def tenant_settings(message: admin_pb2.Tenant, paths: Collection[str], field: str = "tenant") -> dict:
    """The store's settings (``TenantStore.update``'s keywords) that
    ``paths`` name, with their values from ``message``: ``quotas`` names all
    four quotas, ``quotas.<name>`` one; 0 means the default. INVALID_ARGUMENT
    naming every value out of its bounds (``tenant.quotas.max_jobs``), the
    values of paths not named left unread."""
    violations: list[FieldViolation] = []
    settings: dict = {}
    if "weight" in paths:
        weight = message.weight or 1
        if not 1 <= weight <= 1000:
            violations.append(FieldViolation(f"{field}.weight", "must be between 1 and 1000"))
        settings["weight"] = weight
    if "max_concurrency" in paths:
        if message.max_concurrency < 0:
            violations.append(FieldViolation(f"{field}.max_concurrency", "must be >= 0 (0 means no cap)"))
        settings["max_concurrency"] = message.max_concurrency
    for name, (default, limit) in QUOTAS.items():
        if "quotas" not in paths and f"quotas.{name}" not in paths:
            continue
        value = getattr(message.quotas, name)
        if not 0 <= value <= limit:
            violations.append(
                FieldViolation(f"{field}.quotas.{name}", f"must be between 0 and {limit} (0 means the default)")
            )
        settings[name] = value or default
    if violations:
        raise InvalidArgument(violations)
    return settings
