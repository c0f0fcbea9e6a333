"""UpdateTenant's mask over gRPC on a real server: a ``quotas.<name>`` path
changes that quota alone, ``quotas`` still replaces all four, and a bad
mask or value is INVALID_ARGUMENT naming it with nothing written (the
tenant read back is the tenant before, version included)."""

from __future__ import annotations

import asyncio
import subprocess

import grpc
import pytest
from google.protobuf import field_mask_pb2
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tests.support.server import TICKWHEEL

from .test_server_api import violations

SET = dict(max_jobs=500, max_payload_bytes=2048, requests_per_second=7, max_pending_manual_runs=40)
"""Four quotas, none of them its default."""
DEFAULTS = dict(max_jobs=100_000, max_payload_bytes=65_536, requests_per_second=100, max_pending_manual_runs=100_000)


def _quotas(tenant: admin_pb2.Tenant) -> dict[str, int]:
    return {name: getattr(tenant.quotas, name) for name in SET}


async def _update(admin, meta, paths: list[str], version: int = 0, **fields) -> admin_pb2.Tenant:
    quotas = {k: fields.pop(k) for k in list(fields) if k in SET}
    tenant = admin_pb2.Tenant(name="acme", version=version, quotas=admin_pb2.TenantQuotas(**quotas), **fields)
    request = admin_pb2.UpdateTenantRequest(tenant=tenant, update_mask=field_mask_pb2.FieldMask(paths=paths))
    return (await admin.UpdateTenant(request, metadata=meta)).tenant


async def _acme_at_set_quotas(server, channel):
    await server.create_tenant("acme")
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    meta = server.admin_metadata()
    tenant = await _update(admin, meta, ["quotas", "weight"], weight=3, **SET)
    assert _quotas(tenant) == SET and tenant.weight == 3
    return admin, meta, tenant


async def test_a_quota_path_changes_that_quota_alone(server) -> None:
    """The hole: ``quotas`` with max_jobs alone put the other three back to
    their defaults (a hostile tenant's lowered request rate raised to 100)."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        for name, value in (("max_jobs", 900), ("requests_per_second", 2), ("max_payload_bytes", 4096),
                            ("max_pending_manual_runs", 9)):  # fmt: skip
            expected = {**_quotas(before), name: value}
            after = await _update(admin, meta, [f"quotas.{name}"], version=before.version, **{name: value})
            assert _quotas(after) == expected and after.weight == 3 and after.version == before.version + 1
            read = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
            assert _quotas(read) == expected and read.version == after.version
            before = read
        # Two quotas at once, and 0 (the default) through its own path.
        after = await _update(admin, meta, ["quotas.requests_per_second", "quotas.max_jobs"],
                              requests_per_second=0, max_jobs=77)  # fmt: skip
        assert _quotas(after) == {**_quotas(before), "requests_per_second": 100, "max_jobs": 77}


async def test_the_quotas_path_still_replaces_all_four(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, _ = await _acme_at_set_quotas(server, channel)
        after = await _update(admin, meta, ["quotas"], max_jobs=900)
        assert _quotas(after) == {**DEFAULTS, "max_jobs": 900} and after.weight == 3


async def test_a_quota_path_keeps_the_version_check(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        with pytest.raises(grpc.aio.AioRpcError) as stale:
            await _update(admin, meta, ["quotas.max_jobs"], version=before.version - 1, max_jobs=1)
        assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        read = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
        assert read == before


BAD_MASKS = {
    "not a field": (["no_such_field"], "'no_such_field'"),
    "an output-only field": (["version"], "'version'"),
    "the key": (["name"], "'name'"),
    "a bogus quota": (["quotas.max_jobz"], "'quotas.max_jobz'"),
    "the quotas prefix alone": (["quotas."], "'quotas.'"),
    "a path under a quota": (["quotas.max_jobs.value"], "'quotas.max_jobs.value'"),
    "a sub-path of a scalar": (["weight.x"], "'weight.x'"),
    "a path given twice": (["quotas.max_jobs", "quotas.max_jobs"], "given twice: 'quotas.max_jobs'"),
    "quotas given twice": (["quotas", "quotas"], "given twice: 'quotas'"),
    "quotas beside one of them": (["quotas", "quotas.max_jobs"], "not with 'quotas.max_jobs'"),
    "one of them beside quotas": (["quotas.requests_per_second", "quotas"], "not with 'quotas.requests_per_second'"),
    "a good path beside a bad one": (["weight", "quotas.max_jobs", "bogus"], "'bogus'"),
    "a NUL byte": (["quotas.max_jobs\x00"], "may not contain NUL"),  # the decoding guard's, before the servicer
}


@pytest.mark.parametrize("case", sorted(BAD_MASKS))
async def test_a_bad_mask_is_refused_naming_the_path_and_writes_nothing(server, case: str) -> None:
    paths, named = BAD_MASKS[case]
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _update(admin, meta, paths, weight=9, max_jobs=1, requests_per_second=1000)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        found = violations(refused.value)
        assert [field for field in found if field.startswith("update_mask")], found
        assert named in " ".join(found.values()), found
        read = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
        assert read == before


async def test_a_mask_of_many_bogus_paths_gets_a_small_answer(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _update(admin, meta, [f"quotas.{'x' * 1000}{i}" for i in range(1000)])
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert len(refused.value.details()) < 1000
        assert (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant == before


OUT_OF_BOUNDS = {
    "max_jobs": [1_000_000_001, -1],
    "max_payload_bytes": [4_194_305, -1],
    "requests_per_second": [1_000_001, -1],
    "max_pending_manual_runs": [10_000_001, -1],
}


@pytest.mark.parametrize("name", sorted(OUT_OF_BOUNDS))
async def test_a_quota_out_of_bounds_through_its_path_is_refused_naming_it(server, name: str) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        for value in OUT_OF_BOUNDS[name]:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                # Another quota in range beside it: the update is refused whole.
                other = "max_jobs" if name != "max_jobs" else "requests_per_second"
                await _update(admin, meta, [f"quotas.{other}", f"quotas.{name}"], **{name: value, other: 1})
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert list(violations(refused.value)) == [f"tenant.quotas.{name}"]
        assert (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant == before


async def test_values_outside_the_mask_are_not_read(server) -> None:
    """A quota path takes its value alone: another quota's out-of-range
    value in the message is neither checked nor written."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        after = await _update(admin, meta, ["quotas.max_jobs"], max_jobs=5, requests_per_second=-1, weight=999_999)
        assert _quotas(after) == {**_quotas(before), "max_jobs": 5} and after.weight == 3


