"""One row of a ``tickwheel job import`` file (a JSON-lines object or a CSV
row) into the Job it describes and its request id. Pure: no I/O.

The keys are ``tickwheel job create``'s flags, with ``_`` for ``-``
(:data:`SCALAR_KEYS`); the repeatable flags become maps (``labels``,
``headers``, ``concurrency_keys``), and ``request_id`` may be given. In
JSON lines a value has its JSON type (``max_runs`` a number, ``exact`` a
boolean, ``labels`` an object, ``payload`` any JSON value, sent as its
compact JSON text with its numbers as written: ``jsontext``) and ``null``
means not given; in CSV every cell is text
(``payload`` and the maps are JSON text) and an empty cell means not given.
The keys of a stored job that a file exported from elsewhere may carry
(:data:`IGNORED_KEYS`: ``id``, ``tenant``, ``version``, ...) are ignored: the
server assigns ids and the tenant is always the API key's. Any other key is
an error of its row.

A row's request id, unless it gives one, is derived from its line number and
its content (:func:`derived_request_id`), so importing the same file again
creates nothing twice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from decimal import Decimal
from typing import Any

from tickwheel_server.cli import jsontext
from tickwheel_server.cli.parse import UsageError, parse_duration, parse_instant
from tickwheel_server.transport import MAX_REQUEST_BYTES

__all__ = [
    "IGNORED_KEYS",
    "KNOWN_KEYS",
    "RowError",
    "canonical",
    "derived_request_id",
    "job_from_row",
]

STRING_KEYS = (
    "name", "cron", "at", "tz", "handler", "url", "method", "jitter", "overlap", "initial_backoff", "max_backoff",
    "attempt_timeout", "misfire", "misfire_threshold", "lateness_threshold", "start_at", "end_at", "dst_gap",
    "dst_repeat", "calendar", "calendar_rule",
)  # fmt: skip
INT_KEYS = ("max_attempts", "max_runs")
MAX_JOB_BYTES = MAX_REQUEST_BYTES - 1024
"""A job that one request carries, with its request id and framing (``1E9``
in a payload is sent as ``1000000000.0``: a line under its bound may be over)."""
INT_MAX = {"max_attempts": 2**31 - 1, "max_runs": 2**63 - 1, "concurrency_keys": 2**31 - 1}
"""The largest value each integer's protobuf field holds (int32, int64)."""
BOOL_KEYS = ("exact",)
MAP_KEYS = ("labels", "headers", "concurrency_keys")
SCALAR_KEYS = STRING_KEYS + INT_KEYS + BOOL_KEYS
KNOWN_KEYS = frozenset((*SCALAR_KEYS, *MAP_KEYS, "payload", "request_id"))
IGNORED_KEYS = frozenset({
    "id", "tenant", "state", "version", "next_run_at", "next_due_at", "run_count", "tzdata_version", "last_run",
    "created_at", "updated_at", "pause_reason",
})  # fmt: skip
DURATION_KEYS = frozenset({"jitter", "initial_backoff", "max_backoff", "attempt_timeout", "misfire_threshold",
                           "lateness_threshold"})  # fmt: skip
INSTANT_KEYS = frozenset({"at", "start_at", "end_at"})
CHOICES = {
    "overlap": ("skip", "queue_one", "allow", "replace"),
    "misfire": ("run_once", "run_all", "skip"),
    "dst_gap": ("auto", "shift", "skip"),
    "dst_repeat": ("auto", "once", "both"),
    "calendar_rule": ("only", "next", "previous", "skip"),
}
_REQUEST_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


