"""AdminService: operators' calls. Thin: proto in, store call, proto out.

RPCs whose machinery is missing from a server (draining without etcd,
tzdata recompute without its store) answer UNIMPLEMENTED rather than pretend.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc

from tickwheel.shared.ids import from_us, to_us

from .. import __version__
from ..alerts.watch import AlertWatch
from ..cluster.drain import Drainer, DrainUnanswered
from ..cluster.presence import Presence, ServerRecord
from ..cluster.revocations import Revocations
from ..errors import InvalidArgument, TickwheelError
from ..lease import LeaseStoreError
from ..store.alerts import AlertStore
from ..store.errors import RetryableStoreError
from ..store.credentials import WorkerCredentialStore
from ..store.jobs import JobStore
from ..store.operations import OperationsStore
from ..store.partitions import PartitionStore
from ..store.tzdata import TzdataStore
from ..telemetry.outages import OutageLog
from ..schedule import default_engine
from ..store.tenants import Tenant, TenantStore
from ..auth import tokens
from ..auth.authenticator import TENANT_CHANGED, Authenticator, Revoked
from ..gateway.connections import Connections
from ..gateway.revocation import end_streams
from . import convert
from .scopedtokens import parse_scoped_page_token, scoped_page_token
from .status import abort, rpc
from .tenantsettings import WHOLE_SETTINGS, tenant_settings, update_paths
from .validate import NAME_MAX, check_id, check_text
from .worker import MAX_HANDLERS

log = logging.getLogger(__name__)

TENANT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}\Z")
HANDLER_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}\Z")
MAX_CREDENTIAL_TENANTS = 1000
"""At most this many tenants named by one worker credential (IssueWorkerCredential's ``tenants``)."""
MAX_ZONES = 1000
"""At most this many zones named by one RecomputeSchedules (the tz database has about 600)."""
MAX_GRACE = timedelta(days=30)
DEFAULT_DRAIN_GRACE = timedelta(seconds=60)
MAX_DRAIN_GRACE = timedelta(hours=6)
CREDENTIAL_PAGE = 1000
"""The default and largest page of ListApiKeys and ListWorkerCredentials:
what one answer held before they paged, so a client that sends no page
field sees the same first answer, now with a token when more follow."""
SERVER_ID = re.compile(r"^[^/\s]{1,200}\Z")


@dataclass
class ServerInfo:
    """What ClusterStatus reports about the answering server, and the
    parts that know about the others.

    The callables read this server's figures at the moment they are asked.
    ``presence`` reads every server's published record (and publishes this
    one's, :meth:`record`); ``drainer`` drains this server or asks another
    to. Without them ClusterStatus shows this server alone and DrainServer
    answers UNIMPLEMENTED."""

    server_id: str
    address: str
    started_at: datetime
    store_engine: str
    schema_version: int
    partition_count: int
    tzdata_version: str
    session_id: str = ""
    """The current etcd session (hex); '' while there is none."""
    partitions_owned: Callable[[], int] = lambda: 0
    wheel_size: Callable[[], int] = lambda: 0
    clock_skew: Callable[[], float | None] = lambda: None
    """This server's clock minus the database's at the last check, in seconds."""
    workers: Callable[[], int] = lambda: 0
    reaper_leading: Callable[[], bool] = lambda: False
    session_live: Callable[[], bool] = lambda: True
    """Whether this server's etcd session is held now (False while it opens a new one)."""
    presence: Presence | None = None
    drainer: Drainer | None = None

    def record(self) -> ServerRecord:
        """This server's record as :class:`~tickwheel_server.cluster.presence.Presence` publishes it."""
        skew = self.clock_skew()
        return ServerRecord(
            server_id=self.server_id,
            address=self.address,
            version=__version__,
            started_at_us=to_us(self.started_at),
            partitions_owned=self.partitions_owned(),
            wheel_size=self.wheel_size(),
            workers=self.workers(),
            clock_skew_us=None if skew is None else round(skew * 1_000_000),
            draining=self.drainer is not None and self.drainer.draining,
        )


def _require(value: str, field: str) -> str:
    """A name or id the caller gives: required, and one that could be ours
    (:func:`.validate.check_id`): a megabyte is refused here, never looked
    up nor echoed back in a NOT_FOUND larger than the trailers a client takes."""
    if not value:
        raise InvalidArgument.field(field, "is required")
    return check_id(value, field)


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
        alert_watch: AlertWatch | None = None,
        operations: OperationsStore | None = None,
        revocations: Revocations | None = None,
    ) -> None:
        self._partitions = partitions
        self._revocations = revocations
        """Tells the other servers of a revocation made here (none: they learn it within their cache time)."""
        self._operations = operations or OperationsStore(jobs.engine, jobs.clock)
        self.cluster_outages = OutageLog(
            log, "AdminService.ClusterStatus", jobs.clock, then="showing this server only"
        )
        """ClusterStatus calls that could not read etcd: one line an outage, not one a call."""
        self._tzdata = tzdata
        # Without one given, alerts are read through the jobs store's engine
        # and clock; watchers then see changes at their next poll.
        self._alerts = alerts or AlertStore(jobs.engine, jobs.clock)
        self._alert_watch = alert_watch or AlertWatch(self._alerts)
        self._auth = auth
        self._tenants = tenants
        self._workers = workers
        self._jobs = jobs
        self._info = info
        self._connections = connections

    @rpc
    async def ClusterStatus(self, request, context):
        """The cluster as this server sees it.

        - Servers: every live one (an etcd session holding its key under
          ``/tickwheel/servers/``) with the figures it last published
          (every 10 s); this server's own are read now. If etcd cannot be
          read, this server alone.
        - Partitions: every partition's fencing epoch from the store (0
          before a first owner raised it), and its owner from etcd (the
          holder of its ownership key; empty while nobody holds it, e.g.
          between a server's death and the takeover). If etcd cannot be
          read, the server that last raised the epoch.
        - Queues: the ``top_tenants`` deepest ready queues (default 10, at
          most 100), by this server's clock.
        - Session state: this server's read now; every other listed server's
          is live (its record is on its session's lease). ``reaper`` marks
          the server holding the reaper election.
        """
        await self._auth.admin(context)
        top = request.top_tenants
        if not 0 <= top <= 100:
            raise InvalidArgument.field("top_tenants", "must be between 0 and 100 (0 means 10)")
        info = self._info
        now = self._jobs.clock.now()
        local = self._server_status(info.record(), info.session_id)
        local.session_state = admin_pb2.SESSION_STATE_LIVE if info.session_live() else admin_pb2.SESSION_STATE_LOST
        servers, holders, reaper = [local], None, info.server_id if info.reaper_leading() else ""
        if info.presence is not None:
            try:
                records = await info.presence.servers()
                holders = await info.presence.partition_holders()
                reaper = await info.presence.reaper()
            except LeaseStoreError as error:
                self.cluster_outages.failed("reading etcd", error)
            else:
                self.cluster_outages.ok()
                others = [self._server_status(r, r.session) for r in records if r.server_id != info.server_id]
                servers = sorted([local, *others], key=lambda s: s.server_id)
        rows = {row.partition: row for row in await self._partitions.rows()}
        queues = await self._operations.queues(now, top or 10)
        partitions = []
        for partition in range(info.partition_count):
            row = rows.get(partition)  # none until a first owner raised its epoch
            if holders is not None:
                owner = holders.get(partition, "")
            else:
                owner = row.owner if row is not None else ""
            partitions.append(
                admin_pb2.PartitionStatus(partition=partition, server_id=owner, epoch=row.epoch if row else 0)
            )
        for server in servers:
            server.reaper = bool(reaper) and server.server_id == reaper
        reply = admin_pb2.ClusterStatusResponse(
            servers=servers,
            partitions=partitions,
            partition_count=info.partition_count,
            reaper_server_id=reaper,
            store_engine=info.store_engine,
            schema_version=info.schema_version,
            tzdata_version=info.tzdata_version,
        )
        for queue in queues:
            item = reply.queues.add(tenant=queue.tenant, ready=queue.ready, running=queue.running)
            item.oldest_ready_age.FromTimedelta(max(timedelta(0), now - queue.oldest_ready_at))
        return reply

    @staticmethod
    def _server_status(record: ServerRecord, session_id: str) -> admin_pb2.ServerStatus:
        status = admin_pb2.ServerStatus(
            server_id=record.server_id,
            address=record.address,
            session_id=session_id,
            version=record.version,
            partitions_owned=record.partitions_owned,
            wheel_size=record.wheel_size,
            workers=record.workers,
            draining=record.draining,
            session_state=admin_pb2.SESSION_STATE_LIVE,
        )
        if record.started_at_us is not None:
            status.started_at.CopyFrom(convert.timestamp(from_us(record.started_at_us)))
        if record.clock_skew_us is not None:
            status.clock_skew.FromTimedelta(timedelta(microseconds=record.clock_skew_us))
        return status

    @rpc
    async def DrainServer(self, request, context):
        """Drain this server, or ask the one named to drain (through etcd; see
        :mod:`tickwheel_server.cluster.drain`). Idempotent: again, nothing more is
        released. NOT_FOUND when no live server has that id, UNAVAILABLE
        when it does not answer in time or etcd cannot be reached."""
        await self._auth.admin(context)
        server_id = request.server_id  # any printable text a server may be started with, not only ASCII
        if not server_id:
            raise InvalidArgument.field("server_id", "is required")
        if not SERVER_ID.match(server_id):
            raise InvalidArgument.field("server_id", "not a server id (ClusterStatus lists them)")
        grace = convert.span(request.grace, "grace") if request.HasField("grace") else DEFAULT_DRAIN_GRACE
        if not timedelta(0) <= grace <= MAX_DRAIN_GRACE:
            raise InvalidArgument.field("grace", "must be between 0 and 6 h")
        drainer = self._info.drainer
        if drainer is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "draining is not available on this server")
        try:
            if server_id == self._info.server_id:
                result = await drainer.drain(grace)
            else:
                result = await drainer.request(server_id, grace)
        except (DrainUnanswered, LeaseStoreError) as error:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"draining {server_id}: {error}")
        return admin_pb2.DrainServerResponse(
            partitions_released=result.partitions_released, workers_drained=result.workers_drained
        )

    @rpc
    async def SearchExecutions(self, request, context):
        await self._auth.admin(context)
        size = convert.page_size(request.page_size, default=50, maximum=500)
        before = convert.parse_execution_page_token(request.page_token)
        statuses = convert.enum_filter(
            request.statuses, convert.EXECUTION_STATUS_FROM_PROTO, "statuses", "unknown values"
        )
        from_at = convert.instant(request.from_at, "from_at") if request.HasField("from_at") else None
        to_at = convert.instant(request.to_at, "to_at") if request.HasField("to_at") else None
        if from_at is not None and to_at is not None and to_at <= from_at:
            raise InvalidArgument.field("to_at", "must be after from_at")
        if len(request.job_id) > 200:
            raise InvalidArgument.field("job_id", "at most 200 characters")
        page = await self._operations.search_executions(
            tenant=_tenant_filter(request.tenant),
            job_id=request.job_id,
            statuses=statuses,
            from_at=from_at,
            to_at=to_at,
            before_key=before,
            limit=size,
        )
        return admin_pb2.SearchExecutionsResponse(
            executions=[convert.execution_to_proto(e) for e in page.executions],
            next_page_token=convert.execution_page_token(page.next_key),
        )

    @rpc
    async def CreateTenant(self, request, context):
        await self._auth.admin(context)
        name = request.tenant.name
        if not TENANT_NAME.match(name):
            raise InvalidArgument.field(
                "tenant.name", "1 to 63 characters of [a-z0-9-], starting with a letter"
            )
        settings = tenant_settings(request.tenant, WHOLE_SETTINGS)
        tenant, issued = await self._tenants.create(Tenant(name=name, **settings))
        return admin_pb2.CreateTenantResponse(
            tenant=convert.tenant_to_proto(tenant),
            api_key=admin_pb2.IssuedSecret(id=issued.key.id, secret=issued.secret),
        )

    @rpc
    async def GetTenant(self, request, context):
        await self._auth.admin(context)
        tenant, count, pending = await self._tenants.get_counted(_require(request.name, "name"))
        return admin_pb2.GetTenantResponse(
            tenant=convert.tenant_to_proto(tenant), job_count=count, pending_manual_runs=pending
        )

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
        """Change the settings the mask names (see :mod:`.tenantsettings`):
        a bad mask or value is refused before anything is read; the version
        check and the write are one transaction (:meth:`TenantStore.update`)."""
        await self._auth.admin(context)
        name = _require(request.tenant.name, "tenant.name")
        settings = tenant_settings(request.tenant, update_paths(request.update_mask))
        tenant = await self._tenants.update(name, expected_version=request.tenant.version, **settings)
        await self._tenant_changed(tenant.name)
        return admin_pb2.UpdateTenantResponse(tenant=convert.tenant_to_proto(tenant))

    @rpc
    async def PauseTenant(self, request, context):
        """Pause the tenant: only its row is written (see
        :meth:`TenantStore.pause` for what the dispatcher and the hand-out
        then do). Idempotent; the reason is kept with the tenant."""
        await self._auth.admin(context)
        name = _require(request.name, "name")
        check_text(request.reason, "reason", 1000)
        tenant = await self._tenants.pause(name, request.reason)
        await self._tenant_changed(tenant.name)
        log.info("tenant %s paused: %s", name, request.reason or "(no reason given)")
        return admin_pb2.PauseTenantResponse(tenant=convert.tenant_to_proto(tenant))

    @rpc
    async def ResumeTenant(self, request, context):
        """Resume the tenant: its jobs continue at their next run not yet
        skipped; executions held back while it was paused are handed out."""
        await self._auth.admin(context)
        name = _require(request.name, "name")
        tenant = await self._tenants.resume(name)
        await self._tenant_changed(tenant.name)
        log.info("tenant %s resumed", name)
        return admin_pb2.ResumeTenantResponse(tenant=convert.tenant_to_proto(tenant))

    @rpc
    async def IssueApiKey(self, request, context):
        await self._auth.admin(context)
        description = check_text(request.description, "description", 256)
        issued = await self._tenants.issue_key(_require(request.tenant, "tenant"), description)
        return admin_pb2.IssueApiKeyResponse(api_key=admin_pb2.IssuedSecret(id=issued.key.id, secret=issued.secret))

    @rpc
    async def RotateApiKey(self, request, context):
        await self._auth.admin(context)
        grace = convert.span(request.grace, "grace") if request.HasField("grace") else timedelta(hours=24)
        if grace < timedelta(0) or grace > MAX_GRACE:
            raise InvalidArgument.field("grace", "must be between 0 and 30 days")
        issued, old_expiry = await self._tenants.rotate_key(_require(request.id, "id"), grace)
        # The old key's expiry moved: every server reads it again (a short grace ends on time).
        await self._announce(Revoked(tokens.API_KEY_PREFIX, request.id, issued.key.tenant))
        return admin_pb2.RotateApiKeyResponse(
            api_key=admin_pb2.IssuedSecret(id=issued.key.id, secret=issued.secret),
            old_key_expires_at=convert.timestamp(old_expiry),
        )

    @rpc
    async def RevokeApiKey(self, request, context):
        await self._auth.admin(context)
        key = await self._tenants.revoke_key(_require(request.id, "id"))
        await self._announce(Revoked(tokens.API_KEY_PREFIX, key.id, key.tenant))
        return admin_pb2.RevokeApiKeyResponse()

    @rpc
    async def ListApiKeys(self, request, context):
        await self._auth.admin(context)
        tenant = _require(request.tenant, "tenant")
        size = convert.page_size(request.page_size, default=CREDENTIAL_PAGE, maximum=CREDENTIAL_PAGE)
        after = parse_scoped_page_token(request.page_token, "ListApiKeys", tenant)
        found = await self._tenants.list_keys(tenant, after=after, limit=size + 1)
        keys = [convert.api_key_to_proto(k) for k in found[:size]]
        kept = convert.fitting(keys)
        more = kept < len(keys) or len(found) > size
        last = (found[kept - 1].created_at, found[kept - 1].id) if more else None
        return admin_pb2.ListApiKeysResponse(
            api_keys=keys[:kept], next_page_token=scoped_page_token("ListApiKeys", tenant, last)
        )

    @rpc
    async def IssueWorkerCredential(self, request, context):
        await self._auth.admin(context)
        if not request.tenants or len(request.tenants) > MAX_CREDENTIAL_TENANTS:
            raise InvalidArgument.field("tenants", f"name 1 to {MAX_CREDENTIAL_TENANTS} tenants")
        if len(request.handlers) > MAX_HANDLERS:  # a worker's hello may declare no more
            raise InvalidArgument.field("handlers", f"at most {MAX_HANDLERS} handler names")
        bad = [h for h in request.handlers if not HANDLER_NAME.match(h)]
        if bad:
            raise InvalidArgument.field("handlers", f"invalid handler names {bad[:10]}: 1 to 200 characters of [A-Za-z0-9_.:-]")
        description = check_text(request.description, "description", 256)
        issued = await self._workers.issue(list(request.tenants), list(request.handlers), request.http, description)
        return admin_pb2.IssueWorkerCredentialResponse(
            credential=admin_pb2.IssuedSecret(id=issued.credential.id, secret=issued.secret)
        )

    @rpc
    async def RevokeWorkerCredential(self, request, context):
        await self._auth.admin(context)
        credential = await self._workers.revoke(_require(request.id, "id"))
        revoked = Revoked(tokens.WORKER_CREDENTIAL_PREFIX, credential.id, credential.tenants[0])
        # Out of the cache before the streams are ended: a stream listed after this
        # ending checks its credential once listed, and the store then refuses it.
        self._auth.forget_revoked(revoked)
        # This server's streams end now; the others' when the word reaches them.
        end_streams(self._connections.all(), {credential.id})
        await self._announce(revoked)
        return admin_pb2.RevokeWorkerCredentialResponse()

    async def _tenant_changed(self, tenant: str) -> None:
        """The tenant's settings changed (committed; ``tenant`` as the store
        read it back): every server evicts the cached principals of its API
        keys, which carry its request rate and payload quota."""
        await self._announce(Revoked(TENANT_CHANGED, "", tenant))

    async def _announce(self, revoked: Revoked) -> None:
        """Drop the credential (or the changed tenant's keys) from this
        server's cache at once (only it: every other caller stays cached),
        then tell the other servers (what the store read back, never the
        request's words); answers once told,
        or after a bounded wait when the lease store cannot take it (they
        apply it within their cache time then)."""
        self._auth.forget_revoked(revoked)
        if self._revocations is not None and not await self._revocations.announce(revoked):
            if revoked.kind == TENANT_CHANGED:
                log.warning("tenant %s changed here; the other servers apply it within their cache time",
                            revoked.tenant)
            else:
                log.warning("%s %s revoked here; the other servers refuse it within their cache time",
                            "api key" if revoked.kind == tokens.API_KEY_PREFIX else "worker credential",
                            revoked.credential_id)

    @rpc
    async def ListWorkerCredentials(self, request, context):
        await self._auth.admin(context)
        size = convert.page_size(request.page_size, default=CREDENTIAL_PAGE, maximum=CREDENTIAL_PAGE)
        tenant = _tenant_filter(request.tenant)
        after = parse_scoped_page_token(request.page_token, "ListWorkerCredentials", tenant)
        page = await self._workers.list(tenant, after=after, limit=size)
        credentials = [convert.worker_credential_to_proto(c) for c in page.credentials]
        kept = convert.fitting(credentials)
        if kept < len(credentials):
            cut = page.credentials[kept - 1]
            page = replace(page, next_key=(cut.created_at, cut.id))
        return admin_pb2.ListWorkerCredentialsResponse(
            credentials=credentials[:kept],
            next_page_token=scoped_page_token("ListWorkerCredentials", tenant, page.next_key),
        )

    @rpc
    async def SearchJobs(self, request, context):
        await self._auth.admin(context)
        size = convert.page_size(request.page_size, default=100, maximum=1000)
        state = convert.JOB_STATE_FROM_PROTO.get(request.state, "")
        page = await self._jobs.page(
            tenant=_tenant_filter(request.tenant),
            after_id=convert.parse_page_token(request.page_token),
            limit=size + 1,
            state=state,
            name_prefix=check_text(request.name_prefix, "name_prefix", NAME_MAX),
        )
        jobs, token = convert.jobs_answer(page, size)
        return admin_pb2.SearchJobsResponse(jobs=jobs, next_page_token=token)

    @rpc
    async def RecomputeSchedules(self, request, context):
        """Recompute stored next runs against this server's tzdata release:
        the zones that changed since each job's release, or the zones named."""
        await self._auth.admin(context)
        if self._tzdata is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "tzdata recompute is not available on this server")
        engine = default_engine()
        zones: set[str] | None = None
        if len(request.zones) > MAX_ZONES:
            raise InvalidArgument.field("zones", f"at most {MAX_ZONES} time zones")
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
            next_page_token=convert.execution_page_token(page.next_key),
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
            async for alert in self._alert_watch.watch(kinds=kinds, tenant=tenant, include_open=request.include_open):
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
