"""Server configuration: flags over environment over a TOML file over defaults,
validated once, when it is built, with a message that names the setting.
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from tickwheel.shared.heartbeats import MAX_HEARTBEAT_INTERVAL, MIN_HEARTBEAT_INTERVAL
from tickwheel.shared.logs import LOG_FORMATS
from tickwheel.shared.secretargs import MAX_SECRET_BYTES, flag_warning, url_has_password, url_may_carry_token
from tickwheel.shared.smallfiles import read_small
from tickwheel.shared.targets import TargetPolicy, parse_networks

from .policy.breaker import BreakerSettings
from .alerts.webhook import check_webhook_url
from .gateway.connections import (
    DEFAULT_MAX_SLOTS_PER_CREDENTIAL,
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_CREDENTIAL,
    StreamCaps,
)
from .lease.keys import server_id_problem
from tickwheel_worker.exporters import (
    METRICS_EXPORT_HELP,
    PROTOCOLS,
    TRACE_EXPORT_HELP,
    Otlp,
    check_metrics_export,
    check_trace_export,
)


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names it."""


def _no_password() -> bytes:
    raise ConfigError("tls.key_file (--tls-key): the key is encrypted; give an unencrypted PEM key")


@dataclass(frozen=True)
class TlsConfig:
    """The server's certificate and key (PEM), and optionally the CA that
    client certificates must chain to. Checked when built: the files are read
    and parsed, and the key must match the certificate."""

    cert_file: str
    key_file: str
    client_ca_file: str = ""
    """When set, clients must present a certificate signed by this CA (mutual TLS)."""

    def __post_init__(self) -> None:
        flags = {"cert_file": "--tls-cert", "key_file": "--tls-key", "client_ca_file": "--tls-client-ca"}
        for name, flag in flags.items():
            path = getattr(self, name)
            if name != "client_ca_file" and not path:
                raise ConfigError(f"tls.{name} ({flag}): required with TLS")
            if path and not Path(path).is_file():
                raise ConfigError(f"tls.{name} ({flag}): {path!r} is not a readable file")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert_file, self.key_file, password=_no_password)
        except (ssl.SSLError, OSError) as error:
            raise ConfigError(
                f"tls.cert_file/tls.key_file (--tls-cert/--tls-key): {self.cert_file!r} and {self.key_file!r} "
                f"are not a PEM certificate and its private key: {error}"
            ) from None
        if self.client_ca_file:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (ssl.SSLError, OSError) as error:
                raise ConfigError(
                    f"tls.client_ca_file (--tls-client-ca): {self.client_ca_file!r} holds no PEM CA certificate: "
                    f"{error}"
                ) from None

    @property
    def mutual(self) -> bool:
        """Clients must present a certificate (mutual TLS)."""
        return bool(self.client_ca_file)


_BREAKER_SETTINGS = {
    "window": "breaker_window (--breaker-window)",
    "min_calls": "breaker_min_calls (--breaker-min-calls)",
    "failure_ratio": "breaker_failure_ratio (--breaker-failure-ratio)",
    "open_for": "breaker_open (--breaker-open)",
}
"""The breaker's settings as the configuration names them."""


