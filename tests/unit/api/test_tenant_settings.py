"""An operator's tenant settings: every quota bounded below and above."""

from __future__ import annotations

import pytest
from tickwheel.v1 import admin_pb2

from tickwheel_server.api.admin import tenant_settings
from tickwheel_server.errors import InvalidArgument
from tickwheel_server.store.tenants import (
    LIMIT_MAX_JOBS,
    LIMIT_MAX_PAYLOAD_BYTES,
    LIMIT_MAX_PENDING_MANUAL_RUNS,
    LIMIT_REQUESTS_PER_SECOND,
)

LIMITS = {
    "max_jobs": LIMIT_MAX_JOBS,
    "max_payload_bytes": LIMIT_MAX_PAYLOAD_BYTES,
    "requests_per_second": LIMIT_REQUESTS_PER_SECOND,
    "max_pending_manual_runs": LIMIT_MAX_PENDING_MANUAL_RUNS,
}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_a_quota_at_its_bound_is_taken_and_one_over_or_negative_is_refused_naming_it(name: str) -> None:
    at_bound = admin_pb2.Tenant(quotas=admin_pb2.TenantQuotas(**{name: LIMITS[name]}))
    assert tenant_settings(at_bound, {"quotas"})[name] == LIMITS[name]
    for value in (LIMITS[name] + 1, -1):
        try:
            message = admin_pb2.Tenant(quotas=admin_pb2.TenantQuotas(**{name: value}))
        except ValueError:  # int32 fields: the bound is the type's own
            continue
        with pytest.raises(InvalidArgument) as raised:
            tenant_settings(message, {"quotas"})
        assert [v.field for v in raised.value.violations] == [f"tenant.quotas.{name}"]


def test_zero_means_the_default() -> None:
    settings = tenant_settings(admin_pb2.Tenant(quotas=admin_pb2.TenantQuotas()), {"quotas"})
    assert all(settings[name] > 0 for name in LIMITS)
