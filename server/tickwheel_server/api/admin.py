"""AdminService: operators' calls. Thin: proto in, store call, proto out.

RPCs whose machinery arrives with later components (tenant pause in
dispatch, draining, execution search) are not overridden here, so they
answer UNIMPLEMENTED rather than pretend.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from .. import __version__
from ..errors import FieldViolation, InvalidArgument, TickwheelError
from ..store.alerts import AlertStore
from ..store.errors import RetryableStoreError
from ..store.credentials import WorkerCredentialStore
from ..store.jobs import JobStore
from ..store.partitions import PartitionStore
from ..store.tzdata import TzdataStore
from ..schedule import default_engine
from ..store.tenants import (
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_REQUESTS_PER_SECOND,
    Tenant,
    TenantStore,
)
from ..auth.authenticator import Authenticator
from ..gateway.connections import Connections
from . import convert
from .status import abort, rpc

log = logging.getLogger(__name__)

TENANT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
HANDLER_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
MAX_GRACE = timedelta(days=30)


@dataclass
class ServerInfo:
    """What ClusterStatus reports about the answering server."""

    server_id: str
    address: str
    started_at: object
    store_engine: str
    schema_version: int
    partition_count: int
    tzdata_version: str
    session_id: str = ""
    partitions_owned: Callable[[], int] = lambda: 0
    wheel_size: Callable[[], int] = lambda: 0
    clock_skew: Callable[[], float | None] = lambda: None


def tenant_settings(message: admin_pb2.Tenant, paths: set[str], field: str = "tenant") -> dict:
    """Validated settings from a Tenant message for the given mask paths."""
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
    if "quotas" in paths:
        quotas = message.quotas
        for name, value, default in (
            ("max_jobs", quotas.max_jobs, DEFAULT_MAX_JOBS),
            ("max_payload_bytes", quotas.max_payload_bytes, DEFAULT_MAX_PAYLOAD_BYTES),
            ("requests_per_second", quotas.requests_per_second, DEFAULT_REQUESTS_PER_SECOND),
        ):
            if value < 0:
                violations.append(FieldViolation(f"{field}.quotas.{name}", "must be >= 0 (0 means the default)"))
            settings[name] = value or default
    if violations:
        raise InvalidArgument(violations)
    return settings


def _require(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument.field(field, "is required")
    return value


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    def __init__(
        self,
        auth: Authenticator,
        tenants: TenantStore,
        workers: WorkerCredentialStore,
        jobs: JobStore,
        info: ServerInfo,
        connections: Connections,
        partitions: PartitionStore,
        tzdata: TzdataStore | None = None,
        alerts: AlertStore | None = None,
    ) -> None:
        self._partitions = partitions
        self._tzdata = tzdata
        # Without one given, alerts are read through the jobs store's engine
        # and clock; watchers then see changes at their next poll.
        self._alerts = alerts or AlertStore(jobs.engine, jobs.clock)
        self._auth = auth
        self._tenants = tenants
        self._workers = workers
        self._jobs = jobs
        self._info = info
        self._connections = connections

    @rpc
    async def ClusterStatus(self, request, context):
        """This server's view: itself, and every partition's last fencing
        epoch and the server that raised it (from the store)."""
        await self._auth.admin(context)
        info = self._info
        server = admin_pb2.ServerStatus(
            server_id=info.server_id,
            address=info.address,
            session_id=info.session_id,
            started_at=convert.timestamp(info.started_at),
            version=__version__,
            workers=len(self._connections),
            partitions_owned=info.partitions_owned(),
            wheel_size=info.wheel_size(),
        )
        skew = info.clock_skew()
        if skew is not None:
            server.clock_skew.FromTimedelta(timedelta(seconds=skew))
        rows = await self._partitions.rows()
        return admin_pb2.ClusterStatusResponse(
            servers=[server],
            partitions=[
                admin_pb2.PartitionStatus(partition=row.partition, server_id=row.owner, epoch=row.epoch) for row in rows
            ],
            partition_count=info.partition_count,
            store_engine=info.store_engine,
            schema_version=info.schema_version,
            tzdata_version=info.tzdata_version,
        )

    @rpc
    async def CreateTenant(self, request, context):
        await self._auth.admin(context)
        name = request.tenant.name
        if not TENANT_NAME.match(name):
            raise InvalidArgument.field(
                "tenant.name", "1 to 63 characters of [a-z0-9-], starting with a letter"
            )
        settings = tenant_settings(request.tenant, {"weight", "max_concurrency", "quotas"})
        tenant, issued = await self._tenants.create(Tenant(name=name, **settings))
        return admin_pb2.CreateTenantResponse(
            tenant=convert.tenant_to_proto(tenant),
            api_key=admin_pb2.IssuedSecret(id=issued.key.id, secret=issued.secret),
        )

    @rpc
    async def GetTenant(self, request, context):
        await self._auth.admin(context)
        tenant = await self._tenants.get(_require(request.name, "name"))
        return admin_pb2.GetTenantResponse(tenant=convert.tenant_to_proto(tenant), job_count=tenant.job_count)

    @rpc
    async def ListTenants(self, request, context):
        await self._auth.admin(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        found = await self._tenants.list(after=convert.parse_page_token(request.page_token), limit=size + 1)
        token = convert.page_token(found[size - 1].name) if len(found) > size else ""
        return admin_pb2.ListTenantsResponse(
            tenants=[convert.tenant_to_proto(t) for t in found[:size]], next_page_token=token
        )

    @rpc
    async def UpdateTenant(self, request, context):
        await self._auth.admin(context)
        name = _require(request.tenant.name, "tenant.name")
        allowed = {"weight", "max_concurrency", "quotas"}
        paths = set(request.update_mask.paths) or allowed
        unknown = paths - allowed
        if unknown:
            raise InvalidArgument.field("update_mask", f"cannot update {sorted(unknown)}; allowed: {sorted(allowed)}")
        settings = tenant_settings(request.tenant, paths)
        tenant = await self._tenants.update(name, expected_version=request.tenant.version, **settings)
        return admin_pb2.UpdateTenantResponse(tenant=convert.tenant_to_proto(tenant))

    @rpc
    async def IssueApiKey(self, request, context):
        await self._auth.admin(context)
        issued = await self._tenants.issue_key(_require(request.tenant, "tenant"), request.description[:256])
        return admin_pb2.IssueApiKeyResponse(api_key=admin_pb2.IssuedSecret(id=issued.key.id, secret=issued.secret))

    @rpc
    async def RotateApiKey(self, request, context):
        await self._auth.admin(context)
        grace = request.grace.ToTimedelta() if request.HasField("grace") else timedelta(hours=24)
        if grace < timedelta(0) or grace > MAX_GRACE:
            raise InvalidArgument.field("grace", "must be between 0 and 30 days")
        issued, old_expiry = await self._tenants.rotate_key(_require(request.id, "id"), grace)
        self._auth.forget()
        return admin_pb2.RotateApiKeyResponse(
            api_key=admin_pb2.IssuedSecret(id=issued.key.id, secret=issued.secret),
            old_key_expires_at=convert.timestamp(old_expiry),
        )

    @rpc
    async def RevokeApiKey(self, request, context):
        await self._auth.admin(context)
        await self._tenants.revoke_key(_require(request.id, "id"))
        self._auth.forget()
        return admin_pb2.RevokeApiKeyResponse()

    @rpc
    async def ListApiKeys(self, request, context):
        await self._auth.admin(context)
        keys = await self._tenants.list_keys(_require(request.tenant, "tenant"))
        return admin_pb2.ListApiKeysResponse(api_keys=[convert.api_key_to_proto(k) for k in keys])

    @rpc
    async def IssueWorkerCredential(self, request, context):
        await self._auth.admin(context)
        if not request.tenants:
            raise InvalidArgument.field("tenants", "name at least one tenant")
        bad = [h for h in request.handlers if not HANDLER_NAME.match(h)]
        if bad:
            raise InvalidArgument.field("handlers", f"invalid handler names {bad}: 1 to 200 characters of [A-Za-z0-9_.:-]")
        issued = await self._workers.issue(
            list(request.tenants), list(request.handlers), request.http, request.description[:256]
        )
        return admin_pb2.IssueWorkerCredentialResponse(
            credential=admin_pb2.IssuedSecret(id=issued.credential.id, secret=issued.secret)
        )

    @rpc
    async def RevokeWorkerCredential(self, request, context):
        await self._auth.admin(context)
        await self._workers.revoke(_require(request.id, "id"))
        self._auth.forget()
        return admin_pb2.RevokeWorkerCredentialResponse()

    @rpc
    async def ListWorkerCredentials(self, request, context):
        await self._auth.admin(context)
        found = await self._workers.list(request.tenant)
        return admin_pb2.ListWorkerCredentialsResponse(
            credentials=[convert.worker_credential_to_proto(c) for c in found]
        )

    @rpc
    async def SearchJobs(self, request, context):
        await self._auth.admin(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        state = convert.JOB_STATE_FROM_PROTO.get(request.state, "")
        found = await self._jobs.search(
            tenant=request.tenant,
            after_id=convert.parse_page_token(request.page_token),
            limit=size + 1,
            state=state,
            name_prefix=request.name_prefix,
        )
        token = convert.page_token(found[size - 1].id) if len(found) > size else ""
        return admin_pb2.SearchJobsResponse(jobs=[convert.job_to_proto(j) for j in found[:size]], next_page_token=token)

    @rpc
    async def RecomputeSchedules(self, request, context):
        """Recompute stored next runs against this server's tzdata release:
        the zones that changed since each job's release, or the zones named."""
        await self._auth.admin(context)
        if self._tzdata is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "tzdata recompute is not available on this server")
        engine = default_engine()
        zones: set[str] | None = None
        if request.zones:
            known = engine.zones.keys()
            unknown = sorted({z for z in request.zones if z not in known})
            if unknown:
                raise InvalidArgument.field("zones", f"unknown time zones {unknown}")
            zones = set(request.zones)
        examined, shifted = await self._tzdata.recompute(
            engine, engine.tzdata_version, zones, self._tzdata.clock.now(), dry_run=request.dry_run
        )
        reply = admin_pb2.RecomputeSchedulesResponse(tzdata_version=engine.tzdata_version, examined=examined)
        for run in shifted:
            item = reply.shifted.add(job_id=run.job_id, tenant=run.tenant)
            if run.old_next_run_at is not None:
                item.old_next_run_at.CopyFrom(convert.timestamp(run.old_next_run_at))
            if run.new_next_run_at is not None:
                item.new_next_run_at.CopyFrom(convert.timestamp(run.new_next_run_at))
        return reply

    @rpc
    async def ListAlerts(self, request, context):
        await self._auth.admin(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        before = convert.parse_execution_page_token(request.page_token)
        page = await self._alerts.list(
            include_resolved=request.include_resolved,
            kinds=convert.alert_kinds(request.kinds),
            tenant=_tenant_filter(request.tenant),
            before_key=before,
            limit=size,
        )
        return admin_pb2.ListAlertsResponse(
            alerts=[convert.alert_to_proto(a) for a in page.alerts],
            next_page_token=convert.execution_page_token(page.next_key) if page.next_key else "",
        )

    async def WatchAlerts(self, request, context):
        """Server stream: the open alerts first when asked, then every change,
        until the client cancels (the generator is cancelled with the call)
        or the server stops (:meth:`AlertStore.close` ends it with OK). Bad
        input and credentials fail before anything is sent."""
        try:
            await self._auth.admin(context)
            kinds = convert.alert_kinds(request.kinds)
            tenant = _tenant_filter(request.tenant)
            async for alert in self._alerts.watch(kinds=kinds, tenant=tenant, include_open=request.include_open):
                yield admin_pb2.WatchAlertsResponse(alert=convert.alert_to_proto(alert))
        except (TickwheelError, RetryableStoreError) as error:
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            log.exception("WatchAlerts failed")
            await abort(context, error)


def _tenant_filter(name: str) -> str:
    """An optional tenant filter: empty, or a name a tenant could have."""
    if name and not TENANT_NAME.match(name):
        raise InvalidArgument.field("tenant", "1 to 63 characters of [a-z0-9-], starting with a letter")
    return name