class RowError(Exception):
    """A row that cannot become a job: ``field`` (a key of the row, or ""
    for the row as a whole) and ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


def canonical(row: dict[str, Any]) -> str:
    """The row's content as one string, independent of key order, of
    whitespace and (in CSV) of empty cells, without the ignored keys and
    ``request_id``: what its derived request id hashes."""
    kept = {k: v for k, v in row.items() if k not in IGNORED_KEYS and k != "request_id" and v not in ("", None)}
    # A number read as a Decimal hashes as the float it was read as before: the ids stay those of earlier runs.
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=float)


def derived_request_id(line: int, content: str) -> str:
    """``import-`` and 40 hex digits of SHA-256 over the line number and the
    row's canonical content: stable across runs of the same file, and
    distinct for identical rows on different lines."""
    digest = hashlib.sha256(f"{line}\n{content}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"import-{digest[:40]}"


def _text(key: str, value: Any, csv: bool) -> str:
    if not isinstance(value, str):
        raise RowError(key, f"expected a string, got {_json_type(value)}")
    if "\x00" in value:
        raise RowError(key, "contains a NUL character")
    _encodable(key, value)
    return value


def _encodable(key: str, value: str) -> None:
    """A lone surrogate (``"\\ud800"`` is valid JSON) is no Unicode text:
    refused naming ``key``, rather than by protobuf for the whole row."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(value[error.start])
        raise RowError(key, f"holds a lone surrogate (U+{code:04X}), not Unicode text") from None


