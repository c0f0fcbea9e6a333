"""Helpers that grow the subcommand tree: every client parser, group or
leaf, gets the global options as a parent (see ``options``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tickwheel_server.cli.options import HelpFormatter

Handler = Callable[..., int]


def group(subparsers: Any, name: str, parents: list[argparse.ArgumentParser], help: str) -> Any:
    """A command that only holds subcommands (``job``, ``admin tenant``)."""
    parser = subparsers.add_parser(name, parents=parents, help=help, description=help, formatter_class=HelpFormatter)
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)


def leaf(
    subparsers: Any,
    name: str,
    parents: list[argparse.ArgumentParser],
    handler: Handler,
    *,
    auth: str,
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A client command run by ``handler(context, args) -> exit status``;
    ``auth`` is ``"tenant"`` (sends the API key) or ``"admin"`` (sends the
    admin token)."""
    parser = subparsers.add_parser(
        name, parents=parents, help=help, description=description or help,
        formatter_class=HelpFormatter,
    )  # fmt: skip
    parser.set_defaults(command_handler=handler, auth=auth)
    return parser
