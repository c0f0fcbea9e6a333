"""Parsing of CLI argument values: durations, instants, payloads, pairs.

Pure functions; each raises :class:`UsageError` with a message fit for the
one error line the CLI prints (exit status 2).
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta, timezone

from tickwheel_server.cli import jsontext
from tickwheel_server.transport import MAX_REQUEST_BYTES

__all__ = [
    "UsageError",
    "parse_duration",
    "parse_instant",
    "parse_key_limit",
    "parse_key_value",
    "read_at_most",
    "read_payload",
]


class UsageError(Exception):
    """Bad input on the command line or in a file it names: exit status 2."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> timedelta:
    """``30s``, ``5m``, ``1h``, ``1h30m``, ``250ms``, ``1d`` (parts may be
    combined, largest first or not) or ``0``. A bare number other than 0 is
    refused: its unit would be a guess."""
    raw = text.strip().lower()
    if raw == "0":
        return timedelta(0)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(raw):
        raise UsageError(f"invalid duration {text!r}: use forms like 30s, 5m, 1h, 1h30m")
    try:
        return timedelta(seconds=total)
    except OverflowError:  # past timedelta's 999 999 999 days, or digits enough to make the float infinite
        raise UsageError(f"duration {text[:40]!r} is out of range") from None


def parse_instant(text: str, *, now: datetime | None = None) -> datetime:
    """An RFC 3339 instant with its offset (``2026-03-29T01:30:00Z``,
    ``2026-03-29T02:30:00+01:00``), or ``now``. A time without an offset is
    refused: it would not name one instant."""
    raw = text.strip()
    if raw.lower() == "now":
        return now or datetime.now(timezone.utc)
    try:
        value = datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise UsageError(f"invalid instant {text!r}: use RFC 3339, e.g. 2026-03-29T01:30:00Z") from None
    if value.tzinfo is None:
        raise UsageError(f"instant {text!r} has no UTC offset: add Z or +HH:MM")
    return value


def read_payload(json_text: str | None, file_name: str | None) -> bytes | None:
    """The payload bytes: ``--payload`` must be JSON (read strictly, as
    :func:`~tickwheel_server.cli.jsontext.loads` reads it) and is sent as
    given (UTF-8); ``--payload-file`` is sent byte for byte (``-`` reads
    stdin; more than :data:`MAX_REQUEST_BYTES` is refused unread). None
    when neither was given."""
    if json_text is not None:
        try:
            jsontext.loads(json_text)
        except jsontext.JsonError as error:
            raise UsageError(f"--payload: {error.reason}") from None
        try:
            return json_text.encode("utf-8")
        except UnicodeEncodeError:  # argv's bytes that are not UTF-8 arrive as lone surrogates
            raise UsageError("--payload is not UTF-8 text") from None
    if file_name is not None:
        try:
            data = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1) if file_name == "-" else \
                read_at_most(file_name, MAX_REQUEST_BYTES)
        except OSError as error:
            raise UsageError(f"--payload-file: {error.strerror or error}: {file_name}") from None
        if len(data) > MAX_REQUEST_BYTES:
            raise UsageError(f"--payload-file: {file_name} is more than {MAX_REQUEST_BYTES} bytes: no request carries it")
        return data
    return None


def read_at_most(path: str, limit: int) -> bytes:
    """``path``'s bytes, read no further than ``limit`` and one byte: more
    than ``limit`` says the file is larger (/dev/zero has no end). OSError
    as ``open`` raises it."""
    with open(path, "rb") as stream:
        return stream.read(limit + 1)


def parse_key_value(text: str, *, option: str, separator: str = "=") -> tuple[str, str]:
    """``KEY=VALUE`` (the separator may differ) into a pair; KEY non-empty."""
    key, sep, value = text.partition(separator)
    if not sep or not key.strip():
        raise UsageError(f"{option} expects KEY{separator}VALUE, got {text!r}")
    return key.strip(), value


def parse_key_limit(text: str, *, option: str) -> tuple[str, int]:
    """``KEY=LIMIT`` with a positive integer limit."""
    key, value = parse_key_value(text, option=option)
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise UsageError(f"{option} expects KEY=LIMIT with LIMIT >= 1, got {text!r}")
    return key, limit
