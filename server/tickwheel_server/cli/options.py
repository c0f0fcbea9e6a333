"""Global options of the client commands, and where their values come from.

Every global option is defined once, on a parent parser attached both to the
top parser and to every client subparser, all with ``default=SUPPRESS``: a
value given before the subcommand lands in the namespace from the top
parser, one given after it from the subparser (which wins when both are
given), and an option given nowhere is simply absent. :func:`resolve` then
fills the gaps, in this order of precedence: explicit flag, for a secret
its ``--…-file FILE`` flag, environment variable, ``--dev DIR`` credentials
file, built-in default. A secret given as a flag itself (``--api-key``,
``--admin-token``) still works, with a warning: every local user sees it in
``ps``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickwheel_server.cli.parse import UsageError

__all__ = [
    "DEFAULT_ADDRESS",
    "DEV_CREDENTIALS_FILE",
    "Connection",
    "VALUE_OPTIONS",
    "global_options",
    "resolve",
]

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT = 10.0
DEV_CREDENTIALS_FILE = "dev-credentials.json"

# option -> (environment variable, key in dev-credentials.json)
_SOURCES: dict[str, tuple[str | None, str | None]] = {
    "address": ("TICKWHEEL_ADDRESS", "address"),
    "api_key": ("TICKWHEEL_API_KEY", "api_key"),
    "admin_token": ("TICKWHEEL_ADMIN_TOKEN", "admin_token"),
}

_SECRET_FILES = {"api_key": "--api-key-file", "admin_token": "--admin-token-file"}
"""Secret options -> the option naming a file that holds the secret."""

VALUE_OPTIONS = frozenset(
    {"--address", "--api-key", "--api-key-file", "--admin-token", "--admin-token-file", "--dev", "--timeout",
     "--ca-cert", "--client-cert", "--client-key", "--tls-server-name"}
)  # fmt: skip

from tickwheel.shared.secretargs import flag_warning, read_secret_file
from tickwheel.shared.smallfiles import read_small
"""Global options that take a value (the top-level scan for delegated
commands must skip their values)."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Leaves the global options out of usage lines (they would repeat on
    every command); ``--help`` still lists them under "global options"."""

    def add_usage(self, usage, actions, groups, prefix=None):  # type: ignore[no-untyped-def]
        own = [action for action in actions if not getattr(action, "_tickwheel_global", False)]
        super().add_usage(usage, own, groups, prefix)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected positive seconds, got {text!r}")
    return value


def global_options() -> argparse.ArgumentParser:
    """The parent parser holding the global options (all ``SUPPRESS``)."""
    parent = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    group = parent.add_argument_group("global options")
    add = group.add_argument
    add("--address", metavar="HOST:PORT", default=argparse.SUPPRESS,
        help=f"server address (env TICKWHEEL_ADDRESS; default {DEFAULT_ADDRESS})")
    add("--api-key-file", metavar="FILE", default=argparse.SUPPRESS,
        help="file holding the tenant API key (or env TICKWHEEL_API_KEY)")
    add("--api-key", metavar="KEY", default=argparse.SUPPRESS,
        help="the tenant API key itself: visible to local users in ps; prefer --api-key-file")
    add("--admin-token-file", metavar="FILE", default=argparse.SUPPRESS,
        help="file holding the admin credential for `admin` commands (or env TICKWHEEL_ADMIN_TOKEN)")
    add("--admin-token", metavar="TOKEN", default=argparse.SUPPRESS,
        help="the admin credential itself: visible to local users in ps; prefer --admin-token-file")
    add("--dev", metavar="DIR", default=argparse.SUPPRESS,
        help=f"read address and credentials from DIR/{DEV_CREDENTIALS_FILE} "
             "(written by `tickwheel dev`); flags and environment win")
    add("--json", action="store_true", default=argparse.SUPPRESS,
        help="print the response as one JSON document (proto JSON mapping)")
    add("--timeout", metavar="SECONDS", type=_positive_seconds, default=argparse.SUPPRESS,
        help=f"deadline of each command's calls, retries included (default {DEFAULT_TIMEOUT:g})")
    add("--tls", action="store_true", default=argparse.SUPPRESS,
        help="connect with TLS using the system roots (implied by --ca-cert)")
    add("--ca-cert", metavar="FILE", default=argparse.SUPPRESS, help="PEM CA bundle for TLS")
    add("--client-cert", metavar="FILE", default=argparse.SUPPRESS, help="PEM client certificate (mutual TLS)")
    add("--client-key", metavar="FILE", default=argparse.SUPPRESS, help="PEM client key (mutual TLS)")
    add("--tls-server-name", metavar="NAME", default=argparse.SUPPRESS,
        help="host name to check in the server's certificate")
    for action in group._group_actions:
        action._tickwheel_global = True  # type: ignore[attr-defined]
    return parent  # fmt: skip


@dataclass(frozen=True)
class Connection:
    """Where and how the client commands connect, after precedence."""

    address: str
    api_key: str | None
    admin_token: str | None
    timeout: float
    json: bool
    tls: bool
    ca_cert: str | None
    client_cert: str | None
    client_key: str | None
    tls_server_name: str | None
    dev_dir: str | None
    warnings: tuple[str, ...] = ()
    """Said on stderr before the command runs (a secret given as a flag)."""

    def tls_options(self) -> Any:
        """``tickwheel.TlsOptions`` or None for plaintext; UsageError when a
        file cannot be read or only half of the client pair is given."""
        if not (self.tls or self.ca_cert or self.client_cert or self.client_key):
            return None
        from tickwheel import TlsOptions

        if bool(self.client_cert) != bool(self.client_key):
            raise UsageError("--client-cert and --client-key go together")
        try:
            return TlsOptions.from_files(
                self.ca_cert, self.client_cert, self.client_key, server_name=self.tls_server_name
            )
        except OSError as error:
            raise UsageError(f"cannot read TLS file {error.filename}: {error.strerror}") from None


def read_dev_credentials(directory: str) -> dict[str, Any]:
    """The JSON object in ``DIR/dev-credentials.json``; UsageError when it is
    missing or not a JSON object."""
    path = Path(directory) / DEV_CREDENTIALS_FILE
    try:
        data = json.loads(read_small(path).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--dev {directory}: no {path} (is `tickwheel dev --data {directory}` running?)") from None
    except OSError as error:
        raise UsageError(f"--dev {directory}: cannot read {path}: {error.strerror}") from None
    except ValueError as error:
        raise UsageError(f"--dev {directory}: {path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--dev {directory}: {path} is not a JSON object")
    return data


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Connection:
    """The effective connection settings: flag, then environment, then the
    ``--dev`` file, then the default."""
    environ = os.environ if environ is None else environ
    given = vars(args)
    dev_dir = given.get("dev")
    dev = read_dev_credentials(dev_dir) if dev_dir else {}

    warnings: list[str] = []

    def pick(option: str) -> str | None:
        if given.get(option):
            if option in _SECRET_FILES:
                flag = "--" + option.replace("_", "-")
                warnings.append(flag_warning(flag, f"{flag}-file FILE", _SOURCES[option][0] or ""))
            return str(given[option])
        if given.get(f"{option}_file"):
            try:
                return read_secret_file(given[f"{option}_file"], _SECRET_FILES[option])
            except ValueError as error:
                raise UsageError(str(error)) from None
        env_name, dev_key = _SOURCES[option]
        if env_name and environ.get(env_name):
            return environ[env_name]
        if dev_key and dev.get(dev_key):
            return str(dev[dev_key])
        return None

    address, api_key, admin_token = pick("address") or DEFAULT_ADDRESS, pick("api_key"), pick("admin_token")
    return Connection(
        address=address,
        api_key=api_key,
        admin_token=admin_token,
        timeout=given.get("timeout", DEFAULT_TIMEOUT),
        json=bool(given.get("json", False)),
        tls=bool(given.get("tls", False)),
        ca_cert=given.get("ca_cert"),
        client_cert=given.get("client_cert"),
        client_key=given.get("client_key"),
        tls_server_name=given.get("tls_server_name"),
        dev_dir=dev_dir,
        warnings=tuple(warnings),
    )