@dataclass(frozen=True)
class ServerConfig:
    store: str
    """SQLAlchemy URL: sqlite:///…, postgresql+psycopg://…, cockroachdb+psycopg://…"""
    etcd: str
    """etcd endpoints (host:port[,host:port]) or "memory" for the in-process lease store."""
    admin_token: str = field(repr=False)
    """The bootstrap admin credential."""
    listen: str = "0.0.0.0:50051"
    advertise: str = ""
    """Address other servers and ClusterStatus show; default: the listen address."""
    server_id: str = ""
    """Stable id of this server; default hostname-pid."""
    partition_count: int = 256
    """Partitions of a new cluster; an existing cluster keeps its own."""
    session_ttl: int = 10
    """etcd session TTL in seconds; renewed every tenth of it."""
    heartbeat_interval: float = 5.0
    heartbeat_timeout: float = 30.0
    shutdown_grace: float = 30.0
    migrate: bool = False
    """Apply schema migrations at start."""
    tls: TlsConfig | None = None
    """TLS on the gRPC port (mutual when it has a client CA); None serves plaintext."""
    http_listen: str = ""
    """HOST:PORT of the HTTP endpoint (the web console, ``/metrics``); empty
    serves no HTTP. TLS like the gRPC port when ``tls`` is set."""
    allow_target_networks: tuple[str, ...] = ()
    """CIDRs that HTTP targets may reach although the address policy refuses
    their range (loopback, private, link-local, ...); see ``targets``."""
    retention_days: float = 30.0
    """Ended executions, their attempts, skip ranges and resolved alerts are
    pruned after this many days (attempts rolled up per job per day first)."""
    rollup_retention_days: float = 400.0
    """The daily rollups are pruned after this many days."""
    etcd_compaction_retention: float = 3600.0
    """Seconds of etcd's key-value history kept: the elected compactor
    compacts etcd to the revision it saw this long ago (1 s to 7 days;
    :mod:`tickwheel_server.maintenance.compaction`)."""
    alert_webhook: str = ""
    """http(s) URL every alert raised and resolved is POSTed to as JSON (see
    ``webhook``); empty sends none."""
    log_level: str = "INFO"
    metrics_top_tenants: int = 20
    """Tenants labelled by name on ``/metrics`` (the busiest by volume); the rest are ``other``."""
    trace_export: str = "none"
    """Where spans go: ``none``, ``console``, ``jsonl:PATH`` or ``otlp`` (see ``tickwheel_worker.exporters``)."""
    metrics_export: str = "none"
    """``otlp`` pushes the metrics of ``/metrics`` to an OTLP collector as well; ``none`` does not."""
    otlp_endpoint: str = ""
    """The OTLP collector's base URL; empty leaves it to ``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]ENDPOINT``."""
    otlp_protocol: str = ""
    """``grpc`` or ``http/protobuf``; empty leaves it to ``OTEL_EXPORTER_OTLP_[...]PROTOCOL`` (default http/protobuf)."""
    log_format: str = "text"
    """``text`` or ``json`` (one object per line; see ``telemetry.logs``)."""
    breaker_window: float = 60.0
    """Seconds of HTTP-target calls a (tenant, host) circuit breaker looks at (see ``breaker``)."""
    breaker_min_calls: int = 20
    """Calls that window must hold before the circuit can open."""
    breaker_failure_ratio: float = 0.5
    """Share of those calls failed (0 < r <= 1) that opens the circuit."""
    breaker_open: float = 30.0
    """Seconds retries to the host pause once the circuit opens, before probes decide."""
    reaper_grace: float = 0.0
    """Seconds the reaper waits, once a server's session is gone, for its
    workers to re-attach elsewhere before it requeues what that server ran;
    0: the session TTL. Rows the worker they were dealt to said it does not
    hold are given back without it (docs/architecture.md, "Workers and
    failures"). At most 3600."""
    arm_ahead: float = 10.0
    """Seconds before their instant that executions needing no decision then
    are armed for this server's workers (docs/architecture.md, "Hand-outs
    decided ahead"); 0 arms nothing. At most 30."""
    claim_lanes: int = 2
    """Claims the dispatcher has in flight at once, each on its own share of
    the owned partitions (docs/architecture.md, Dispatch, "Claims side by
    side"); 1 to 8. SQLite claims one at a time whatever this says."""
    store_lock_timeout: float = 1.0
    """Seconds a statement of this server's store sessions waits for a lock
    (``lock_timeout``; PostgreSQL and CockroachDB) before it fails and is
    retried: once while a table is held (then the call or pass is refused as
    the store unavailable: docs/operations.md, "A table locked"), up to six
    attempts in all when only another transaction's row was (the server's
    own contention, on PostgreSQL); 0 leaves it to the database
    (its role's or database's setting). At most 600."""
    store_idle_in_transaction_timeout: float = 60.0
    """Seconds a store session of this server may sit idle inside a
    transaction before the database ends it and releases its locks
    (``idle_in_transaction_session_timeout``): a server stalled halfway
    through a transaction holds no lock longer. At most 86400. Never more
    than ``session_ttl`` in force (:attr:`store_idle_limit`; 0 here:
    ``session_ttl``)."""
    claim_batch: int = 1000
    """Jobs one claim takes at most (docs/architecture.md, "Claims side by
    side", "A claim's batch"); 100 to 5000. A claim's round trips and fixed work are
    spread over its batch; a larger one holds its rows' locks longer, and
    hands out straight from the claim only while the workers' credit covers
    every lane's batch."""
    max_worker_streams: int = DEFAULT_MAX_STREAMS
    """Worker streams this server holds; a hello past it is refused with
    RESOURCE_EXHAUSTED (docs/operations.md, "What a worker credential may
    hold"). 1 to 100 000."""
    max_streams_per_credential: int = DEFAULT_MAX_STREAMS_PER_CREDENTIAL
    """Streams one worker credential holds on this server. 1 to 100 000."""
    max_slots_per_credential: int = DEFAULT_MAX_SLOTS_PER_CREDENTIAL
    """The slots one credential's streams state, summed, on this server (its
    credit there never exceeds them). 1 to 10 000 000."""

    @property
    def store_idle_limit(self) -> float:
        """Seconds the server's store sessions may sit idle inside a
        transaction: ``store_idle_in_transaction_timeout``, or ``session_ttl``
        where that is lower (or the setting 0). Every transaction holding row
        locks that another server waits for (a claim's partitions, the runs a
        result batch, hand-out or requeue locked) is then released by the
        database about when the cluster counts a frozen server dead (its etcd
        session expired), not later; and no transaction of a live server
        waits between its statements anywhere near that long
        (docs/architecture.md, "Data", the idle limit)."""
        return min(self.session_ttl, self.store_idle_in_transaction_timeout or self.session_ttl)

    @property
    def stream_caps(self) -> StreamCaps:
        """The caps on worker streams (``gateway.connections``)."""
        return StreamCaps(self.max_worker_streams, self.max_streams_per_credential, self.max_slots_per_credential)

    def __post_init__(self) -> None:
        if not self.store:
            raise ConfigError("store: required (--store URL or TICKWHEEL_STORE)")
        if not self.etcd:
            raise ConfigError("etcd: required (--etcd ENDPOINTS or TICKWHEEL_ETCD)")
        if not self.admin_token:
            raise ConfigError(
                "admin token: required; set TICKWHEEL_ADMIN_TOKEN or --admin-token-file FILE "
                "(a server without one refuses to start)"
            )
        if len(self.admin_token) < 16:
            raise ConfigError("admin token: at least 16 characters")
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:
            raise ConfigError(f"listen: {self.listen!r} is not HOST:PORT")
        if self.http_listen:
            host, sep, port = self.http_listen.rpartition(":")
            if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:
                raise ConfigError(f"http_listen (--http-listen): {self.http_listen!r} is not HOST:PORT")
            if int(port) != 0 and self.http_listen == self.listen:
                raise ConfigError("http_listen (--http-listen): must differ from listen, the gRPC port")
        if not 1 <= self.partition_count <= 65536:
            raise ConfigError("partition_count: must be between 1 and 65536")
        if not 1 <= self.session_ttl <= 300:
            raise ConfigError("session_ttl: must be between 1 and 300 seconds")
        if not MIN_HEARTBEAT_INTERVAL <= self.heartbeat_interval <= MAX_HEARTBEAT_INTERVAL:
            # Workers clamp an announced interval into the same bounds (tickwheel.shared.heartbeats).
            raise ConfigError(f"heartbeat_interval: must be between {MIN_HEARTBEAT_INTERVAL:g} and "
                              f"{MAX_HEARTBEAT_INTERVAL:g} seconds")
        if not self.heartbeat_interval < self.heartbeat_timeout:
            raise ConfigError("heartbeat_interval: must be less than heartbeat_timeout")
        if self.shutdown_grace < 0:
            raise ConfigError("shutdown_grace: must be >= 0")
        if self.server_id and (problem := server_id_problem(self.server_id)) is not None:
            raise ConfigError(f"server_id (--server-id): {problem}")
        if not 1 <= self.claim_lanes <= 8:
            raise ConfigError("claim_lanes (--claim-lanes): must be between 1 and 8")
        if not 100 <= self.claim_batch <= 5000:
            raise ConfigError("claim_batch (--claim-batch): must be between 100 and 5000")
        for name, flag, most in (("max_worker_streams", "--max-worker-streams", 100_000),
                                 ("max_streams_per_credential", "--max-streams-per-credential", 100_000),
                                 ("max_slots_per_credential", "--max-slots-per-credential", 10_000_000)):
            if not 1 <= getattr(self, name) <= most:
                raise ConfigError(f"{name} ({flag}): must be between 1 and {most}")
        if not 0 <= self.reaper_grace <= 3600:
            raise ConfigError("reaper_grace (--reaper-grace): must be between 0 (the session TTL) and 3600 seconds")
        if not 0 <= self.store_lock_timeout <= 600:
            raise ConfigError("store_lock_timeout (--store-lock-timeout): must be between 0 (the database's) "
                              "and 600 seconds")
        if not 0 <= self.store_idle_in_transaction_timeout <= 86400:
            raise ConfigError("store_idle_in_transaction_timeout (--store-idle-in-transaction-timeout): must be "
                              "between 0 (the session TTL) and 86400 seconds")
        if not 0 <= self.arm_ahead <= 30:
            raise ConfigError("arm_ahead (--arm-ahead): must be between 0 and 30 seconds")
        if not self.retention_days * 24 >= 1:
            raise ConfigError("retention_days (--retention-days): at least one hour (1/24)")
        if not self.rollup_retention_days >= self.retention_days:
            raise ConfigError("rollup_retention_days (--rollup-retention-days): not shorter than retention_days")
        if not 1 <= self.etcd_compaction_retention <= 7 * 86400:
            raise ConfigError(
                "etcd_compaction_retention (--etcd-compaction-retention): between 1 and 604800 seconds (7 days)"
            )
        if self.alert_webhook:
            try:
                check_webhook_url(self.alert_webhook)
            except ValueError as error:
                raise ConfigError(f"alert_webhook (--alert-webhook): {error}") from None
        if isinstance(self.allow_target_networks, str) or not all(
            isinstance(network, str) for network in self.allow_target_networks
        ):
            raise ConfigError("allow_target_networks: a list of CIDR strings, e.g. [\"10.0.0.0/8\"]")
        try:
            parse_networks(self.allow_target_networks)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError("log_level: one of DEBUG, INFO, WARNING, ERROR")
        if not 0 <= self.metrics_top_tenants <= 1000:
            raise ConfigError("metrics_top_tenants (--metrics-top-tenants): between 0 and 1000")
        try:
            check_trace_export(self.trace_export)
        except ValueError as error:
            raise ConfigError(f"trace_export (--trace-export): {error}") from None
        try:
            check_metrics_export(self.metrics_export)
        except ValueError as error:
            raise ConfigError(f"metrics_export (--metrics-export): {error}") from None
        try:
            self.otlp
        except ValueError as error:
            raise ConfigError(f"otlp (--otlp-endpoint, --otlp-protocol): {error}") from None
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"log_format (--log-format): one of {', '.join(LOG_FORMATS)}")
        try:
            self.breaker_settings
        except ValueError as error:
            name, _, problem = str(error).partition(": ")
            raise ConfigError(f"{_BREAKER_SETTINGS.get(name, name)}: {problem}") from None

    @property
    def otlp(self) -> Otlp:
        """The OTLP settings of the command line (the rest come from ``OTEL_EXPORTER_OTLP_*``)."""
        return Otlp(self.otlp_endpoint, self.otlp_protocol)

    @property
    def effective_server_id(self) -> str:
        return self.server_id or f"{socket.gethostname()}-{os.getpid()}"

    @property
    def effective_advertise(self) -> str:
        return self.advertise or self.listen

    @property
    def breaker_settings(self) -> BreakerSettings:
        """The circuit breaker's settings (``ValueError`` naming the bad one)."""
        return BreakerSettings(
            window=self.breaker_window, min_calls=self.breaker_min_calls,
            failure_ratio=self.breaker_failure_ratio, open_for=self.breaker_open,
        )  # fmt: skip

    @property
    def target_policy(self) -> TargetPolicy:
        """The address policy HTTP target URLs are checked against when a job is written."""
        return TargetPolicy.allowing(self.allow_target_networks)


