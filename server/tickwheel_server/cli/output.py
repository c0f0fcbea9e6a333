"""Human output of the client commands: instants, durations, enum names,
aligned tables. Pure formatting; the commands decide what to print."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timezone
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # protobuf loads with the SDK, when a command calls: `--help` never does
    from google.protobuf.message import Message

__all__ = [
    "enum_name", "error_lines", "fmt_duration", "fmt_schedule", "fmt_target", "fmt_ts", "print_json", "printable",
    "table",
]


def print_json(message: Message, out: TextIO) -> None:
    """The message as one JSON document in the proto JSON mapping."""
    from google.protobuf import json_format

    out.write(json_format.MessageToJson(message, indent=2))
    out.write("\n")


def fmt_ts(message: Message, field: str) -> str:
    """``message.field`` as RFC 3339 UTC (``2026-03-29T01:30:00Z``, with
    milliseconds when not whole), or ``-`` when unset."""
    if not message.HasField(field):
        return "-"
    value = getattr(message, field).ToDatetime(tzinfo=timezone.utc)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_duration(message: Message, field: str) -> str:
    """``message.field`` as ``350ms``, ``12.5s``, ``5m3s``, ``2h5m``, or ``-``."""
    if not message.HasField(field):
        return "-"
    return fmt_seconds(getattr(message, field).ToTimedelta().total_seconds())


def fmt_seconds(seconds: float) -> str:
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{sign}{seconds:.3g}s" if seconds < 10 else f"{sign}{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs}s" if secs else f"{sign}{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours}h{minutes}m" if minutes else f"{sign}{hours}h"


def enum_name(enum_type: Any, value: int, prefix: str) -> str:
    """``EXECUTION_STATUS_SUCCEEDED`` -> ``succeeded``; unknown values as numbers."""
    try:
        name = enum_type.Name(value)
    except ValueError:
        return str(value)
    if name.endswith("_UNSPECIFIED"):
        return "-"
    return name[len(prefix) :].lower() if name.startswith(prefix) else name.lower()


def fmt_schedule(job: Message) -> str:
    """``cron "0 2 * * *" Europe/London``, ``once 2026-...Z`` or ``local ... in Zone``."""
    schedule = job.schedule  # type: ignore[attr-defined]
    kind = schedule.WhichOneof("kind")
    if kind == "cron":
        return f'cron "{schedule.cron.expression}" {schedule.cron.time_zone or "UTC"}'
    if kind == "once_at":
        return f"once {fmt_ts(schedule, 'once_at')}"
    if kind == "local":
        return f"local {schedule.local.local_time} {schedule.local.time_zone}"
    return "-"


def fmt_target(job: Message) -> str:
    """``handler NAME`` or ``http METHOD URL``."""
    target = job.target  # type: ignore[attr-defined]
    kind = target.WhichOneof("kind")
    if kind == "handler":
        return f"handler {target.handler.name}"
    if kind == "http":
        return f"http {target.http.method or 'POST'} {target.http.url}"
    return "-"


_JOINERS = frozenset("\u200c\u200d")


def printable(text: str) -> str:
    """``text`` for a terminal: every character that is not printable (C0
    and C1 controls, DEL, line separators, bidi and other format
    characters) escaped as Python writes it. What a worker or an HTTP
    target wrote (an attempt's error holds the start of the target's
    response body) and what a file says reach the reader's terminal, where a
    raw ESC would retitle it, clear it or hide the lines before. ZWNJ and
    ZWJ stay as they are: scripts and emoji need them, and the API allows
    them in names (docs/architecture.md, "Bad input")."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in _JOINERS else ascii(c)[1:-1] for c in text)


def error_lines(text: str) -> list[str]:
    """A stored error as the lines a detail view shows: what is not
    printable escaped first (:func:`printable`: a row stored raw), then
    each escaped line break (``\\n``, ``\\r\\n``) shown as one, so a
    handler's traceback reads as it was written. Only LF is ever printed,
    by the caller, between lines it indents: no ESC, CR or bidi override
    reaches the terminal, and no line of a worker's text starts at column
    0 where it could pass for the CLI's own. A backslash the worker wrote
    before an ``n`` (``C:\\new``) is shown as a break too: the stored
    form cannot tell the two apart (store/peertext.py)."""
    return printable(text).replace("\\r\\n", "\\n").split("\\n")


def one_line(text: str, limit: int = 80) -> str:
    """Collapses whitespace, escapes what is not printable, and truncates with an ellipsis."""
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> int:
    """Writes an aligned table (two spaces between columns, last column not
    padded); returns the number of rows. Nothing but the header when empty."""
    materialized = [[printable(str(cell)) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in materialized:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    for row in [list(headers), *materialized]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        out.write("  ".join(cells).rstrip() + "\n")
    return len(materialized)
