"""The server process assembled: every role against a shared store and etcd,
started in order and stopped gracefully (the command line is
:mod:`tickwheel_server.cli.server`; the rooms are in docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from sqlalchemy.engine import Engine
from tickwheel.v1 import admin_pb2_grpc, scheduler_pb2_grpc, worker_pb2_grpc
from tickwheel.v1 import admin_pb2, scheduler_pb2, worker_pb2

from tickwheel.shared.backoff import BackoffSleeper
from tickwheel.shared.clock import Clock, SystemClock
from tickwheel.shared.ids import to_us
from tickwheel.shared.smallfiles import read_small
from tickwheel_worker.exporters import metric_exporter

from . import __version__, transport
from .api import decoding, reflection
from .api.admin import AdminServicer, ServerInfo
from .api.awaited import AwaitedRequests, EarlyRegistration
from .api.openstreams import BoundedHealth, OpenStreams
from .api.scheduler import SchedulerServicer
from .api.worker import WorkerServicer
from .auth.authenticator import Authenticator
from .circuits import CircuitBreaker
from .config import ServerConfig
from .gateway.connections import Connections
from .jobspec import DefinitionCache
from .lease import LeaseStore, LeaseStoreError, Session, SessionLost, open_lease_store
from .schedule import default_engine, zones
from .store import (
    RetryableStoreError, attempts_running, capabilities, create_store_engine, current_version, migrate,
    pending_migrations, settle,
)
from .dispatcher.dispatcher import Dispatcher
from .dispatcher.ownership import PartitionOwnership
from .dispatcher.wakeup import Wakeup
from .gateway.gateway import Gateway
from .gateway.revocation import CredentialWatch
from .alerts.lateness import LatenessWatch
from .alerts.skipped import SkipWatch, overlap_alerts
from .alerts.unowned import UnownedWatch
from .lease.keys import server_key, session_name
from .maintenance.reaper import Reaper
from .auth.ratelimit import LiveServers, RequestRateLimiter
from .alerts.webhook import AlertWebhook, WebhookConfig
from .alerts.catalogue import NewAlert, dead_letter_alert, poison_alert
from .alerts.server import ClockSkewAlert, record_circuits
from .alerts.watch import AlertWatch
from .cluster.drain import Drainer
from .cluster.presence import Presence
from .cluster.revocations import Revocations
from .store.alerts import AlertStore
from .store.calendars import CalendarStore
from .store.cluster import database_now, ensure_cluster
from .store.credentials import WorkerCredentialStore
from .store.deadletters import DeadLetterStore
from .store.dispatch import DispatchStore
from .store.executions import DeadLetter
from .store.queue import ExecutionQueue
from .store.history import HistoryStore
from .store.jobs import JobStore
from .store.manual import ManualStore
from .maintenance.compaction import CompactionConfig, EtcdCompaction
from .maintenance.retention import Retention, RetentionConfig
from .store.lateness import LatenessStore
from .store.retention import RetentionStore
from .store.skipped import SkipWatchStore
from .store.partitions import PartitionStore
from .store.tenants import TenantStore
from .store.tzdata import TzdataStore
from .wheel import TimerWheel, WheelRunner
from .web import HttpServer, Router, install_console, server_ssl_context
from .telemetry.gauges import StoreGauges
from .telemetry.metrics import Metrics
from .telemetry.tracing import Tracing, server_interceptor
from .telemetry.outages import OutageLog, log_failure, one_line, outage_of
from .waiting import WaitingForDependencies
from .web.metrics import install_metrics

log = logging.getLogger("tickwheel.server")

SERVICE_NAMES = [
    scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name,
    worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
]


STOP_SETTLE = 5.0
"""Seconds a stopping server waits for store transactions still running in their threads."""
ABANDON_REVOKE = 5.0
"""Seconds a failed start waits for etcd to revoke its session; past that the keys expire with its TTL."""
TZDATA_RETRY_FIRST_S = 1.0
TZDATA_RETRY_MAX_S = 60.0
"""The tzdata recompute's waits for a refusing store: the first, and at most (doubling between)."""


class StartupError(RuntimeError):
    """The server cannot start; the message says why and what to do."""


@dataclass
class Stores:
    tenants: TenantStore
    workers: WorkerCredentialStore
    jobs: JobStore
    history: HistoryStore
    dispatch: DispatchStore
    queue: ExecutionQueue
    partitions: PartitionStore
    alerts: AlertStore
    dead_letters: DeadLetterStore
    manual: ManualStore


