"""What a client command runs with: resolved connection, a lazily built SDK
client, and the two output streams (results on stdout, diagnostics on
stderr)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tickwheel_server.cli.options import Connection
from tickwheel_server.cli.parse import UsageError

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from tickwheel import Client


class Context:
    """One command invocation. ``client`` is created on first use and closed
    by :meth:`close`."""

    def __init__(self, args: argparse.Namespace, connection: Connection, stdout: TextIO, stderr: TextIO) -> None:
        self.args = args
        self.connection = connection
        self.stdout = stdout
        self.stderr = stderr
        self._client: Client | None = None

    @property
    def json(self) -> bool:
        """True when ``--json`` asked for one JSON document instead of text."""
        return self.connection.json

    @property
    def client(self) -> Client:
        if self._client is None:
            from tickwheel import Client

            c = self.connection
            try:
                self._client = Client(
                    c.address, c.api_key, admin_token=c.admin_token, tls=c.tls_options(), timeout=c.timeout
                )
            except ValueError as error:  # a credential with a newline, an empty address
                raise UsageError(str(error)) from None
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def out(self, line: str = "") -> None:
        """One line of result on stdout."""
        self.stdout.write(line + "\n")

    def note(self, line: str) -> None:
        """One line of diagnostics on stderr."""
        self.stderr.write(line + "\n")
        self.stderr.flush()

    def emit_json(self, message: Message) -> None:
        from tickwheel_server.cli.output import print_json

        print_json(message, self.stdout)
