"""``tickwheel admin ...``: AdminService over the Python SDK, with the admin
token. Commands that issue a secret print it on the last line of stdout; it
is never shown again."""

from __future__ import annotations

import argparse
from typing import Any

from tickwheel_server.cli import output as fmt
from tickwheel_server.cli.context import Context
from tickwheel_server.cli.parse import UsageError, parse_duration, parse_instant
from tickwheel_server.cli.tree import group, leaf

EXECUTION_STATUSES = ("scheduled", "waiting", "running", "succeeded", "dead", "canceled")
ALERT_KINDS = (
    "late", "skipped", "dead_letter", "poison", "circuit_open", "partition_unowned", "clock_skew", "tzdata_shift",
    "job_unreadable", "schedule_uncomputable", "calendar_runs_changed", "etcd_nospace",
)  # fmt: skip


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    admin = group(subparsers, "admin", parents, "operate the cluster (admin token)")

    p = leaf(admin, "status", parents, status, auth="admin", help="servers, partitions and the deepest queues")
    p.add_argument("--top", type=int, default=0, metavar="N", help="tenants to list by queue depth (default 10)")

    p = leaf(admin, "drain", parents, drain, auth="admin",
             help="move a server's partitions and workers away (before restarting it)",
             description="The server gives up its partitions at once (the others take them) and tells its "
                         "workers to finish within --grace and reconnect elsewhere; it keeps serving API calls "
                         "until it is stopped. Any server can be asked to drain any other. Idempotent.")
    p.add_argument("server_id", metavar="SERVER_ID", help="as `tickwheel admin status` lists it")
    p.add_argument("--grace", metavar="DURATION", help="how long its workers get to finish (default 60s, at most 6h)")

    p = leaf(admin, "executions", parents, executions_search, auth="admin",
             help="search executions across tenants, newest first")
    p.add_argument("--tenant", default="", metavar="NAME", help="only this tenant's")
    p.add_argument("--job", default="", metavar="ID", help="only this job's")
    p.add_argument("--status", action="extend", nargs="+", choices=EXECUTION_STATUSES, default=[], metavar="S",
                   help=f"only these statuses ({', '.join(EXECUTION_STATUSES)})")
    p.add_argument("--from", dest="from_at", metavar="RFC3339", help="nominally at or after")
    p.add_argument("--to", dest="to_at", metavar="RFC3339", help="nominally before")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N executions (default 50)")

    tenant = group(admin, "tenant", parents, "tenants and their API keys")
    p = leaf(tenant, "create", parents, tenant_create, auth="admin",
             help="create a tenant; prints its first API key secret last")
    p.add_argument("name", metavar="NAME")
    _add_tenant_args(p)

    p = leaf(tenant, "get", parents, tenant_get, auth="admin", help="show a tenant")
    p.add_argument("name", metavar="NAME")

    p = leaf(tenant, "list", parents, tenant_list, auth="admin", help="list tenants")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="stop after N (default: all)")

    p = leaf(tenant, "update", parents, tenant_update, auth="admin",
             help="change a tenant's weight, concurrency cap or quotas")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, default=0, metavar="V", help="refuse unless at this version")
    _add_tenant_args(p)

    p = leaf(tenant, "pause", parents, tenant_pause, auth="admin",
             help="stop creating and handing out its work: occurrences that come due are skipped "
                  "(tenant_paused); executions already created wait for the resume")  # fmt: skip
    p.add_argument("name", metavar="NAME")
    p.add_argument("--reason", default="", help="kept with the tenant, shown by 'tenant get'")

    p = leaf(tenant, "resume", parents, tenant_resume, auth="admin",
             help="resume a paused tenant: its jobs continue at their next run not yet skipped")
    p.add_argument("name", metavar="NAME")

    keys = group(tenant, "api-key", parents, "a tenant's API keys")
    p = leaf(keys, "issue", parents, key_issue, auth="admin", help="issue a key; prints the secret last")
    p.add_argument("tenant", metavar="TENANT")
    p.add_argument("--description", default="")
    p = leaf(keys, "rotate", parents, key_rotate, auth="admin",
             help="replace a key (the old one works for --grace); prints the new secret last")
    p.add_argument("key_id", metavar="KEY_ID")
    p.add_argument("--grace", metavar="DURATION", help="how long the old key keeps working (default 24h)")
    p = leaf(keys, "revoke", parents, key_revoke, auth="admin", help="revoke a key at once")
    p.add_argument("key_id", metavar="KEY_ID")
    p = leaf(keys, "list", parents, key_list, auth="admin", help="a tenant's keys (never their secrets)")
    p.add_argument("tenant", metavar="TENANT")
    _add_page_flags(p, "keys")

    creds = group(admin, "worker-credential", parents, "credentials of worker processes")
    p = leaf(creds, "create", parents, credential_create, auth="admin",
             help="issue a worker credential; prints the secret last")
    p.add_argument("--tenant", action="extend", nargs="+", required=True, metavar="NAME", help="tenants served")
    p.add_argument("--handler", action="extend", nargs="+", default=[], metavar="H",
                   help="handlers allowed (default any)")
    p.add_argument("--http", action="store_true", help="may run HTTP targets")
    p.add_argument("--description", default="")
    p = leaf(creds, "revoke", parents, credential_revoke, auth="admin", help="revoke a credential; its streams close")
    p.add_argument("credential_id", metavar="ID")
    p = leaf(creds, "list", parents, credential_list, auth="admin", help="credentials not revoked")
    p.add_argument("--tenant", default="", metavar="NAME")
    _add_page_flags(p, "credentials")

    alerts = group(admin, "alerts", parents, "conditions that need attention")
    p = leaf(alerts, "list", parents, alerts_list, auth="admin", help="alerts, newest first (open ones by default)")
    p.add_argument("--all", dest="include_resolved", action="store_true", help="resolved ones too")
    _add_alert_filters(p)
    p.add_argument("--limit", type=int, default=100, metavar="N", help="at most N alerts (default 100)")
    p = leaf(alerts, "watch", parents, alerts_watch, auth="admin",
             help="alerts as they are raised and resolved, until interrupted",
             description="Print each alert as it is raised, seen again or resolved, one line each (one JSON "
                         "document per line with --json), until interrupted or --limit events.")
    p.add_argument("--open", dest="include_open", action="store_true", help="first print every open alert")
    _add_alert_filters(p)
    p.add_argument("--limit", type=int, default=0, metavar="N", help="stop after N events (default: never)")

    p = leaf(admin, "recompute-tz", parents, recompute_tz, auth="admin",
             help="recompute stored next runs after a time-zone database change")
    p.add_argument("--zone", action="extend", nargs="+", default=[], metavar="Z",
                   help="only these zones (default: those whose rules changed)")
    p.add_argument("--dry-run", action="store_true", help="report what would shift; change nothing")