class TickwheelServer:
    """All roles of one server process.

    ``start`` returns once the gRPC port is bound and serving; ``stop`` stops
    accepting calls, tells workers to drain, waits up to the grace for calls
    in progress, releases the etcd session (and with it everything it owns)
    and closes the store.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        clock: Clock | None = None,
        lease_store: LeaseStore | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.server_id = config.effective_server_id
        self._lease_store = lease_store
        self._opened_lease_store = False
        """True once the start opened the lease store itself (one passed in is the caller's to close)."""
        self._grpc: grpc.aio.Server | None = None
        self.open_streams = OpenStreams()
        """The streams that answer without a credential (health's Watch, reflection), per peer (``api/openstreams.py``)."""
        self.awaited = AwaitedRequests()
        """The port's calls waiting for their request message, per peer and in time (``api/awaited.py``)."""
        self._health = BoundedHealth(self.open_streams)
        self._session: Session | None = None
        self._session_task: asyncio.Task | None = None
        self._tasks: list[asyncio.Task] = []
        self._waiting: WaitingForDependencies | None = None
        self.waiting = asyncio.Event()
        """Set once the start first waits for the store or etcd (health
        NOT_SERVING on :attr:`waiting_port` meanwhile, :attr:`waiting_for`
        says for what)."""
        self.connections = Connections(config.stream_caps, server_id=self.server_id)
        self.port: int = 0
        self.router = Router()
        """GET routes of the HTTP endpoint (``--http-listen``): the console's,
        and any a component registers before ``start`` (``/metrics``)."""
        self.http: HttpServer | None = None
        self.stopped = asyncio.Event()
        self.metrics = Metrics(
            top_tenants=config.metrics_top_tenants,
            exporter=metric_exporter(config.metrics_export, config.otlp) if config.metrics_export != "none" else None,
        )
        """This server's instruments, scraped on ``/metrics`` (and pushed with ``--metrics-export otlp``)."""
        self._renewals_before = 0
        """Renewals of the sessions this server had before the current one."""
        self._session_outages = OutageLog(log, "etcd session", self.clock)
        """Reopening a lost session (one line an outage, not one a try)."""
        self._restamp_outages = OutageLog(log, "re-stamp", self.clock)
        """Moving running executions to a new session (one line an outage, not one a try)."""
        self.tracing = tracing if tracing is not None else Tracing.from_setting(config.trace_export, otlp=config.otlp)
        """Spans of API calls, dispatches and hand-outs (``--trace-export``; a test may pass its own)."""

    async def start(self) -> None:
        """Start every role; while the store or etcd does not answer, wait
        for it serving health as NOT_SERVING (:mod:`.waiting`)."""
        self._waiting = WaitingForDependencies(
            self.clock, self._bind, SERVICE_NAMES, on_wait=self.waiting.set,
            health_servicer=lambda: BoundedHealth(self.open_streams),
            registration=lambda server: EarlyRegistration(server, self.awaited),
        )
        try:
            await self._start()
        except BaseException:
            await self._abandon_start()
            raise
        finally:
            await self._waiting.close()  # a start that failed or was cancelled frees the port too

    async def _abandon_start(self) -> None:
        """A start that failed or was cancelled after its port was bound
        (waiting for etcd again): stop what it started, freeing the port."""
        if self._grpc is not None:
            await self._grpc.stop(0)
            self._grpc = None
        if self.http is not None:
            await self.http.stop(0)
            self.http = None
        ownership = getattr(self, "ownership", None)
        if ownership is not None:
            await ownership.stop(release=False)
        if self._session_task is not None:
            self._session_task.cancel()
            await asyncio.gather(self._session_task, return_exceptions=True)
        if self._session is not None:  # its keys go now, not when its TTL runs out
            session, self._session = self._session, None
            try:
                await asyncio.wait_for(session.close(), ABANDON_REVOKE)
            except Exception as error:  # noqa: BLE001 - the start's own error is the one raised
                why = f"no answer within {ABANDON_REVOKE:g} s" if isinstance(error, TimeoutError) else one_line(error)
                log.warning("could not revoke etcd session %x of the failed start (its keys expire with its "
                            "TTL): %s", session.id, why)
        if self._opened_lease_store and self._lease_store is not None:
            await self._lease_store.close()
            self._lease_store = None

    @property
    def waiting_for(self) -> str:
        """What the start waits for now ("the store at URL", "etcd at
        ENDPOINTS"); empty when it waits for nothing (before it tried, once
        it is done, or between two tries that answered)."""
        return "" if self._waiting is None or self._waiting.done else self._waiting.waiting_for

    @property
    def waiting_port(self) -> int | None:
        """The port whose health said NOT_SERVING while the start waited
        (the server serves on it once started); None if it never waited."""
        return self._waiting.port if self._waiting is not None and self.waiting.is_set() else None

    def _starting(self) -> str:
        """Why a worker stream is refused while the start is not done; empty once it is."""
        return "" if self._waiting.done else self._waiting.refusal()

    async def _check_schema(self) -> int:
        """Migrate if asked; the schema's version. An outage is raised as it
        is (the start waits for the store); anything else is a StartupError."""
        try:
            if self.config.migrate:
                await asyncio.to_thread(migrate_apart, self.engine)
            version = await asyncio.to_thread(current_version, self.engine)
            pending = await asyncio.to_thread(pending_migrations, self.engine)
        except Exception as error:
            if outage_of(error) is not None:
                raise
            raise StartupError(f"store {capabilities(self.engine).dialect}: {error}") from error
        if pending:
            # Any migration not applied, also one older than the newest applied.
            raise StartupError(
                f"the store's schema lacks migrations {', '.join(m.label for m in pending)} "
                f"(newest applied: {version}): run `tickwheel migrate --store URL` or start with --migrate"
            )
        return version

    async def _start(self) -> None:
        config = self.config
        zones.pin_tzdata()
        self.engine = create_store_engine(
            config.store, lock_timeout=config.store_lock_timeout,
            idle_in_transaction_timeout=config.store_idle_limit,  # a frozen server's locks: one session at most
        )
        caps = capabilities(self.engine)
        store_at = self.engine.url.render_as_string(hide_password=True)
        version = await self._waiting.until_up("the store", store_at, self._check_schema)
        cluster = await self._waiting.until_up(
            "the store", store_at, lambda: ensure_cluster(self.engine, self.clock, config.partition_count)
        )
        if cluster.partition_count != config.partition_count:
            log.warning(
                "cluster %s has %d partitions (fixed at creation); ignoring partition_count=%d",
                cluster.cluster_id, cluster.partition_count, config.partition_count,
            )
        alerts = AlertStore(self.engine, self.clock)

        def raise_dead_letter_alert(conn, letter: DeadLetter) -> None:
            """In the transaction that dead-letters the execution: its alert commits with it."""
            if letter.poison:
                alert = poison_alert(
                    execution_id=letter.execution_id, job_id=letter.job_id, tenant=letter.tenant, reason=letter.reason
                )
            else:
                alert = dead_letter_alert(
                    execution_id=letter.execution_id, job_id=letter.job_id, tenant=letter.tenant,
                    reason=letter.reason, error=letter.error,
                )
            alerts.raise_in(conn, alert)

        self.breaker = CircuitBreaker(config.breaker_settings, self.clock)
        """Circuits per (tenant, target host) over the results this server records (see ``breaker``)."""
        definitions = DefinitionCache()  # one per server: what the claim parsed, the hand-out finds
        self.stores = Stores(
            tenants=TenantStore(self.engine, self.clock),
            workers=WorkerCredentialStore(self.engine, self.clock),
            jobs=JobStore(self.engine, self.clock, partition_count=cluster.partition_count),
            history=HistoryStore(self.engine, self.clock),
            dispatch=DispatchStore(
                self.engine, self.clock, trace_occurrence=self.tracing.dispatch_span if self.tracing.enabled else None,
                alerts=alerts, server_id=self.server_id, definitions=definitions,
            ),
            queue=ExecutionQueue(
                self.engine, self.clock, on_dead_letter=raise_dead_letter_alert,
                on_skip=lambda conn, skipped: alerts.raise_many_in(conn, overlap_alerts(skipped)),
                breaker=self.breaker, definitions=definitions,
            ),
            partitions=PartitionStore(self.engine, self.clock),
            alerts=alerts,
            dead_letters=DeadLetterStore(self.engine, self.clock, alerts),
            manual=ManualStore(self.engine, self.clock),
        )
        for store in (self.stores.jobs, self.stores.dispatch, self.stores.queue.handout):
            store.on_skipped = self.metrics.skipped  # every writer of skip ranges (store.skiptally)
        self.alert_watch = AlertWatch(alerts)
        """Numbers alert changes and serves WatchAlerts over :attr:`Stores.alerts`."""
        self.tzdata = TzdataStore(self.engine, self.clock)
        if self._lease_store is None:
            if config.etcd.strip() == "memory":
                # In-process leases restart at revision 1; continue above the
                # epochs this store recorded, so fencing keeps increasing.
                from .lease.memory import MemoryLeaseStore

                start = await self._waiting.until_up("the store", store_at, self.stores.partitions.max_epoch) + 1
                self._lease_store = MemoryLeaseStore(self.clock, start_revision=start)
                self._opened_lease_store = True
            else:
                self._lease_store = open_lease_store(config.etcd, self.clock)
                self._opened_lease_store = True
        await self._waiting.until_up("etcd", config.etcd, self._open_session)
        self._session_task = asyncio.create_task(self._keep_session(), name="tickwheel-session")
        self.ownership = PartitionOwnership(
            self._lease_store, self._session, self.stores.partitions,
            server_id=self.server_id, partition_count=cluster.partition_count, clock=self.clock,
        )
        self.gateway = Gateway(
            self.stores.queue, self.connections, self.clock, owner=self._session_hex(), session=self._session,
            db_clock=lambda: database_now(self.engine, self.clock),
            heartbeat_timeout=config.heartbeat_timeout,
            reattach_grace=config.session_ttl,
            on_retry=self._wheel_insert,
            on_skew=ClockSkewAlert(self.stores.alerts, self.server_id),
            metrics=self.metrics,
            tracing=self.tracing,
            arm_ahead=config.arm_ahead,
        )

        async def wake_gateway(_batch) -> None:
            self.gateway.wake()

        self.wheel = WheelRunner(TimerWheel(to_us(self.clock.now())), self.clock, wake_gateway)
        self.calendars = CalendarStore(
            self.engine, self.clock, alerts=self.stores.alerts, walk_hold=2 * config.session_ttl
        )
        """Calendars; its walks left by a dead server are the reaper's duty (:meth:`CalendarStore.resume_walks`)."""
        self.reaper = Reaper(
            self.stores.queue.requeues, self._lease_store, lambda: self._session, self.clock,
            server_id=self.server_id, grace=config.reaper_grace or config.session_ttl,
            on_requeued=self._reaped, arming=self.stores.queue.arming, on_disarmed=lambda _back: self.gateway.wake(),
            duties=[
                LatenessWatch(LatenessStore(self.engine, self.clock, definitions=definitions), self.stores.alerts, self.clock).check_once,
                SkipWatch(SkipWatchStore(self.engine, self.clock, self.stores.alerts)).check_once,
                UnownedWatch(
                    lambda: self.presence.partition_holders(), cluster.partition_count, self.stores.partitions,
                    self.stores.alerts, self.clock, grace=2 * config.session_ttl,
                ).check_once,
                self.calendars.resume_walks,
            ],
        )
        self.dispatcher = Dispatcher(
            self.stores.dispatch, self.ownership, self.wheel, self.clock, metrics=self.metrics,
            lender=self.gateway.lending, batch=config.claim_batch,
            # SQLite has one writer: claims side by side would only queue on it.
            lanes=1 if self.stores.dispatch.caps.is_sqlite else config.claim_lanes,
        )
        # A write that makes something due before the next tick wakes the
        # partition's owner: this dispatcher, or another server's through its
        # wake key (dispatcher/wakeup.py).
        self.wakeup = Wakeup(
            self._lease_store, self.ownership, self.clock, local=self.dispatcher.wake, ready=self.gateway.wake_ready,
            session=lambda: self._session, within=2 * self.dispatcher.tick,
        )
        # One sender per cluster: the reaper's leader, whichever server raised the alert.
        self.webhook = (
            AlertWebhook(
                self.stores.alerts, WebhookConfig(config.alert_webhook), self.clock, leading=lambda: self.reaper.leading
            )
            if config.alert_webhook
            else None
        )

        # A tenant's API request rate is shared out among the live servers (presence).
        self.live_servers = LiveServers(lambda: self.presence.servers(), self.clock)
        self.rate_limiter = RequestRateLimiter(self.clock, servers=lambda: self.live_servers.count)
        auth = Authenticator(
            self.stores.tenants, self.stores.workers, config.admin_token, self.clock, rate_limiter=self.rate_limiter
        )
        self.auth = auth
        """Who is calling, and what failed authentications may cost (``auth.failures``)."""
        self.credential_watch = CredentialWatch(
            self.connections, self.stores.workers.live, self.clock, interval=auth.cache_ttl / 2,
            on_revoked=auth.forget_worker_credentials,
        )
        """Ends the open streams of worker credentials revoked on any server (see ``gateway.revocation``)."""
        self.revocations = Revocations(
            self._lease_store, self.clock, server_id=self.server_id, forget=auth.forget_revoked,
            forget_all=auth.forget, recheck=self.credential_watch.check_once,
        )
        """Tells every server of a revocation or tenant change made here at once,
        and follows theirs (``cluster.revocations``)."""
        self.info = ServerInfo(
            server_id=self.server_id,
            address=config.effective_advertise,
            started_at=self.clock.now(),
            store_engine=caps.dialect,
            schema_version=version,
            partition_count=cluster.partition_count,
            tzdata_version=zones.tzdata_version(),
            session_id=self._session_hex(),
            partitions_owned=lambda: len(self.ownership.owned()),
            wheel_size=lambda: len(self.wheel.wheel),
            clock_skew=lambda: self.gateway.fence.clock_skew,
            workers=lambda: len(self.connections),
            reaper_leading=lambda: self.reaper.leading,
            session_live=lambda: self._session is not None and not self._session.lost.is_set(),
        )
        self.presence = Presence(self._lease_store, lambda: self._session, self.clock, self.info.record)
        self.drainer = Drainer(
            self.ownership, self.connections, self._lease_store, lambda: self._session, self.clock,
            server_id=self.server_id, on_drain=self._on_drain,
        )
        self.info.presence, self.info.drainer = self.presence, self.drainer
        self._observe()
        self.retention = Retention(
            RetentionStore(self.engine, self.clock, self.stores.alerts), self.stores.alerts, self._lease_store,
            lambda: self._session, self.clock, server_id=self.server_id,
            config=RetentionConfig(
                retention=timedelta(days=config.retention_days),
                rollup_retention=timedelta(days=config.rollup_retention_days),
            ),
        )
        self.compaction = EtcdCompaction(
            self._lease_store, lambda: self._session, self.clock, self.stores.alerts, server_id=self.server_id,
            config=CompactionConfig(retention=timedelta(seconds=config.etcd_compaction_retention)),
        )
        self.worker_servicer = WorkerServicer(
            auth,
            self.connections,
            self.clock,
            server_id=self.server_id,
            session_id=self._session_hex(),
            heartbeat_interval=config.heartbeat_interval,
            heartbeat_timeout=config.heartbeat_timeout,
            gateway=self.gateway,
            draining=lambda: self.drainer.draining,
            starting=self._starting,
        )
        server = grpc.aio.server(
            options=[("grpc.so_reuseport", 0), ("grpc.keepalive_time_ms", 30_000), *transport.LIMITS],
            interceptors=[server_interceptor(self.tracing)] if self.tracing.enabled else None,
        )
        scheduler = SchedulerServicer(
            auth, self.stores.jobs, self.clock, self.stores.history, self.stores.dead_letters,
            manual=self.stores.manual, target_policy=config.target_policy, on_ready=self._ready_now,
            calendars=self.calendars,
            on_due=self.wakeup.due,
        )
        self.creates = scheduler.creates
        # Until the start is done, every call but health's and reflection's is
        # refused UNAVAILABLE "starting: ..." (worker streams by Pull itself).
        self.awaited.trusted = auth.windows.trusted  # a tenant's or worker's calls count under its credential
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(
            scheduler, decoding.guard(server, starting=self._waiting, windows=auth.windows, requests=self.awaited)
        )
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(
            self.worker_servicer, decoding.guard(
                server, refuse_nul=False, discard_unknown=False, windows=auth.windows, requests=self.awaited)
        )
        admin_servicer = AdminServicer(
            auth, self.stores.tenants, self.stores.workers, self.stores.jobs, self.info, self.connections,
            self.stores.partitions, self.tzdata, alerts=self.stores.alerts, alert_watch=self.alert_watch,
            revocations=self.revocations,
        )
        admin_pb2_grpc.add_AdminServiceServicer_to_server(
            admin_servicer, decoding.guard(server, starting=self._waiting, windows=auth.windows, requests=self.awaited)
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, EarlyRegistration(server, self.awaited))
        reflection.enable(server, [*SERVICE_NAMES, health.SERVICE_NAME], self.open_streams)
        for name in ["", *SERVICE_NAMES]:  # until the whole start is done (the servicer says SERVING by default)
            await self._health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self._waiting.close()  # its port is this server's now
        self.port = self._bind(server)
        self._waiting.bound(self.port)
        if not config.advertise:
            self.info.address = self.address
        if config.http_listen:
            await self._start_http(auth, admin_servicer)
        await server.start()
        self._grpc = server
        await self.ownership.start()
        # etcd may have gone since the session opened: wait for it again
        # (health stays NOT_SERVING, worker streams are refused) rather than
        # fail a start whose port is already bound.
        await self._waiting.until_up("etcd", config.etcd, self._publish_at_start)
        self._tasks = [
            asyncio.create_task(self.wheel.run(), name="tickwheel-wheel"),
            asyncio.create_task(self.gateway.run(), name="tickwheel-gateway"),
            asyncio.create_task(self.gateway.liveness.run(), name="tickwheel-liveness"),
            asyncio.create_task(self.reaper.run(), name="tickwheel-reaper"),
            asyncio.create_task(self.alert_watch.run(), name="tickwheel-alerts"),
            asyncio.create_task(self.presence.run(), name="tickwheel-presence"),
            asyncio.create_task(self.drainer.run(), name="tickwheel-drain"),
            asyncio.create_task(self.retention.run(), name="tickwheel-retention"),
            asyncio.create_task(self.compaction.run(), name="tickwheel-etcd-compaction"),
            asyncio.create_task(self.dispatcher.run(), name="tickwheel-dispatcher"),
            asyncio.create_task(self.wakeup.run(), name="tickwheel-wakeup"),
            # In the background: start does not wait for a recompute.
            asyncio.create_task(self._recompute_tzdata(), name="tickwheel-tzdata"),
        ]
        if self.webhook is not None:
            self._tasks.append(asyncio.create_task(self.webhook.run(), name="tickwheel-webhook"))
        self._tasks.append(asyncio.create_task(self.live_servers.run(), name="tickwheel-live-servers"))
        if self.metrics.push_interval is not None:
            self._tasks.append(asyncio.create_task(self.metrics.keep_fresh(self.clock.sleep), name="tickwheel-metrics"))
        self._tasks.append(asyncio.create_task(self.credential_watch.run(), name="tickwheel-credential-watch"))
        self._tasks.append(asyncio.create_task(self.revocations.run(), name="tickwheel-revocations"))
        self._tasks.append(asyncio.create_task(
            record_circuits(self.breaker, self.stores.alerts, self.clock), name="tickwheel-circuits"
        ))
        self._waiting.done = True  # the API answers from here on
        for name in ["", *SERVICE_NAMES]:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "tickwheel %s serving on %s (server %s, store %s, schema %d, %d partitions)",
            __version__, self.address, self.server_id, caps.dialect, version, cluster.partition_count,
        )

    async def _recompute_tzdata(self) -> None:
        """Record this release's zone fingerprints, then recompute the cursors
        of jobs recorded with another release in zones whose rules changed.
        A store that refuses (down, out of connections, a table locked) is
        waited out, trying again with backoff up to :data:`TZDATA_RETRY_MAX_S`
        apart: given up, stale cursors would stay until the next start."""
        version = zones.tzdata_version()
        delay = TZDATA_RETRY_FIRST_S
        while True:
            try:
                prints = await asyncio.to_thread(zones.zone_fingerprints)
                await self.tzdata.record(version, prints)
                examined, shifted = await self.tzdata.recompute(
                    default_engine(), version, None, self.clock.now(), dry_run=False
                )
                break
            except asyncio.CancelledError:
                raise
            except RetryableStoreError as error:
                log.warning("tzdata %s: recomputing stored next runs waits for the store (%s); again in %g s",
                            version, error, delay)  # fmt: skip
                await self.clock.sleep(delay)
                delay = min(delay * 2, TZDATA_RETRY_MAX_S)
            except Exception:
                log.exception("tzdata %s: recomputing stored next runs failed", version)
                return
        if shifted:
            old = ",".join(sorted({run.old_version for run in shifted}))
            shown = "; ".join(
                f"job {run.job_id} ({run.tenant}) {_rfc3339(run.old_next_run_at)} → {_rfc3339(run.new_next_run_at)}"
                for run in shifted[:100]
            )
            more = f"; … and {len(shifted) - 100} more" if len(shifted) > 100 else ""
            log.warning("tzdata %s→%s shifted %d runs: %s%s", old, version, len(shifted), shown, more)
            try:
                await self.stores.alerts.raise_alert(
                    NewAlert(
                        key=f"tzdata_shift:{old}->{version}", kind="tzdata_shift", severity="warning",
                        summary=f"time-zone rules {old}→{version} moved the next run of {len(shifted)} jobs",
                        server_id=self.server_id, details={"shifted": str(len(shifted)), "runs": shown[:4000]},
                    )
                )
            except Exception:
                log.exception("cannot raise the tzdata shift alert")
        elif examined:
            log.info("tzdata %s: %d jobs recomputed, no next run moved", version, examined)

    async def _start_http(self, auth: Authenticator, admin_servicer: AdminServicer) -> None:
        """The HTTP endpoint: the web console on :attr:`router`, with the
        gRPC port's certificate (and client CA) when TLS is configured."""
        config = self.config
        install_console(
            self.router, auth=auth, jobs=self.stores.jobs, history=self.stores.history,
            dead_letters=self.stores.dead_letters, admin=admin_servicer, server_id=self.server_id,
            clock=self.clock, target_policy=config.target_policy, starting=self._waiting,
        )
        install_metrics(self.router, auth=auth, metrics=self.metrics)
        tls = config.tls
        context = None if tls is None else server_ssl_context(tls.cert_file, tls.key_file, tls.client_ca_file)
        self.http = HttpServer(self.router, config.http_listen, ssl_context=context, clock=self.clock)
        try:
            await self.http.start()
        except OSError as error:
            self.http = None
            raise StartupError(
                f"cannot listen on {config.http_listen} (--http-listen): {error.strerror or error}"
            ) from error
        log.info("web console and HTTP endpoints on %s", self.http.url)

    def _observe(self) -> None:
        """What the metrics read from memory when scraped, and the store's gauges."""
        metrics = self.metrics
        loop = asyncio.get_running_loop()  # read from the push thread too, with OTLP
        metrics.observe("tickwheel_wheel_size", "Due instants in this server's timer wheel", lambda: len(self.wheel.wheel))
        metrics.observe(
            "tickwheel_partitions_owned", "Partitions this server owns", lambda: len(self.ownership.owned())
        )
        metrics.observe("tickwheel_workers_connected", "Workers holding a Pull stream", lambda: len(self.connections))
        metrics.observe(
            "tickwheel_wakeups_sent_total", "Wake-up puts to other servers' wake keys (a write made a job due now)",
            lambda: self.wakeup.puts, counter=True,
        )
        metrics.observe(
            "tickwheel_wakeups_received_total", "Wake-ups seen on this server's wake key",
            lambda: self.wakeup.received, counter=True,
        )
        metrics.observe(
            "tickwheel_revocations_sent_total",
            "Puts on the revocations key telling the others of revocations and tenant changes made here",
            lambda: self.revocations.puts, counter=True,
        )
        metrics.observe(
            "tickwheel_revocations_received_total", "Other servers' puts on the revocations key seen here",
            lambda: self.revocations.received, counter=True,
        )
        metrics.observe(
            "tickwheel_dispatch_woken_claims_total", "Claims a wake-up brought forward of the dispatcher's tick",
            lambda: self.dispatcher.woken_ticks, counter=True,
        )
        metrics.observe(
            "tickwheel_handout_ready_wakes_total",
            "Ready wake-ups (a trigger, backfill or resume made executions ready now, here or on another server)",
            lambda: self.gateway.ready_wakes, counter=True,
        )
        metrics.observe(
            "tickwheel_handout_woken_rounds_total",
            "Hand-out rounds ready wake-ups started (at most one per ready gap, however many arrive)",
            lambda: self.gateway.woken_rounds, counter=True,
        )
        metrics.observe(
            "tickwheel_handout_rounds_total", "Hand-out rounds run, for any reason",
            lambda: self.gateway.rounds_run, counter=True,
        )
        metrics.observe(
            "tickwheel_session_renewals_total", "etcd lease renewals of this server's sessions",
            lambda: self._renewals_before + getattr(self._session, "renewals", 0), counter=True,
        )
        metrics.observe(
            "tickwheel_circuits_opened_total", "Circuit breakers opened (or re-opened) per (tenant, target host)",
            lambda: self.breaker.opened, counter=True,
        )
        metrics.observe(
            "tickwheel_circuits_open", "Circuit breakers open or half-open on this server",
            lambda: len(self.breaker.circuits()),
        )
        metrics.observe(
            "tickwheel_etcd_compactions_total", "Compactions of etcd's history this server made as the compactor",
            lambda: self.compaction.compactions, counter=True,
        )
        metrics.observe(
            "tickwheel_etcd_compacted_revision",
            "The revision etcd's history was last compacted to, as this server knows it (none before)",
            lambda: [({}, float(r))] if (r := self.compaction.compacted_revision) else [],
        )
        metrics.observe(
            "tickwheel_refusal_windows_refused_total",
            "Calls refused at the edge inside their caller's refusal window (a retry delay it did not wait out)",
            lambda: self.auth.windows.refused, counter=True,
        )
        metrics.observe(
            "tickwheel_refusal_windows", "Callers with a refusal window kept on this server (ended ones included)",
            lambda: len(self.auth.windows),
        )
        metrics.observe(
            "tickwheel_request_messages_refused_total",
            "Calls refused waiting for their request message: past their address's bound (per_peer) or their time (late)",
            lambda: [({"why": "per_peer"}, float(self.awaited.refused)), ({"why": "late"}, float(self.awaited.timed_out))],
            counter=True,
        )
        metrics.observe(
            "tickwheel_authentications_refused_total",
            "Authentications refused RESOURCE_EXHAUSTED for a peer's (or all peers') failed ones, without a store read",
            lambda: self.auth.failures.refused, counter=True,
        )
        metrics.observe(
            "tickwheel_clock_skew_seconds",
            "This server's clock minus the store's, as last compared (none before the first comparison)",
            self._clock_skew,
        )
        metrics.observe(
            "tickwheel_asyncio_tasks", "Tasks on this server's event loop (bounded by the calls and streams it serves)",
            lambda: len(asyncio.all_tasks(loop)),
        )
        metrics.observe(
            "tickwheel_store_attempts_running",
            "Store transaction attempts running in threads now, including those whose caller gave up",
            lambda: attempts_running(self.engine),
        )
        StoreGauges(self.engine, self.clock, top=max(1, self.config.metrics_top_tenants)).install(metrics)

    def _clock_skew(self) -> list[tuple[dict[str, str], float]]:
        skew = self.gateway.fence.clock_skew
        return [] if skew is None else [({}, skew)]

    def _reaped(self, requeued) -> None:
        """The reaper requeued executions of an expired session: hand them out again."""
        self.metrics.requeued("session", len(requeued))
        self.gateway.wake()

    @property
    def address(self) -> str:
        host = self.config.listen.rpartition(":")[0]
        return f"{host}:{self.port}"

    def _bind(self, server: grpc.aio.Server) -> int:
        """Bind ``server`` to the configured address; to the port the
        placeholder of a start that waited got, when it was port 0."""
        listen = self.config.listen
        if self._waiting is not None and self._waiting.port is not None:
            listen = f"{listen.rpartition(':')[0]}:{self._waiting.port}"
        tls = self.config.tls
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            client_ca = read_small(tls.client_ca_file) if tls.client_ca_file else None
            credentials = grpc.ssl_server_credentials(
                [(read_small(tls.key_file), read_small(tls.cert_file))],
                root_certificates=client_ca,
                require_client_auth=client_ca is not None,
            )
            port = server.add_secure_port(listen, credentials)
        if port == 0:
            raise StartupError(f"cannot listen on {self.config.listen}: the address is in use or not local")
        return port

    def _session_hex(self) -> str:
        return session_name(self._session.id) if self._session is not None else ""

    async def _on_drain(self) -> None:
        """Draining: workers are told to go elsewhere; health says so for WorkerService."""
        await self._health.set(SERVICE_NAMES[1], health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.presence.publish()

    def _ready_now(self) -> None:
        """An execution became ready through the API (trigger, backfill, replay, resume): hand
        out now, a tenant's flood of them merged (:meth:`.Gateway.wake_ready`)."""
        self.gateway.wake_ready()

    def _wheel_insert(self, retry) -> None:
        """A retry's ready instant goes into the timer wheel, like any due instant."""
        self.wheel.insert(retry.execution_id, retry.ready_at_us, retry.partition)

    async def _open_session(self) -> None:
        session = await self._lease_store.open_session(self.config.session_ttl)
        value = json.dumps(
            {"server_id": self.server_id, "address": self.config.effective_advertise, "version": __version__}
        )
        try:
            await self._lease_store.put(server_key(self.server_id), value, session=session)
        except BaseException:
            await session.close()
            raise
        if self._session is not None:  # the lost one's renewals stay counted
            self._renewals_before += getattr(self._session, "renewals", 0)
        self._session = session
        log.info("etcd session %x open (ttl %d s)", session.id, session.ttl)

    async def _keep_session(self) -> None:
        """Reopen the session whenever it is lost, with capped backoff."""
        backoff = BackoffSleeper(self.clock, initial=0.2, cap=self.config.session_ttl / 2)
        while True:
            await self._session.lost.wait()
            log.warning("etcd session %x lost: %s; opening a new one", self._session.id, self._session.lost_reason)
            self.metrics.session_lost()
            # A lease that outlived the loss (etcd keeps leases across a restart)
            # is revoked now rather than left to expire.
            await self._session.close()
            await self._reopen_session(backoff)
            old_owner, new_owner = self.gateway.fence.owner, self._session_hex()
            # The gateway hands nothing out under the lost session (its fence
            # refuses it): move what runs under it to the new one, then hand
            # out under the new one. A re-stamp is conditional on the old
            # owner, so what a reaper took meanwhile stays taken.
            self.info.session_id = self.worker_servicer.session_id = new_owner
            await self._restamp(old_owner, new_owner)
            self.gateway.use_session(self._session, new_owner)
            await self.ownership.reset_session(self._session)
            try:
                await self.presence.publish()
            except LeaseStoreError as error:
                log_failure(log, "publishing this server's record", error, then="its presence loop does it again")

    async def _publish_at_start(self) -> None:
        """This server's record, published before it says SERVING; a session
        lost meanwhile (etcd went away) is waited for like etcd itself: the
        session loop opens a new one once etcd is back."""
        if not await self.presence.publish():
            raise SessionLost(f"session {self._session.id:x} lost before this server's record was published")

    async def _reopen_session(self, backoff: BackoffSleeper) -> None:
        """Open a new session, retried with ``backoff`` while etcd refuses;
        an outage is logged once (and a line a minute), not a line a try."""
        while True:
            try:
                await self._open_session()
                break
            except LeaseStoreError as error:
                self._session_outages.failed("opening a new session", error)
                await backoff.sleep()
        self._session_outages.ok()
        backoff.reset()

    async def _restamp(self, old_owner: str, new_owner: str) -> None:
        """Put the executions this server's workers run under its new session
        before the reaper's grace for the old one ends; retried while the
        store is unreachable."""
        backoff = BackoffSleeper(self.clock, initial=0.2, cap=self.config.session_ttl / 4)
        while True:
            try:
                moved = await self.stores.queue.requeues.restamp(old_owner, new_owner)
            except Exception as error:
                self._restamp_outages.failed("re-stamping running executions to the new session", error)
                await backoff.sleep()
            else:
                self._restamp_outages.ok()
                log.info("re-stamped %d running executions from session %s to %s", moved, old_owner, new_owner)
                return

    async def stop(self, grace: float | None = None) -> None:
        grace = self.config.shutdown_grace if grace is None else grace
        log.info("stopping: draining workers and calls (grace %.0f s)", grace)
        await self._health.enter_graceful_shutdown()
        await self.connections.drain(self.clock.now() + timedelta(seconds=grace), "server shutting down")
        self.stores.alerts.close()  # every WatchAlerts stream ends with OK
        if self._grpc is not None:
            await self._grpc.stop(grace)
        if self.http is not None:
            await self.http.stop(min(grace, 5.0))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:  # before the session ends: the next server takes them at once
            given = await self.gateway.give_back()
        except Exception as error:
            log.warning("cannot give back armed executions (the reaper will): %s", error)
        else:
            if given:
                log.info("gave back %d armed or started executions not sent", given)
        await self.ownership.stop(release=True)
        if self._session_task is not None:
            self._session_task.cancel()
            await asyncio.gather(self._session_task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._lease_store is not None:
            await self._lease_store.close()
        # A cancelled task's transaction may still run in its thread: let it
        # end before the pool is closed under it.
        if not await settle(self.engine, STOP_SETTLE):
            log.warning("stopping with %d store transactions still running", attempts_running(self.engine))
        self.engine.dispose()
        self.metrics.close()
        self.tracing.close()
        self.stopped.set()
        log.info("stopped")

    async def wait(self) -> None:
        await self.stopped.wait()


def migrate_apart(engine: Engine) -> None:
    """Apply the migrations at start. On PostgreSQL and CockroachDB on an
    engine of their own, without the server's lock limits: their DDL waits
    for its locks as the migration tool's does (the server's sessions give
    way, not the migration). SQLite takes no limits (and an in-memory one is
    private to its engine): ``engine`` itself."""
    if engine.dialect.name == "sqlite":
        migrate(engine)
        return
    apart = create_store_engine(engine.url)
    try:
        migrate(apart)
    finally:
        apart.dispose()


def _rfc3339(instant: datetime | None) -> str:
    return "none (schedule ended)" if instant is None else instant.strftime("%Y-%m-%dT%H:%M:%SZ")
