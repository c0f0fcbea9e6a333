"""Structured logs: every line about an execution names it, its job and its tenant.

A line about an execution is logged through :func:`log_execution` (or with
``extra=execution_fields(...)``), which attaches the ids to the record as
fields. The two formats (``--log-format``) show them:

- ``text`` (default): the usual ``time level logger: message``, followed by
  ``execution_id=… job_id=… tenant=…`` for the ids the record carries;
- ``json``: one JSON object per line, ``ts`` (RFC 3339 UTC, milliseconds),
  ``level``, ``logger``, ``msg``, the ids as fields of their own, and
  ``exc`` with the traceback when there is one, for log pipelines that
  index fields instead of parsing text.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

LOG_FORMATS = ("text", "json")
FIELDS = ("execution_id", "job_id", "tenant", "delivery", "worker_id")
"""Record attributes shown as fields, in this order, when present."""
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def execution_fields(execution: str, job: str = "", tenant: str = "", **more: object) -> dict[str, object]:
    """The ``extra`` of a log call about one execution (empty ids are left out)."""
    fields: dict[str, object] = {"execution_id": execution}
    if job:
        fields["job_id"] = job
    if tenant:
        fields["tenant"] = tenant
    fields.update({name: value for name, value in more.items() if value not in ("", None)})
    return fields


def log_execution(
    logger: logging.Logger, level: int, msg: str, *args: object, execution: str, job: str = "", tenant: str = "",
    exc_info: object = None, **more: object,
) -> None:
    """``logger.log(level, msg, *args)`` with the execution's ids as fields."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, *args, exc_info=exc_info, extra=execution_fields(execution, job, tenant, **more))


def _fields_of(record: logging.LogRecord) -> dict[str, object]:
    return {name: getattr(record, name) for name in FIELDS if getattr(record, name, None) not in (None, "")}


class TextFormatter(logging.Formatter):
    """The plain format, with the record's ids appended as ``name=value``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        fields = _fields_of(record)
        if fields:
            line += " " + " ".join(f"{name}={value}" for name, value in fields.items())
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line; see the module docstring."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"
            ),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_fields_of(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


def formatter_for(log_format: str) -> logging.Formatter:
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r}: one of {', '.join(LOG_FORMATS)}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure(level: str | int, log_format: str = "text") -> None:
    """Log to stderr at ``level`` in ``log_format``, as ``logging.basicConfig``
    does (nothing changes when the root logger already has a handler)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(log_format))
    logging.basicConfig(
        level=level if isinstance(level, int) else getattr(logging, level.upper(), logging.INFO), handlers=[handler]
    )
