"""``tickwheel admin ...``: the admin token on the wire, secrets printed
last, update masks from flags."""

from __future__ import annotations

import json

from tickwheel.v1 import admin_pb2


def test_tenant_create_prints_the_api_key_secret_last(cli, fake, operator) -> None:
    fake.reply("CreateTenant", lambda request, _ctx: admin_pb2.CreateTenantResponse(
        tenant=request.tenant, api_key=admin_pb2.IssuedSecret(id="key_1", secret="tw_secret_acme")))  # fmt: skip
    result = cli("admin", "tenant", "create", "acme", "--weight", "5", "--max-concurrency", "20", *operator)
    assert result.code == 0, result.err
    assert result.last_line == "tw_secret_acme"
    request = fake.requests("CreateTenant")[0]
    assert (request.tenant.name, request.tenant.weight, request.tenant.max_concurrency) == ("acme", 5, 20)
    assert fake.calls[0].metadata["authorization"] == f"Bearer {fake.admin_token}"


def test_worker_credential_create_prints_the_secret_last(cli, fake, operator) -> None:
    fake.reply("IssueWorkerCredential", admin_pb2.IssueWorkerCredentialResponse(
        credential=admin_pb2.IssuedSecret(id="wc_1", secret="tw_worker_secret")))  # fmt: skip
    result = cli(*operator, "admin", "worker-credential", "create", "--tenant", "acme", "--tenant", "beta",
                 "--handler", "echo", "billing.charge", "--http")  # fmt: skip
    assert result.code == 0, result.err
    assert result.last_line == "tw_worker_secret"
    request = fake.requests("IssueWorkerCredential")[0]
    assert list(request.tenants) == ["acme", "beta"] and list(request.handlers) == ["echo", "billing.charge"]
    assert request.http


def test_api_key_rotate_prints_the_new_secret_last(cli, fake, operator) -> None:
    fake.reply("RotateApiKey", admin_pb2.RotateApiKeyResponse(api_key=admin_pb2.IssuedSecret(id="k2", secret="tw_new")))
    result = cli(*operator, "admin", "tenant", "api-key", "rotate", "k1", "--grace", "1h")
    assert result.code == 0 and result.last_line == "tw_new"
    assert fake.requests("RotateApiKey")[0].grace.seconds == 3600


def test_tenant_update_masks_only_the_flags_given(cli, fake, operator) -> None:
    fake.reply("UpdateTenant", lambda request, _ctx: admin_pb2.UpdateTenantResponse(tenant=request.tenant))
    result = cli(*operator, "admin", "tenant", "update", "acme", "--weight", "3", "--max-jobs", "900")
    assert result.code == 0, result.err
    request = fake.requests("UpdateTenant")[0]
    # Each quota by its own path: the server keeps the others as stored, so
    # nothing is read first that a concurrent change could make stale.
    assert list(request.update_mask.paths) == ["weight", "quotas.max_jobs"]
    assert request.tenant.quotas == admin_pb2.TenantQuotas(max_jobs=900) and request.tenant.weight == 3
    assert request.tenant.version == 0 and not fake.requests("GetTenant")
    assert cli(*operator, "admin", "tenant", "update", "acme", "--max-jobs", "9", "--version", "3").code == 0
    assert fake.requests("UpdateTenant")[1].tenant.version == 3  # the operator's own version stands


def test_tenant_list_json_and_status_table(cli, fake, operator) -> None:
    fake.reply("ListTenants", admin_pb2.ListTenantsResponse(tenants=[admin_pb2.Tenant(name="acme", weight=2)]))
    document = json.loads(cli(*operator, "admin", "tenant", "list", "--json").out)
    assert document == {"tenants": [{"name": "acme", "weight": 2}]}

    server = admin_pb2.ServerStatus(server_id="srv-1", address="10.0.0.1:50051", partitions_owned=128, workers=3)
    fake.reply("ClusterStatus", admin_pb2.ClusterStatusResponse(
        servers=[server], partition_count=256, partitions=[admin_pb2.PartitionStatus(partition=0)]))  # fmt: skip
    status = cli(*operator, "admin", "status")
    assert status.code == 0
    assert "partitions: 256, unowned: 1" in status.out and "srv-1" in status.out


def test_recompute_tz_sends_zones_and_dry_run(cli, fake, operator) -> None:
    fake.reply("RecomputeSchedules", admin_pb2.RecomputeSchedulesResponse(tzdata_version="2026b", examined=12))
    result = cli(*operator, "admin", "recompute-tz", "--zone", "America/Santiago", "--dry-run")
    assert result.code == 0 and "examined 12" in result.out
    request = fake.requests("RecomputeSchedules")[0]
    assert list(request.zones) == ["America/Santiago"] and request.dry_run