async def test_the_cli_changes_only_the_quotas_its_flags_name(server) -> None:
    """`tickwheel admin tenant update --requests-per-second` on a real
    server: that quota changes, the other three and the weight stay; an
    operator's stale --version is refused and writes nothing."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [TICKWHEEL, "--address", server.address, "--admin-token", server.admin_token,
                 "admin", "tenant", "update", "acme", *args], capture_output=True, text=True, timeout=60,
            )  # fmt: skip

        done = await asyncio.to_thread(cli, "--requests-per-second", "2", "--max-jobs", "900")
        assert done.returncode == 0, done.stderr
        read = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
        assert _quotas(read) == {**SET, "requests_per_second": 2, "max_jobs": 900} and read.weight == 3
        stale = await asyncio.to_thread(cli, "--max-jobs", "1", "--version", str(before.version))
        assert stale.returncode != 0
        assert (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant == read


CHANGES = [("weight", 5), ("max_concurrency", 11), ("quotas.max_jobs", 901), ("quotas.max_payload_bytes", 3000),
           ("quotas.requests_per_second", 3), ("quotas.max_pending_manual_runs", 41)]  # fmt: skip
"""One change a setting, each a different path."""


def _field(path: str) -> str:
    return path.removeprefix("quotas.")


def _settings(tenant: admin_pb2.Tenant) -> dict[str, int]:
    return {**_quotas(tenant), "weight": tenant.weight, "max_concurrency": tenant.max_concurrency}


async def test_concurrent_changes_of_different_settings_all_land(server) -> None:
    """Six updates at once without a version, each of another setting: none
    undoes another (each writes its own column), and each is a version."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        await asyncio.gather(*(_update(admin, meta, [path], **{_field(path): value}) for path, value in CHANGES))
        read = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
        assert _settings(read) == {_field(path): value for path, value in CHANGES}
        assert read.version == before.version + len(CHANGES)


async def test_concurrent_changes_at_one_version_take_exactly_one(server) -> None:
    """Six updates at once, each of another setting, all at the version
    read: exactly one lands, the others are FAILED_PRECONDITION and left
    nothing."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        admin, meta, before = await _acme_at_set_quotas(server, channel)
        results = await asyncio.gather(*(
            _update(admin, meta, [path], version=before.version, **{_field(path): value}) for path, value in CHANGES
        ), return_exceptions=True)  # fmt: skip
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert all(r.code() == grpc.StatusCode.FAILED_PRECONDITION for r in refused), refused
        [landed] = [(path, value) for (path, value), r in zip(CHANGES, results) if not isinstance(r, BaseException)]
        read = (await admin.GetTenant(admin_pb2.GetTenantRequest(name="acme"), metadata=meta)).tenant
        assert _settings(read) == {**_settings(before), _field(landed[0]): landed[1]}
        assert read.version == before.version + 1
