"""Server configuration: flags over environment over a TOML file over defaults,
validated once, when it is built, with a message that names the setting.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names it."""


@dataclass(frozen=True)
class TlsConfig:
    cert_file: str
    key_file: str
    client_ca_file: str = ""
    """When set, clients must present a certificate signed by this CA (mutual TLS)."""


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
    """etcd session TTL in seconds; renewed at a third of it."""
    heartbeat_interval: float = 5.0
    heartbeat_timeout: float = 30.0
    shutdown_grace: float = 30.0
    migrate: bool = False
    """Apply schema migrations at start."""
    tls: TlsConfig | None = None
    allow_target_networks: tuple[str, ...] = ()
    """CIDRs HTTP targets may reach despite the private-range policy."""
    log_level: str = "INFO"

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
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ConfigError(f"listen: {self.listen!r} is not HOST:PORT")
        if not 1 <= self.partition_count <= 65536:
            raise ConfigError("partition_count: must be between 1 and 65536")
        if not 1 <= self.session_ttl <= 300:
            raise ConfigError("session_ttl: must be between 1 and 300 seconds")
        if not 0 < self.heartbeat_interval < self.heartbeat_timeout:
            raise ConfigError("heartbeat_interval: must be > 0 and less than heartbeat_timeout")
        if self.shutdown_grace < 0:
            raise ConfigError("shutdown_grace: must be >= 0")
        for network in self.allow_target_networks:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError as error:
                raise ConfigError(f"allow_target_networks: {network!r}: {error}") from None
        if self.tls is not None:
            for name in ("cert_file", "key_file", "client_ca_file"):
                path = getattr(self.tls, name)
                if path and not Path(path).is_file():
                    raise ConfigError(f"tls.{name}: {path!r} is not a readable file")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError("log_level: one of DEBUG, INFO, WARNING, ERROR")

    @property
    def effective_server_id(self) -> str:
        return self.server_id or f"{socket.gethostname()}-{os.getpid()}"

    @property
    def effective_advertise(self) -> str:
        return self.advertise or self.listen


_ENV = {
    "store": "TICKWHEEL_STORE",
    "etcd": "TICKWHEEL_ETCD",
    "listen": "TICKWHEEL_LISTEN",
    "advertise": "TICKWHEEL_ADVERTISE",
    "server_id": "TICKWHEEL_SERVER_ID",
    "admin_token": "TICKWHEEL_ADMIN_TOKEN",
    "partition_count": "TICKWHEEL_PARTITION_COUNT",
    "session_ttl": "TICKWHEEL_SESSION_TTL",
    "log_level": "TICKWHEEL_LOG_LEVEL",
}


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="store URL (sqlite:///…, postgresql+psycopg://…, cockroachdb+psycopg://…)")
    parser.add_argument("--etcd", help="etcd endpoints host:port[,host:port], or 'memory'")
    parser.add_argument("--listen", help="HOST:PORT to serve gRPC on (default 0.0.0.0:50051)")
    parser.add_argument("--advertise", help="address shown to other servers and in ClusterStatus")
    parser.add_argument("--server-id", help="stable id of this server (default hostname-pid)")
    parser.add_argument("--config", help="TOML file with the same settings (flags and environment win)")
    parser.add_argument("--admin-token-file", help="file holding the admin credential (or TICKWHEEL_ADMIN_TOKEN)")
    parser.add_argument("--partition-count", type=int, help="partitions of a new cluster (default 256)")
    parser.add_argument("--session-ttl", type=int, help="etcd session TTL in seconds (default 10)")
    parser.add_argument("--migrate", action="store_true", default=None, help="apply schema migrations at start")
    parser.add_argument("--tls-cert", help="server certificate (PEM); enables TLS")
    parser.add_argument("--tls-key", help="server private key (PEM)")
    parser.add_argument("--tls-client-ca", help="CA (PEM) that client certificates must chain to (mutual TLS)")
    parser.add_argument(
        "--allow-target-network", action="append", default=None, metavar="CIDR",
        help="let HTTP targets reach this network despite the private-range policy (repeatable)",
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")


def _read_file(path: str) -> dict:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config: {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config: {path!r} is not valid TOML: {error}") from None
    known = {f.name for f in fields(ServerConfig)} | {"tls", "admin_token_file"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"config: {path!r} has unknown settings {unknown}")
    return data


def _read_token(path: str, origin: str) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as error:
        raise ConfigError(f"{origin}: cannot read {path!r}: {error.strerror}") from None
    if not token:
        raise ConfigError(f"{origin}: {path!r} is empty")
    return token


def load_server_config(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ServerConfig:
    """Merge defaults < config file < environment < flags, then validate."""
    environ = dict(os.environ if environ is None else environ)
    settings: dict = {}
    if args.config:
        data = _read_file(args.config)
        tls = data.pop("tls", None)
        token_file = data.pop("admin_token_file", None)
        settings.update(data)
        if tls is not None:
            settings["tls"] = TlsConfig(**tls)
        if token_file:
            settings["admin_token"] = _read_token(token_file, "config admin_token_file")
        if "allow_target_networks" in settings:
            settings["allow_target_networks"] = tuple(settings["allow_target_networks"])
    for name, variable in _ENV.items():
        if environ.get(variable):
            settings[name] = environ[variable]
    for name in ("store", "etcd", "listen", "advertise", "server_id", "partition_count", "session_ttl", "log_level"):
        value = getattr(args, name, None)
        if value is not None:
            settings[name] = value
    if args.admin_token_file:
        settings["admin_token"] = _read_token(args.admin_token_file, "--admin-token-file")
    if args.migrate:
        settings["migrate"] = True
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise ConfigError("tls: --tls-cert and --tls-key go together")
        settings["tls"] = TlsConfig(args.tls_cert, args.tls_key, args.tls_client_ca or "")
    if args.allow_target_network:
        settings["allow_target_networks"] = tuple(args.allow_target_network)
    for name in ("partition_count", "session_ttl"):
        if name in settings:
            try:
                settings[name] = int(settings[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{name}: {settings[name]!r} is not a whole number") from None
    settings.setdefault("store", "")
    settings.setdefault("etcd", "")
    settings.setdefault("admin_token", "")
    try:
        return ServerConfig(**settings)
    except TypeError as error:
        raise ConfigError(f"config: {error}") from None


__all__ = ["ConfigError", "ServerConfig", "TlsConfig", "add_server_arguments", "load_server_config", "replace"]