def test_tenant_pause_sends_the_reason_and_resume_the_name(cli, fake, operator) -> None:
    fake.reply("PauseTenant", lambda request, _ctx: admin_pb2.PauseTenantResponse(tenant=admin_pb2.Tenant(
        name=request.name, state=admin_pb2.TENANT_STATE_PAUSED, pause_reason=request.reason)))  # fmt: skip
    paused = cli(*operator, "admin", "tenant", "pause", "acme", "--reason", "invoice overdue")
    assert paused.code == 0, paused.err
    assert paused.last_line == "paused tenant acme (invoice overdue)"
    assert (fake.requests("PauseTenant")[0].name, fake.requests("PauseTenant")[0].reason) == ("acme", "invoice overdue")
    fake.reply("ResumeTenant", lambda request, _ctx: admin_pb2.ResumeTenantResponse(
        tenant=admin_pb2.Tenant(name=request.name, state=admin_pb2.TENANT_STATE_ACTIVE)))  # fmt: skip
    resumed = cli(*operator, "admin", "tenant", "resume", "acme")
    assert resumed.code == 0 and resumed.last_line == "resumed tenant acme"
    assert fake.requests("ResumeTenant")[0].name == "acme"


def test_the_manual_run_quota_is_set_by_its_flag_and_read_by_tenant_get(cli, fake, operator) -> None:
    stored = admin_pb2.Tenant(name="acme", quotas=admin_pb2.TenantQuotas(max_jobs=500, max_pending_manual_runs=40))
    fake.reply("GetTenant", admin_pb2.GetTenantResponse(tenant=stored, job_count=7, pending_manual_runs=12))
    fake.reply("UpdateTenant", lambda request, _ctx: admin_pb2.UpdateTenantResponse(tenant=request.tenant))
    fake.reply("CreateTenant", lambda request, _ctx: admin_pb2.CreateTenantResponse(
        tenant=request.tenant, api_key=admin_pb2.IssuedSecret(id="key_1", secret="tw_s")))  # fmt: skip
    result = cli(*operator, "admin", "tenant", "update", "acme", "--max-pending-manual-runs", "90")
    assert result.code == 0, result.err
    request = fake.requests("UpdateTenant")[0]
    assert list(request.update_mask.paths) == ["quotas.max_pending_manual_runs"]
    assert request.tenant.quotas == admin_pb2.TenantQuotas(max_pending_manual_runs=90)
    created = cli(*operator, "admin", "tenant", "create", "beta", "--max-pending-manual-runs", "5")
    assert created.code == 0, created.err
    assert fake.requests("CreateTenant")[0].tenant.quotas.max_pending_manual_runs == 5
    shown = cli(*operator, "admin", "tenant", "get", "acme")
    assert "manual runs waiting: 12" in shown.out and "40 manual runs waiting" in shown.out
    assert cli(*operator, "admin", "tenant", "update", "acme", "--max-pending-manual-runs", "-1").code != 0


def test_key_and_credential_lists_follow_every_page(cli, fake, operator) -> None:
    fake.script("ListApiKeys",
                admin_pb2.ListApiKeysResponse(api_keys=[admin_pb2.ApiKey(id="k1")], next_page_token="t1"),
                admin_pb2.ListApiKeysResponse(api_keys=[admin_pb2.ApiKey(id="k2")]))  # fmt: skip
    result = cli(*operator, "admin", "tenant", "api-key", "list", "acme")
    assert result.code == 0, result.err
    assert "k1" in result.out and "k2" in result.out and "more follow" not in result.err
    assert [(r.tenant, r.page_token) for r in fake.requests("ListApiKeys")] == [("acme", ""), ("acme", "t1")]

    fake.script("ListWorkerCredentials",
                admin_pb2.ListWorkerCredentialsResponse(credentials=[admin_pb2.WorkerCredential(id="c1")],
                                                        next_page_token="u1"),
                admin_pb2.ListWorkerCredentialsResponse(credentials=[admin_pb2.WorkerCredential(id="c2")]))  # fmt: skip
    document = json.loads(cli(*operator, "admin", "worker-credential", "list", "--tenant", "acme", "--json").out)
    assert [c["id"] for c in document["credentials"]] == ["c1", "c2"] and "nextPageToken" not in document
    assert [r.page_token for r in fake.requests("ListWorkerCredentials")] == ["", "u1"]


def test_a_limited_key_list_asks_for_the_rest_and_says_where_to_go_on(cli, fake, operator) -> None:
    fake.reply("ListApiKeys", lambda request, _ctx: admin_pb2.ListApiKeysResponse(
        api_keys=[admin_pb2.ApiKey(id=f"k{n}") for n in range(request.page_size or 100)], next_page_token="next"))
    result = cli(*operator, "admin", "tenant", "api-key", "list", "acme", "--limit", "3", "--page-token", "from")
    assert result.code == 0, result.err
    assert [(r.page_size, r.page_token) for r in fake.requests("ListApiKeys")] == [(3, "from")]
    assert "--page-token next" in result.err
    assert cli(*operator, "admin", "worker-credential", "list", "--limit", "-1").code != 0