def _add_tenant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--weight", type=int, metavar="W", help="fair-share weight, 1 to 1000 (default 1)")
    p.add_argument("--max-concurrency", type=int, metavar="N", help="running executions cap (0: none)")
    p.add_argument("--max-jobs", type=int, metavar="N", help="quota (default 100000)")
    p.add_argument("--max-payload-bytes", type=int, metavar="N", help="quota (default 65536)")
    p.add_argument("--requests-per-second", type=int, metavar="N", help="quota (default 100)")
    p.add_argument("--max-pending-manual-runs", type=int, metavar="N",
                   help="quota: triggered and backfilled runs waiting to start (default 100000)")


def _add_alert_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", action="extend", nargs="+", choices=ALERT_KINDS, default=[], metavar="K",
                   help=f"only these kinds ({', '.join(ALERT_KINDS)})")
    p.add_argument("--tenant", default="", metavar="NAME", help="only this tenant's")


def _tenant_state(tenant: Any) -> str:
    from tickwheel.v1 import admin_pb2

    return fmt.enum_name(admin_pb2.TenantState, tenant.state, "TENANT_STATE_")


def status(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.cluster_status(top_tenants=a.top)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    unowned = sum(1 for p in response.partitions if not p.server_id)
    ctx.out(f"store {response.store_engine or '-'} (schema {response.schema_version}), "
            f"tzdata {response.tzdata_version or '-'}, reaper {response.reaper_server_id or '-'}")  # fmt: skip
    ctx.out(f"partitions: {response.partition_count}, unowned: {unowned}")
    fmt.table(
        ("SERVER", "ADDRESS", "PARTITIONS", "WORKERS", "WHEEL", "CLOCK SKEW", "DRAINING"),
        ((s.server_id, s.address, s.partitions_owned, s.workers, s.wheel_size, fmt.fmt_duration(s, "clock_skew"),
          "yes" if s.draining else "no") for s in response.servers),
        ctx.stdout,
    )  # fmt: skip
    if response.queues:
        fmt.table(
            ("TENANT", "READY", "RUNNING", "OLDEST READY"),
            ((q.tenant, q.ready, q.running, fmt.fmt_duration(q, "oldest_ready_age")) for q in response.queues),
            ctx.stdout,
        )
    return 0


def drain(ctx: Context, a: argparse.Namespace) -> int:
    grace = parse_duration(a.grace) if a.grace else None
    response = ctx.client.admin.drain_server(a.server_id, grace=grace)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"server {a.server_id} drains: {response.partitions_released} partition(s) released, "
            f"{response.workers_drained} worker(s) told to reconnect elsewhere")  # fmt: skip
    return 0