_ENV = {
    "store": "TICKWHEEL_STORE",
    "etcd": "TICKWHEEL_ETCD",
    "listen": "TICKWHEEL_LISTEN",
    "http_listen": "TICKWHEEL_HTTP_LISTEN",
    "advertise": "TICKWHEEL_ADVERTISE",
    "server_id": "TICKWHEEL_SERVER_ID",
    "admin_token": "TICKWHEEL_ADMIN_TOKEN",
    "partition_count": "TICKWHEEL_PARTITION_COUNT",
    "session_ttl": "TICKWHEEL_SESSION_TTL",
    "log_level": "TICKWHEEL_LOG_LEVEL",
    "retention_days": "TICKWHEEL_RETENTION_DAYS",
    "rollup_retention_days": "TICKWHEEL_ROLLUP_RETENTION_DAYS",
    "etcd_compaction_retention": "TICKWHEEL_ETCD_COMPACTION_RETENTION",
    "alert_webhook": "TICKWHEEL_ALERT_WEBHOOK",
    "tls_cert": "TICKWHEEL_TLS_CERT",
    "tls_key": "TICKWHEEL_TLS_KEY",
    "tls_client_ca": "TICKWHEEL_TLS_CLIENT_CA",
    "metrics_top_tenants": "TICKWHEEL_METRICS_TOP_TENANTS",
    "trace_export": "TICKWHEEL_TRACE_EXPORT",
    "metrics_export": "TICKWHEEL_METRICS_EXPORT",
    "log_format": "TICKWHEEL_LOG_FORMAT",
    "breaker_window": "TICKWHEEL_BREAKER_WINDOW",
    "breaker_min_calls": "TICKWHEEL_BREAKER_MIN_CALLS",
    "breaker_failure_ratio": "TICKWHEEL_BREAKER_FAILURE_RATIO",
    "breaker_open": "TICKWHEEL_BREAKER_OPEN",
    "arm_ahead": "TICKWHEEL_ARM_AHEAD",
    "reaper_grace": "TICKWHEEL_REAPER_GRACE",
    "claim_lanes": "TICKWHEEL_CLAIM_LANES",
    "claim_batch": "TICKWHEEL_CLAIM_BATCH",
    "max_worker_streams": "TICKWHEEL_MAX_WORKER_STREAMS",
    "max_streams_per_credential": "TICKWHEEL_MAX_STREAMS_PER_CREDENTIAL",
    "max_slots_per_credential": "TICKWHEEL_MAX_SLOTS_PER_CREDENTIAL",
    "store_lock_timeout": "TICKWHEEL_STORE_LOCK_TIMEOUT",
    "store_idle_in_transaction_timeout": "TICKWHEEL_STORE_IDLE_IN_TRANSACTION_TIMEOUT",
}
"""Setting -> environment variable."""