def _int(key: str, value: Any, csv: bool) -> int:
    if csv:
        try:
            value = int(value.strip())
        except ValueError:
            raise RowError(key, f"expected an integer, got {value[:40]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RowError(key, f"expected an integer, got {_json_type(value)}")
    if value > INT_MAX[key]:
        raise RowError(key, f"at most {INT_MAX[key]}")
    return value


def _bool(key: str, value: Any, csv: bool) -> bool:
    if csv:
        word = value.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise RowError(key, f"expected true or false, got {value[:40]!r}")
    if not isinstance(value, bool):
        raise RowError(key, f"expected true or false, got {_json_type(value)}")
    return value


def _map(key: str, value: Any, csv: bool) -> dict[str, Any]:
    if csv:
        try:
            value = jsontext.loads(value)
        except jsontext.JsonError as error:
            if error.reason.startswith("not valid JSON"):
                raise RowError(key, "expected a JSON object, e.g. {\"team\": \"data\"}") from None
            raise RowError(key, error.reason) from None
    if not isinstance(value, dict):
        raise RowError(key, f"expected an object, got {_json_type(value)}")
    for k, v in value.items():
        if not k.strip() or "\x00" in k:
            raise RowError(key, f"key {k[:40]!r} is empty or contains NUL")
        _encodable(key, k)
        if key == "concurrency_keys":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RowError(key, f"limit of {k[:40]!r} must be an integer >= 1")
            if v > INT_MAX[key]:
                raise RowError(key, f"limit of {k[:40]!r} must be at most {INT_MAX[key]}")
        elif not isinstance(v, str) or "\x00" in v:
            raise RowError(key, f"value of {k[:40]!r} must be a string without NUL")
        else:
            _encodable(key, v)
    return value


def _payload(value: Any, csv: bool) -> str:
    """The payload's JSON text: a CSV cell's as given, a JSON line's value
    written back exactly (:func:`jsontext.dumps`)."""
    if csv:
        try:
            jsontext.loads(value)
        except jsontext.JsonError as error:
            raise RowError("payload", error.reason) from None
        _encodable("payload", value)
        return value
    try:
        return jsontext.dumps(value)
    except (TypeError, ValueError) as error:
        raise RowError("payload", f"not JSON: {error}") from None


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    return {list: "an array", str: "a string", bool: "a boolean", float: "a number", int: "a number",
            Decimal: "a number"}.get(type(value), type(value).__name__)  # fmt: skip


def request_id_of(row: dict[str, Any], csv: bool) -> str | None:
    """The row's own ``request_id`` (checked: 1-128 of ``[A-Za-z0-9_.:-]``),
    or None when it gives none."""
    value = row.get("request_id")
    if value in (None, ""):
        return None
    value = _text("request_id", value, csv)
    if not 1 <= len(value) <= 128 or not set(value) <= _REQUEST_ID_CHARS:
        raise RowError("request_id", "1 to 128 characters of A-Z a-z 0-9 _ . : -")
    return value


def job_from_row(row: dict[str, Any], *, csv: bool) -> Any:
    """The ``tickwheel.v1.Job`` a row describes, built as ``tickwheel job
    create`` builds one from the same flags. Raises :class:`RowError` naming
    the first bad key; the server judges the rest (a cron expression, a zone,
    the bounds of each field)."""
    from tickwheel.v1 import job_pb2

    from tickwheel_server.cli.jobs import apply_spec

    unknown = sorted(k for k in row if k not in KNOWN_KEYS and k not in IGNORED_KEYS)
    if unknown:
        raise RowError(unknown[0][:60], "unknown key (the keys are listed by `tickwheel job import --help`)")
    given = {k: v for k, v in row.items() if k in KNOWN_KEYS and v is not None and not (csv and v == "")}

    flags: dict[str, Any] = {k: None for k in SCALAR_KEYS}
    flags.update(payload=None, payload_file=None, header=None, label=None, concurrency_key=None)
    for key in STRING_KEYS:
        if key in given:
            flags[key] = _text(key, given[key], csv)
    for key in INT_KEYS:
        if key in given:
            flags[key] = _int(key, given[key], csv)
    if "exact" in given:
        flags["exact"] = _bool("exact", given["exact"], csv) or None
    maps = {key: _map(key, given[key], csv) for key in MAP_KEYS if key in given}
    payload = _payload(given["payload"], csv) if "payload" in given else None

    if not flags["name"]:
        raise RowError("name", "required")
    for first, second in (("calendar", "calendar_rule"), ("calendar_rule", "calendar")):
        if flags[first] is not None and flags[second] is None:
            raise RowError(second, f"required with {first}")
    for first, second in (("cron", "at"), ("handler", "url"), ("exact", "jitter")):
        if flags[first] is not None and flags[second] is not None:
            raise RowError(second, f"give {first} or {second}, not both")
    if flags["cron"] is None and flags["at"] is None:
        raise RowError("cron", "required: a cron expression, or 'at' for a one-off")
    if flags["handler"] is None and flags["url"] is None:
        raise RowError("handler", "required: a handler name, or 'url' for an HTTP target")
    if "headers" in maps and flags["url"] is None:
        raise RowError("headers", "applies to url targets")
    for key, choices in CHOICES.items():
        if flags[key] is not None and flags[key] not in choices:
            raise RowError(key, f"one of {', '.join(choices)}")
    for key in sorted(DURATION_KEYS | INSTANT_KEYS):
        if flags[key] is not None:
            try:
                (parse_duration if key in DURATION_KEYS else parse_instant)(flags[key])
            except UsageError as error:
                raise RowError(key, str(error)) from None
            if key in INSTANT_KEYS and flags[key].strip().lower() == "now":
                raise RowError(key, "an RFC 3339 instant, not 'now' (a file must mean the same on every import)")
    if flags["max_runs"] is not None and flags["max_runs"] < 0:
        raise RowError("max_runs", "0 (unlimited) or more")
    if flags["max_attempts"] is not None and flags["max_attempts"] < 1:
        raise RowError("max_attempts", "at least 1")

    job = job_pb2.Job()
    try:
        apply_spec(job, argparse.Namespace(**flags))
        if payload is not None:  # checked by _payload: not read again as --payload would be
            job.payload = payload.encode("utf-8")
        if "headers" in maps:
            job.target.http.headers.update({k.strip(): v.strip() for k, v in maps["headers"].items()})
        if "labels" in maps:
            job.labels.update(maps["labels"])
        for key, limit in maps.get("concurrency_keys", {}).items():
            job.concurrency_keys.add(key=key, limit=limit)
    except (UsageError, ValueError, TypeError) as error:  # a lone surrogate is a ValueError too
        raise RowError("", str(error)) from None
    size = job.ByteSize()
    if size > MAX_JOB_BYTES:  # its call would be refused whole, every job beside it with it
        mostly = "payload" if len(job.payload) * 2 > size else ""
        raise RowError(mostly, f"the job is {size} bytes serialized; a request carries at most {MAX_REQUEST_BYTES}")
    return job
