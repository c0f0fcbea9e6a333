"""An operator's tenant settings: UpdateTenant's mask paths, every quota bounded below and above."""

from __future__ import annotations

import pytest
from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2

from tickwheel_server.api.tenantsettings import QUOTAS, WHOLE_SETTINGS, tenant_settings, update_paths
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


def test_every_quota_of_the_contract_has_its_bounds() -> None:
    assert set(QUOTAS) == set(admin_pb2.TenantQuotas.DESCRIPTOR.fields_by_name) == set(LIMITS)
    assert all(QUOTAS[name][1] == LIMITS[name] for name in LIMITS)


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_a_quota_path_names_that_quota_alone(name: str) -> None:
    message = admin_pb2.Tenant(weight=5, quotas=admin_pb2.TenantQuotas(**{n: 7 for n in LIMITS}))
    assert tenant_settings(message, update_paths(field_mask_pb2.FieldMask(paths=[f"quotas.{name}"]))) == {name: 7}
    # Another quota's value out of its bounds is not read.
    setattr(message.quotas, "max_jobs" if name != "max_jobs" else "max_payload_bytes", -1)
    assert tenant_settings(message, {f"quotas.{name}"}) == {name: 7}


def test_an_empty_mask_is_the_whole_settings_and_quotas_all_four() -> None:
    assert update_paths(field_mask_pb2.FieldMask()) == set(WHOLE_SETTINGS)
    assert set(tenant_settings(admin_pb2.Tenant(), {"quotas"})) == set(LIMITS)


@pytest.mark.parametrize("paths, named", [
    (["quotas.max_jobz"], "change: 'quotas.max_jobz'"),
    (["quotas."], "change: 'quotas.'"),
    (["quotas.max_jobs.x"], "change: 'quotas.max_jobs.x'"),
    (["version"], "change: 'version'"),
    (["weight", "weight"], "given twice: 'weight'"),
    (["quotas", "quotas.max_jobs"], "not with 'quotas.max_jobs'"),
    (["q\x00" * 100], "'q\\x00q"),
    ([f"bogus{i}" for i in range(1000)] + ["weight"] * 2, "'bogus0', 'bogus1', 'bogus2', 'bogus3' (allowed"),
    ([f"{c * 1000}" for c in "abcde"], "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...', 'bbbb"),
])  # fmt: skip
def test_a_bad_mask_is_refused_naming_the_path(paths: list[str], named: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        update_paths(field_mask_pb2.FieldMask(paths=paths))
    [violation] = raised.value.violations
    assert violation.field == "update_mask" and named in violation.description
    assert not violation.description.endswith("…")  # whole: within the description's bound