_ENV_NETWORKS = "TICKWHEEL_ALLOW_TARGET_NETWORKS"
"""``allow_target_networks`` from the environment: CIDRs separated by commas or spaces."""

_TLS_KEYS = {"cert_file": "tls_cert", "key_file": "tls_key", "client_ca_file": "tls_client_ca"}
"""``[tls]`` keys of the config file -> the settings they fill."""


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        help="store URL (sqlite:///…, postgresql+psycopg://…, cockroachdb+psycopg://…); one with a password "
             "belongs in TICKWHEEL_STORE or the config file, not here",
    )  # fmt: skip
    parser.add_argument("--etcd", help="etcd endpoints host:port[,host:port], or 'memory'")
    parser.add_argument("--listen", help="HOST:PORT to serve gRPC on (default 0.0.0.0:50051)")
    parser.add_argument("--advertise", help="address shown to other servers and in ClusterStatus")
    parser.add_argument(
        "--http-listen", metavar="HOST:PORT",
        help="serve the web console (and /metrics) over HTTP here; off unless set (or TICKWHEEL_HTTP_LISTEN)",
    )
    parser.add_argument("--server-id", help="stable id of this server (default hostname-pid)")
    parser.add_argument("--config", help="TOML file with the same settings (flags and environment win)")
    parser.add_argument("--admin-token-file", help="file holding the admin credential (or TICKWHEEL_ADMIN_TOKEN)")
    parser.add_argument("--partition-count", type=int, help="partitions of a new cluster (default 256)")
    parser.add_argument("--session-ttl", type=int, help="etcd session TTL in seconds (default 10)")
    parser.add_argument("--migrate", action="store_true", default=None, help="apply schema migrations at start")
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="server certificate chain (PEM); enables TLS (or TICKWHEEL_TLS_CERT)"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="server private key (PEM, unencrypted; or TICKWHEEL_TLS_KEY)")
    parser.add_argument(
        "--tls-client-ca", metavar="FILE",
        help="CA (PEM) that client certificates must chain to: requires mutual TLS (or TICKWHEEL_TLS_CLIENT_CA)",
    )
    parser.add_argument(
        "--allow-target-network", action="append", default=None, metavar="CIDR",
        help="let HTTP targets be written for this network although the address policy refuses its range "
             "(loopback, private, link-local, ...); repeatable (or TICKWHEEL_ALLOW_TARGET_NETWORKS)",
    )  # fmt: skip
    parser.add_argument("--retention-days", type=float, help="days history is kept (default 30)")
    parser.add_argument("--rollup-retention-days", type=float, help="days daily rollups are kept (default 400)")
    parser.add_argument(
        "--etcd-compaction-retention", type=float, metavar="SECONDS",
        help="seconds of etcd's history kept; the servers compact what is older (default 3600, 1..604800)",
    )  # fmt: skip
    parser.add_argument(
        "--alert-webhook", metavar="URL",
        help="POST every alert raised and resolved to this http(s) URL as JSON, with retries "
             "(or TICKWHEEL_ALERT_WEBHOOK); off unless set",
    )  # fmt: skip
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument(
        "--metrics-top-tenants", type=int, metavar="N",
        help="tenants labelled by name on /metrics, the busiest first; the rest are 'other' (default 20)",
    )
    parser.add_argument("--trace-export", metavar="WHERE", help=f"where spans go: {TRACE_EXPORT_HELP}")
    parser.add_argument(
        "--metrics-export", metavar="WHERE", help=f"where metrics are pushed besides /metrics: {METRICS_EXPORT_HELP}"
    )
    parser.add_argument(
        "--otlp-endpoint", metavar="URL",
        help="OTLP collector base URL, e.g. http://127.0.0.1:4318 (or OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    parser.add_argument(
        "--otlp-protocol", choices=PROTOCOLS,
        help="OTLP over grpc or http/protobuf (or OTEL_EXPORTER_OTLP_PROTOCOL; default http/protobuf)",
    )
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS,
        help="text (default) or json: one JSON object per line, execution, job and tenant ids as fields",
    )
    parser.add_argument(
        "--breaker-window", type=float, metavar="SECONDS",
        help="circuit breaker per (tenant, target host): seconds of calls it looks at (default 60)",
    )
    parser.add_argument(
        "--breaker-min-calls", type=int, metavar="N",
        help="circuit breaker: calls the window must hold before it can open (default 20)",
    )
    parser.add_argument(
        "--breaker-failure-ratio", type=float, metavar="RATIO",
        help="circuit breaker: share of failed calls in the window that opens it, 0 < RATIO <= 1 (default 0.5)",
    )
    parser.add_argument(
        "--claim-lanes", type=int, metavar="N",
        help="claims in flight at once, each on its own share of the owned partitions (1 to 8, default 2; "
             "or TICKWHEEL_CLAIM_LANES)",
    )
    parser.add_argument(
        "--claim-batch", type=int, metavar="N",
        help="jobs one claim takes at most (100 to 5000, default 1000; or TICKWHEEL_CLAIM_BATCH)",
    )
    parser.add_argument(
        "--max-worker-streams", type=int, metavar="N",
        help=f"worker streams this server holds (default {DEFAULT_MAX_STREAMS}; or TICKWHEEL_MAX_WORKER_STREAMS)",
    )
    parser.add_argument(
        "--max-streams-per-credential", type=int, metavar="N",
        help=f"worker streams one credential holds on this server (default {DEFAULT_MAX_STREAMS_PER_CREDENTIAL}; "
             "or TICKWHEEL_MAX_STREAMS_PER_CREDENTIAL)",
    )
    parser.add_argument(
        "--max-slots-per-credential", type=int, metavar="N",
        help=f"slots one credential's streams state on this server, summed (default "
             f"{DEFAULT_MAX_SLOTS_PER_CREDENTIAL}; or TICKWHEEL_MAX_SLOTS_PER_CREDENTIAL)",
    )
    parser.add_argument(
        "--store-lock-timeout", type=float, metavar="SECONDS",
        help="how long a store statement waits for a lock before the store counts as unavailable "
             "(default 1, 0 the database's; or TICKWHEEL_STORE_LOCK_TIMEOUT)",
    )
    parser.add_argument(
        "--store-idle-in-transaction-timeout", type=float, metavar="SECONDS",
        help="how long a store session may sit idle in a transaction before the database ends it "
             "(default 60; never more than --session-ttl in force, 0 that; "
             "or TICKWHEEL_STORE_IDLE_IN_TRANSACTION_TIMEOUT)",
    )
    parser.add_argument(
        "--arm-ahead", type=float, metavar="SECONDS",
        help="arm executions that need no decision at their instant this many seconds ahead "
             "(default 10, 0 off; or TICKWHEEL_ARM_AHEAD)",
    )
    parser.add_argument(
        "--reaper-grace", type=float, metavar="SECONDS",
        help="seconds the reaper lets a dead server's workers re-attach elsewhere before requeueing "
             "(default 0: the session TTL; or TICKWHEEL_REAPER_GRACE)",
    )
    parser.add_argument(
        "--breaker-open", type=float, metavar="SECONDS",
        help="circuit breaker: seconds retries to the host pause before probes decide (default 30)",
    )


