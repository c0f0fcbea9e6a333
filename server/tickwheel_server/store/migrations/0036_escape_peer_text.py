"""Peer text stored raw by earlier releases escaped in place, in bounded batches.

Until the release that escaped a worker's error at the store's write, and
the one that refused control characters in a request's free text, a row
could hold what a worker, an HTTP target or a tenant sent raw: ESC
sequences, CR and LF, BEL, C1 bytes, bidi overrides. :data:`COLUMNS` are
every column such text reached: a run's and an attempt's error, a dead or
cancel reason (a cancel's reason becomes the dead reason), an alert's
summary and details (they quote errors and reasons), a job's and a
tenant's pause reason, an API key's and a worker credential's description.
Each is escaped by the function its write path uses
(:mod:`tickwheel_server.store.peertext`): errors by ``stored_error``, the
rest by ``escaped_text``; an alert's details are JSON, whose values are
escaped one by one. Neither escapes a backslash, so a row escaped already
(by the write path, or by this migration run before) is left as it is.

Ids and names are left: ids were always checked (printable ASCII), and a
job's name and labels are in its definition too (``jobs.spec``), where
every reader finds them; the CLI and the console escape them on display.

:func:`backfill` walks each table in primary key order, :data:`BATCH` rows
a transaction: one LIMITed read of the batch's last key, one read of the
batch's rows that may hold such text (a character outside printable ASCII;
for the JSON details a backslash), and one UPDATE by primary key per
changed column, which writes only where the column still holds what was
read (a row rewritten meanwhile is left to its writer, who escapes). Ten
million rows are two thousand transactions, none holding more than a
batch's writes. :func:`upgrade` changes nothing: a row written raw by a
server of the earlier release after the walk passed it (a rolling upgrade)
is escaped when read (``peertext.readable_error``, ``escaped_text``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tickwheel_server.store.engine import Capabilities
from tickwheel_server.store.peertext import escaped_text, stored_error

BATCH = 5_000
"""Rows of one table walked per backfill transaction."""


def escaped_details(details: str) -> str:
    """An alert's details (a JSON object of strings) with each key and value escaped;
    unchanged when none needs it (also text that is not such JSON: left as it is)."""
    try:
        values = json.loads(details)
    except ValueError:
        return details
    if not isinstance(values, dict):
        return details
    escaped = {escaped_text(str(k)): escaped_text(str(v)) for k, v in values.items()}
    if escaped == values:
        return details
    return json.dumps(escaped, sort_keys=True, separators=(",", ":"))  # as store/alerts.py writes them


class Table(NamedTuple):
    name: str
    key: tuple[str, ...]
    """The primary key (unique), walked in order."""
    columns: dict[str, Callable[[str], str]]
    """Each column of peer text and its escape."""
    pruning: tuple[str, ...] = ()
    """More columns the UPDATE names, for PostgreSQL's partition pruning (attempts: ``started_at``)."""


COLUMNS = (
    Table("executions", ("id",), {"error": stored_error, "dead_reason": escaped_text, "cancel_reason": escaped_text}),
    Table("attempts", ("execution_id", "attempt", "delivery"), {"error": stored_error}, ("started_at",)),
    Table("alerts", ("id",), {"summary": escaped_text, "details": escaped_details}),
    Table("jobs", ("id",), {"pause_reason": escaped_text}),
    Table("tenants", ("name",), {"pause_reason": escaped_text}),
    Table("api_keys", ("id",), {"description": escaped_text}),
    Table("worker_credentials", ("id",), {"description": escaped_text}),
)


def _may_hold(caps: Capabilities, column: str) -> str:
    """A condition true of every value of ``column`` its escape may change
    (and of some it does not): one character outside printable ASCII, or
    for JSON (``details``, written ASCII) a backslash."""
    if column == "details":
        return "instr(details, char(92)) > 0" if caps.is_sqlite else "strpos(details, chr(92)) > 0"
    return f"{column} GLOB '*[^ -~]*'" if caps.is_sqlite else f"{column} ~ '[^ -~]'"


def backfill(conn: Connection, caps: Capabilities, after: str) -> str | None:
    """Escape the peer text of the next :data:`BATCH` rows of one table
    after the cursor ``after`` ("" at first: the first table's start;
    otherwise JSON ``[table, key or null]``); returns the cursor after
    them, or None when the last table is done."""
    index, last = json.loads(after) if after else (0, None)
    table = COLUMNS[index]
    keys = ", ".join(table.key)
    lower = f"({keys}) > ({', '.join(f':a{i}' for i in range(len(table.key)))})" if last is not None else "1 = 1"
    bound = {f"a{i}": value for i, value in enumerate(last or ())}
    upper = conn.execute(
        text(f"SELECT {keys} FROM {table.name} WHERE {lower} ORDER BY {keys} LIMIT 1 OFFSET :skip"),
        dict(bound, skip=BATCH - 1),
    ).first()
    within = lower
    if upper is not None:
        within += f" AND ({keys}) <= ({', '.join(f':z{i}' for i in range(len(table.key)))})"
        bound.update({f"z{i}": value for i, value in enumerate(upper)})
    names = [*table.key, *table.pruning, *table.columns]
    may_hold = " OR ".join(_may_hold(caps, column) for column in table.columns)
    rows = conn.execute(text(f"SELECT {', '.join(names)} FROM {table.name} WHERE {within} AND ({may_hold})"), bound)
    changes: dict[str, list[dict]] = {column: [] for column in table.columns}
    for row in rows.mappings():
        for column, escape in table.columns.items():
            old = row[column]
            new = old if old is None else escape(old)
            if new != old:
                where = {f"k_{name}": row[name] for name in (*table.key, *table.pruning)}
                changes[column].append(dict(where, old=old, new=new))
    for column, updates in changes.items():
        if updates:
            match = " AND ".join(f"{name} = :k_{name}" for name in (*table.key, *table.pruning))
            conn.execute(
                text(f"UPDATE {table.name} SET {column} = :new WHERE {match} AND {column} = :old"), updates
            )
    if upper is not None:
        return json.dumps([index, list(upper)])
    return json.dumps([index + 1, None]) if index + 1 < len(COLUMNS) else None


def upgrade(conn: Connection, caps: Capabilities) -> None:
    """Nothing: :func:`backfill` did the work, batch by batch (module docstring)."""
