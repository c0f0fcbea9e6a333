"""``tickwheel``: the one command line of Tickwheel.

Server roles (``dev``, ``server``, ``worker``, ``migrate``, ``cron next``)
are owned by their components: this module imports them only when asked and
hands them the rest of the command line untouched, so their own parsers
handle their flags (and ``--help``). Everything else is a client command
over the Python SDK.

Exit status: 0 on success; 2 for bad input (a usage error, a file that cannot
be read, or the server answering INVALID_ARGUMENT, FAILED_PRECONDITION or
OUT_OF_RANGE); 1 for every other failure (server errors, UNAVAILABLE,
UNAUTHENTICATED, NOT_FOUND, ...). A failure prints exactly one error line
on stderr: ``error: CODE: field: description; ...`` (after a ``warning:``
line for each secret given as a flag instead of a file or the environment).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

from tickwheel_server.cli.options import VALUE_OPTIONS, Connection, HelpFormatter, global_options, resolve
from tickwheel_server.cli.parse import UsageError

if TYPE_CHECKING:
    from tickwheel import TickwheelError

__all__ = ["DELEGATES", "build_parser", "main"]

# command words -> (module, function(argv: list[str]) -> int)
DELEGATES: dict[tuple[str, ...], tuple[str, str, str]] = {
    ("dev",): ("tickwheel_server.dev", "dev_main", "run everything on this machine (SQLite, built-in worker)"),
    ("server",): ("tickwheel_server.cli.server", "server_main", "run a server (PostgreSQL/CockroachDB + etcd)"),
    ("worker",): ("tickwheel_worker.cli", "worker_main", "run a worker process"),
    ("migrate",): ("tickwheel_server.store.migrate_cli", "migrate_main", "apply store schema migrations"),
    ("cron", "next"): ("tickwheel_server.schedule.cli", "cron_next_main", "print the next fires of a cron expression"),
    ("completion",): ("tickwheel_server.cli.completion", "completion_main", "print a shell completion script (bash, zsh)"),
}  # fmt: skip

_BAD_INPUT_CODES = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"})


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become one line (``UsageError``)
    instead of usage text plus a message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree. Client commands carry the global options at
    every level; delegated commands are listed for ``--help`` only (``main``
    dispatches them before parsing)."""
    from tickwheel_server.cli import admin, apply, calendars, jobs

    globals_parent = global_options()
    parents = [globals_parent]
    parser = _Parser(
        prog="tickwheel",
        parents=parents,
        allow_abbrev=False,
        formatter_class=HelpFormatter,
        description="Tickwheel: a distributed cron and one-off job scheduler.",
        epilog="Global options are accepted before or after a client command and its arguments.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cron = None
    for words, (_module, _function, help_text) in DELEGATES.items():
        if len(words) == 1:
            sub = commands.add_parser(words[0], help=help_text, add_help=False)
        else:
            if cron is None:
                cron_parser = commands.add_parser("cron", help="cron expression tools")
                cron = cron_parser.add_subparsers(dest="cron_command", metavar="COMMAND", required=True)
            sub = cron.add_parser(words[1], help=help_text, add_help=False)
        sub.add_argument("argv", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        sub.set_defaults(delegate=words)
    jobs.register(commands, parents)
    calendars.register(commands, parents)
    apply.register(commands, parents)
    admin.register(commands, parents)
    return parser


def _delegated(argv: Sequence[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """The delegated command the argument list names, and the arguments that
    follow its words, or None. Leading global options (and their values) are
    skipped, so ``tickwheel --address X server ...`` still delegates."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return None
        if token.startswith("-"):
            i += 2 if token in VALUE_OPTIONS else 1
            continue
        for words in DELEGATES:
            if tuple(argv[i : i + len(words)]) == words:
                return words, list(argv[i + len(words) :])
        return None
    return None


def _run_delegate(words: tuple[str, ...], rest: list[str], stderr: TextIO) -> int:
    module_name, function_name, _help = DELEGATES[words]
    command = "tickwheel " + " ".join(words)
    try:
        module = importlib.import_module(module_name)
        function = getattr(module, function_name)
    except (ImportError, AttributeError) as error:
        stderr.write(f"error: `{command}` is not available in this installation ({module_name}: {error})\n")
        return 1
    status = function(rest)
    return 0 if status is None else int(status)


def _error_line(error: TickwheelError, auth: str | None, connection: Connection) -> tuple[str, int]:
    """The one error line for a failed call and the exit status it maps to."""
    line = str(error)
    credential = connection.api_key if auth == "tenant" else connection.admin_token
    if error.code_name == "UNAUTHENTICATED" and not credential:
        hint = (
            "--api-key-file FILE or TICKWHEEL_API_KEY" if auth == "tenant"
            else "--admin-token-file FILE or TICKWHEEL_ADMIN_TOKEN"
        )  # fmt: skip
        line += f" (no credential given: use {hint}, or --dev DIR)"
    elif error.code_name == "UNAVAILABLE":
        line += f" (server {connection.address})"
    return line, 2 if error.code_name in _BAD_INPUT_CODES else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one ``tickwheel`` command and returns its exit status (the
    console script passes it to ``sys.exit``)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    stdout, stderr = sys.stdout, sys.stderr
    try:
        delegated = _delegated(args_list)
        if delegated is not None:
            return _run_delegate(*delegated, stderr)
        try:
            args = build_parser().parse_args(args_list)
        except UsageError as error:
            stderr.write(f"error: {error}\n")
            return 2
        if getattr(args, "delegate", None):  # reached only through unusual spellings
            return _run_delegate(args.delegate, list(args.argv), stderr)
        return _run_client_command(args, stdout, stderr)
    except SystemExit as exit_:  # --help, or a delegated command's own parser
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        stderr.write(f"{code}\n")
        return 1
    except KeyboardInterrupt:
        stderr.write("error: interrupted\n")
        return 130


def _run_client_command(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from tickwheel import TickwheelError
    from tickwheel_server.cli.context import Context

    context = None
    try:
        connection = resolve(args)
        for warning in connection.warnings:
            stderr.write(f"warning: {warning}\n")
        context = Context(args, connection, stdout, stderr)
        return args.command_handler(context, args)
    except UsageError as error:
        stderr.write(f"error: {error}\n")
        return 2
    except TickwheelError as error:
        line, status = _error_line(error, args.auth, connection)
        stderr.write(f"error: {line}\n")
        return status
    finally:
        stdout.flush()
        if context is not None:
            context.close()


if __name__ == "__main__":
    raise SystemExit(main())