def _read_file(path: str) -> dict:
    try:
        data = tomllib.loads(read_small(path).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config: {path!r} does not exist") from None
    except OSError as error:
        raise ConfigError(f"config: cannot read {path!r}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config: {path!r} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config: {path!r} is not valid TOML: {error}") from None
    known = {f.name for f in fields(ServerConfig)} | {"tls", "admin_token_file"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"config: {path!r} has unknown settings {unknown}")
    tls = data.get("tls")
    if tls is not None:
        if not isinstance(tls, dict):
            raise ConfigError(f"config: {path!r}: tls must be a table ([tls] with {sorted(_TLS_KEYS)})")
        unknown = sorted(set(tls) - set(_TLS_KEYS))
        if unknown:
            raise ConfigError(f"config: {path!r} has unknown settings in [tls]: {unknown}")
        for key, value in tls.items():
            if not isinstance(value, str):
                raise ConfigError(f"config: {path!r}: tls.{key} must be a file name")
    return data


def command_line_secrets(args: argparse.Namespace) -> list[str]:
    """Warnings for the secrets ``args`` carry on the command line, where
    every local user sees them (the admin token has no flag at all)."""
    warnings = []
    if getattr(args, "store", None) and url_has_password(args.store):
        warnings.append(flag_warning(
            "--store with a password", "TICKWHEEL_STORE", "store in the --config file",
            "a passfile of the database driver (PGPASSFILE)",
        ))  # fmt: skip
    if getattr(args, "alert_webhook", None) and url_may_carry_token(args.alert_webhook):
        warnings.append(flag_warning(
            "--alert-webhook (its path or query may be a token)", "TICKWHEEL_ALERT_WEBHOOK",
            "alert_webhook in the --config file",
        ))  # fmt: skip
    return warnings


def _read_token(path: str, origin: str) -> str:
    try:
        token = read_small(path, MAX_SECRET_BYTES).decode("utf-8").strip()
    except OSError as error:
        raise ConfigError(f"{origin}: cannot read {path!r}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{origin}: {path!r} is not UTF-8 text") from None
    if not token:
        raise ConfigError(f"{origin}: {path!r} is empty")
    return token


def load_server_config(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ServerConfig:
    """Merge defaults < config file < environment < flags, then validate."""
    environ = dict(os.environ if environ is None else environ)
    settings: dict = {}
    if args.config:
        data = _read_file(args.config)
        tls = data.pop("tls", None) or {}
        token_file = data.pop("admin_token_file", None)
        settings.update(data)
        settings.update({_TLS_KEYS[key]: value for key, value in tls.items()})
        if token_file:
            settings["admin_token"] = _read_token(token_file, "config admin_token_file")
        if isinstance(settings.get("allow_target_networks"), list):
            settings["allow_target_networks"] = tuple(settings["allow_target_networks"])
    for name, variable in _ENV.items():
        if environ.get(variable):
            settings[name] = environ[variable]
    networks = environ.get(_ENV_NETWORKS, "").replace(",", " ").split()
    if networks:
        settings["allow_target_networks"] = tuple(networks)
    for name in ("store", "etcd", "listen", "http_listen", "advertise", "server_id", "partition_count", "session_ttl",
                 "log_level", "retention_days", "rollup_retention_days", "alert_webhook"):  # fmt: skip
        value = getattr(args, name, None)
        if value is not None:
            settings[name] = value
    for name in ("metrics_top_tenants", "trace_export", "metrics_export", "otlp_endpoint", "otlp_protocol",
                 "log_format", "breaker_window", "breaker_min_calls", "breaker_failure_ratio", "breaker_open",
                 "arm_ahead", "reaper_grace", "claim_lanes", "claim_batch", "etcd_compaction_retention",
                 "max_worker_streams", "max_streams_per_credential", "max_slots_per_credential",
                 "store_lock_timeout", "store_idle_in_transaction_timeout"):  # fmt: skip
        value = getattr(args, name, None)
        if value is not None:
            settings[name] = value
    if args.admin_token_file:
        settings["admin_token"] = _read_token(args.admin_token_file, "--admin-token-file")
    if args.migrate:
        settings["migrate"] = True
    for name in ("tls_cert", "tls_key", "tls_client_ca"):
        value = getattr(args, name, None)
        if value:
            settings[name] = value
    tls_files = {name: settings.pop(name, "") for name in ("tls_cert", "tls_key", "tls_client_ca")}
    if any(tls_files.values()):
        if not (tls_files["tls_cert"] and tls_files["tls_key"]):
            raise ConfigError(
                "tls: the certificate and key go together (--tls-cert and --tls-key, TICKWHEEL_TLS_CERT and "
                "TICKWHEEL_TLS_KEY, or cert_file and key_file in [tls]); a client CA needs both"
            )
        settings["tls"] = TlsConfig(tls_files["tls_cert"], tls_files["tls_key"], tls_files["tls_client_ca"])
    if args.allow_target_network:
        settings["allow_target_networks"] = tuple(args.allow_target_network)
    for name in ("partition_count", "session_ttl", "metrics_top_tenants", "breaker_min_calls", "claim_lanes",
                 "claim_batch", "max_worker_streams", "max_streams_per_credential", "max_slots_per_credential"):
        if name in settings:
            try:
                settings[name] = int(settings[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{name}: {settings[name]!r} is not a whole number") from None
    for name in ("retention_days", "rollup_retention_days"):
        if name in settings:
            try:
                settings[name] = float(settings[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{name}: {settings[name]!r} is not a number of days") from None
    for name in ("breaker_window", "breaker_failure_ratio", "breaker_open", "arm_ahead", "reaper_grace",
                 "etcd_compaction_retention", "store_lock_timeout", "store_idle_in_transaction_timeout"):
        if name in settings:
            try:
                settings[name] = float(settings[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{name}: {settings[name]!r} is not a number") from None
    settings.setdefault("store", "")
    settings.setdefault("etcd", "")
    settings.setdefault("admin_token", "")
    try:
        return ServerConfig(**settings)
    except TypeError as error:
        raise ConfigError(f"config: {error}") from None


__all__ = [
    "ConfigError", "ServerConfig", "TlsConfig", "add_server_arguments", "command_line_secrets", "load_server_config",
    "replace",
]  # fmt: skip