def executions_search(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import admin_pb2, job_pb2

    client = ctx.client
    limit = max(a.limit, 1)
    kwargs: dict[str, Any] = {"tenant": a.tenant, "job_id": a.job, "statuses": a.status, "page_size": min(limit, 500)}
    if a.from_at:
        kwargs["from_at"] = parse_instant(a.from_at)
    if a.to_at:
        kwargs["to_at"] = parse_instant(a.to_at)
    merged = admin_pb2.SearchExecutionsResponse()
    for page in client.pages(client.admin.search_executions, **kwargs):
        merged.executions.extend(page.executions)
        if len(merged.executions) >= limit:
            del merged.executions[limit:]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    rows = []
    for e in merged.executions:
        last = e.attempts[-1] if e.attempts else None
        rows.append((e.id, e.tenant, fmt.fmt_ts(e, "nominal_at"),
                     fmt.enum_name(job_pb2.ExecutionStatus, e.status, "EXECUTION_STATUS_"), e.attempt or "-",
                     fmt.fmt_duration(last, "lateness") if last is not None else "-",
                     fmt.one_line(e.error or e.dead_reason, 60)))  # fmt: skip
    fmt.table(("EXECUTION", "TENANT", "NOMINAL (UTC)", "STATUS", "ATTEMPT", "LATENESS", "ERROR"), rows, ctx.stdout)
    return 0


QUOTA_NAMES = ("max_jobs", "max_payload_bytes", "requests_per_second", "max_pending_manual_runs")
"""The TenantQuotas fields, each a flag of ``tenant create`` and ``tenant update``."""


def _tenant_fields(a: argparse.Namespace) -> dict[str, int]:
    fields = {
        name: getattr(a, name)
        for name in ("weight", "max_concurrency", *QUOTA_NAMES)
        if getattr(a, name) is not None
    }
    for name, value in fields.items():
        if value < 0:
            raise UsageError(f"--{name.replace('_', '-')} must not be negative")
    return fields


def tenant_create(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.create_tenant(a.name, **_tenant_fields(a))
    if ctx.json:
        ctx.emit_json(response)
        return 0
    t = response.tenant
    ctx.out(f"created tenant {t.name} (weight {t.weight or 1}, max concurrency {t.max_concurrency or 'none'})")
    ctx.out(f"api key id: {response.api_key.id}")
    ctx.out(response.api_key.secret)
    return 0


def _print_tenant(ctx: Context, t: Any, job_count: int | None = None, pending_manual: int | None = None) -> None:
    q = t.quotas
    rows = [
        ("name", t.name),
        ("state", _tenant_state(t) + (f" ({t.pause_reason})" if t.pause_reason else "")),
        ("weight", str(t.weight)),
        ("max concurrency", str(t.max_concurrency or "none")),
        ("quotas", f"jobs {q.max_jobs or 'default'}, payload {q.max_payload_bytes or 'default'} bytes, "
                   f"{q.requests_per_second or 'default'} requests/s, "
                   f"{q.max_pending_manual_runs or 'default'} manual runs waiting"),
        ("created", fmt.fmt_ts(t, "created_at")),
        ("version", str(t.version)),
    ]  # fmt: skip
    if pending_manual is not None:
        rows.insert(2, ("manual runs waiting", str(pending_manual)))
    if job_count is not None:
        rows.insert(2, ("jobs", str(job_count)))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        ctx.out(f"{key + ':':<{width + 1}} {value}")


def tenant_get(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.get_tenant(a.name)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    _print_tenant(ctx, response.tenant, response.job_count, response.pending_manual_runs)
    return 0


def tenant_list(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import admin_pb2

    client = ctx.client
    merged = admin_pb2.ListTenantsResponse()
    for page in client.pages(client.admin.list_tenants):
        merged.tenants.extend(page.tenants)
        if a.limit and len(merged.tenants) >= a.limit:
            del merged.tenants[a.limit :]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    fmt.table(
        ("NAME", "STATE", "WEIGHT", "MAX CONCURRENCY", "VERSION"),
        ((t.name, _tenant_state(t), t.weight, t.max_concurrency or "none", t.version) for t in merged.tenants),
        ctx.stdout,
    )
    return 0


def tenant_update(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import admin_pb2

    fields = _tenant_fields(a)
    if not fields:
        raise UsageError("nothing to update: give --weight, --max-concurrency or a quota flag")
    tenant = admin_pb2.Tenant(name=a.name, version=a.version)
    paths = []
    for name in ("weight", "max_concurrency"):
        if name in fields:
            setattr(tenant, name, fields[name])
            paths.append(name)
    for name in QUOTA_NAMES:
        if name in fields:
            # Each quota by its own path: the server keeps the others as
            # stored, so nothing read here can undo another operator's change.
            setattr(tenant.quotas, name, fields[name])
            paths.append(f"quotas.{name}")
    response = ctx.client.admin.update_tenant(tenant, update_mask=paths)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"updated tenant {response.tenant.name} ({', '.join(paths)}), now version {response.tenant.version}")
    return 0


def tenant_pause(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.pause_tenant(a.name, reason=a.reason)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    reason = f" ({response.tenant.pause_reason})" if response.tenant.pause_reason else ""
    ctx.out(f"paused tenant {response.tenant.name}{reason}")
    return 0


def tenant_resume(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.resume_tenant(a.name)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"resumed tenant {response.tenant.name}")
    return 0


def key_issue(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.issue_api_key(a.tenant, description=a.description)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"api key id: {response.api_key.id}")
    ctx.out(response.api_key.secret)
    return 0


def key_rotate(ctx: Context, a: argparse.Namespace) -> int:
    grace = parse_duration(a.grace) if a.grace else None
    response = ctx.client.admin.rotate_api_key(a.key_id, grace=grace)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"old key {a.key_id} works until {fmt.fmt_ts(response, 'old_key_expires_at')}")
    ctx.out(f"api key id: {response.api_key.id}")
    ctx.out(response.api_key.secret)
    return 0


def key_revoke(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.revoke_api_key(a.key_id)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"revoked api key {a.key_id}")
    return 0


PAGE_MOST = 1000
"""The largest page ListApiKeys and ListWorkerCredentials answer."""


def _add_page_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--limit", type=int, default=0, metavar="N", help=f"at most N {what} (default all, every page)")
    p.add_argument("--page-token", default="", metavar="TOKEN",
                   help="start at this next_page_token of an earlier listing with the same filter")  # fmt: skip


def _listed(ctx: Context, a: argparse.Namespace, list_method, field: str, response, **kwargs):
    """``response`` (an empty list answer) holding the items of ``field``
    on the pages of ``list_method`` from ``--page-token``: every page, or
    pages sized to stop at ``--limit`` items, with ``next_page_token`` set
    to go on from there (a note on stderr says so for the table)."""
    if a.limit < 0:
        raise UsageError("--limit must be 0 (all) or more")
    items, token = getattr(response, field), a.page_token
    while True:
        wanted = min(a.limit - len(items), PAGE_MOST) if a.limit else 0
        page = list_method(page_token=token, page_size=wanted, **kwargs)
        items.extend(getattr(page, field))
        if page.next_page_token and page.next_page_token == token:
            raise RuntimeError("server returned the same page token twice; stopping")
        token = page.next_page_token
        if not token or (a.limit and len(items) >= a.limit):
            break
    response.next_page_token = token
    if token and not ctx.json:
        ctx.note(f"more follow: --page-token {token}")
    return response


def key_list(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import admin_pb2

    response = _listed(ctx, a, ctx.client.admin.list_api_keys, "api_keys", admin_pb2.ListApiKeysResponse(),
                       tenant=a.tenant)  # fmt: skip
    if ctx.json:
        ctx.emit_json(response)
        return 0
    fmt.table(
        ("ID", "CREATED", "EXPIRES", "DESCRIPTION"),
        ((k.id, fmt.fmt_ts(k, "created_at"), fmt.fmt_ts(k, "expires_at"), k.description) for k in response.api_keys),
        ctx.stdout,
    )
    return 0


def credential_create(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.issue_worker_credential(
        a.tenant, handlers=a.handler, http=a.http, description=a.description
    )
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"worker credential id: {response.credential.id}")
    ctx.out(response.credential.secret)
    return 0


def credential_revoke(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.revoke_worker_credential(a.credential_id)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"revoked worker credential {a.credential_id}")
    return 0


def credential_list(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import admin_pb2

    response = _listed(ctx, a, ctx.client.admin.list_worker_credentials, "credentials",
                       admin_pb2.ListWorkerCredentialsResponse(), tenant=a.tenant)  # fmt: skip
    if ctx.json:
        ctx.emit_json(response)
        return 0
    fmt.table(
        ("ID", "TENANTS", "HANDLERS", "HTTP", "CREATED", "DESCRIPTION"),
        ((c.id, ",".join(c.tenants), ",".join(c.handlers) or "any", "yes" if c.http else "no",
          fmt.fmt_ts(c, "created_at"), c.description) for c in response.credentials),
        ctx.stdout,
    )  # fmt: skip
    return 0


def _alert_row(alert: Any) -> tuple:
    from tickwheel.v1 import admin_pb2

    subject = alert.execution_id or alert.job_id or alert.server_id or "-"
    state = f"resolved {fmt.fmt_ts(alert, 'resolved_at')}" if alert.HasField("resolved_at") else "open"
    return (alert.id, fmt.enum_name(admin_pb2.AlertKind, alert.kind, "ALERT_KIND_"),
            fmt.enum_name(admin_pb2.AlertSeverity, alert.severity, "ALERT_SEVERITY_"), alert.tenant or "-", subject,
            alert.count, fmt.fmt_ts(alert, "raised_at"), state, fmt.one_line(alert.summary, 80))  # fmt: skip


ALERT_COLUMNS = ("ID", "KIND", "SEVERITY", "TENANT", "SUBJECT", "COUNT", "RAISED (UTC)", "STATE", "SUMMARY")


def alerts_list(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import admin_pb2

    client = ctx.client
    merged = admin_pb2.ListAlertsResponse()
    limit = max(a.limit, 1)
    for page in client.pages(client.admin.list_alerts, include_resolved=a.include_resolved, kinds=a.kind,
                             tenant=a.tenant, page_size=min(limit, 1000)):  # fmt: skip
        merged.alerts.extend(page.alerts)
        if len(merged.alerts) >= limit:
            del merged.alerts[limit:]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    fmt.table(ALERT_COLUMNS, (_alert_row(alert) for alert in merged.alerts), ctx.stdout)
    return 0


def alerts_watch(ctx: Context, a: argparse.Namespace) -> int:
    from google.protobuf import json_format

    if a.limit < 0:
        raise UsageError("--limit must not be negative")
    events = ctx.client.admin.watch_alerts(kinds=a.kind, tenant=a.tenant, include_open=a.include_open)
    shown = 0
    try:
        for event in events:
            if ctx.json:
                ctx.out(json_format.MessageToJson(event.alert, indent=None))
            else:
                ctx.out("  ".join(str(cell) for cell in _alert_row(event.alert)))
            ctx.stdout.flush()
            shown += 1
            if a.limit and shown >= a.limit:
                break
    finally:
        events.close()  # cancels the stream
    return 0


def recompute_tz(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.admin.recompute_schedules(zones=a.zone, dry_run=a.dry_run)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    verb = "would shift" if a.dry_run else "shifted"
    ctx.out(f"tzdata {response.tzdata_version or '-'}: examined {response.examined} job(s), "
            f"{verb} {len(response.shifted)}")  # fmt: skip
    if response.shifted:
        fmt.table(
            ("JOB", "TENANT", "OLD NEXT RUN", "NEW NEXT RUN"),
            ((s.job_id, s.tenant, fmt.fmt_ts(s, "old_next_run_at"), fmt.fmt_ts(s, "new_next_run_at"))
             for s in response.shifted),
            ctx.stdout,
        )  # fmt: skip
    return 0
