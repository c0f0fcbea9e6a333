"""What a client really sent PostgreSQL, from libpq's own trace of the
connections an engine checks out: every message, whether the statement went
through SQLAlchemy, the store's driver cursor or psycopg's pipeline."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import sqlalchemy as sa


@contextmanager
def client_messages(engine: sa.Engine) -> Iterator[tuple[list[str], list]]:
    """Yields ``(messages, used)``: ``messages`` is filled, on exit, with
    every message the client sent on the connections checked out meanwhile
    (``used``), in order, each as its type and fields (``Parse "" "SELECT
    …" 2 NNNN NNNN``), a statement's text whole however many lines it has."""
    messages: list[str] = []
    handle, path = tempfile.mkstemp(prefix="libpqtrace")
    used: list = []

    def checkout(dbapi_connection, record, proxy):
        dbapi_connection.pgconn.trace(handle)
        dbapi_connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        used.append(dbapi_connection)

    def checkin(dbapi_connection, record):
        if dbapi_connection is not None and dbapi_connection in used:
            dbapi_connection.pgconn.untrace()

    sa.event.listen(engine, "checkout", checkout)
    sa.event.listen(engine, "checkin", checkin)
    try:
        yield messages, used
    finally:
        sa.event.remove(engine, "checkout", checkout)
        sa.event.remove(engine, "checkin", checkin)
        for connection in used:
            if not connection.closed:
                connection.pgconn.untrace()
        os.close(handle)
        with open(path) as trace:
            lines: list[str] = []
            for line in trace.read().split("\n"):
                if line.startswith(("F\t", "B\t")):
                    lines.append(line)
                elif lines:  # a statement's text goes on over lines of its own
                    lines[-1] += "\n" + line
        os.unlink(path)
        for line in lines:
            fields = line.split("\t")
            if fields[0] == "F":
                messages.append((fields[2].strip() + " " + " ".join(fields[3:]).strip()).strip())
