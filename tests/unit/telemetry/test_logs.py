"""Lines about an execution carry its ids: as fields in the JSON format, as
``name=value`` in the text format."""

from __future__ import annotations

import io
import json
import logging

import pytest

from tickwheel.shared.logs import JsonFormatter, TextFormatter, formatter_for, log_execution


def _capture(formatter: logging.Formatter, level: int = logging.DEBUG) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"tickwheel.test.{id(stream)}")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(level)
    return logger, stream


def test_a_json_line_about_an_execution_carries_its_three_ids() -> None:
    logger, stream = _capture(JsonFormatter())
    log_execution(logger, logging.WARNING, "delivery %d taken back: %s", 3, "no heartbeat",
                  execution="job-1:2030-01-01T00:00:00Z", job="job-1", tenant="acme")
    [line] = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["msg"] == "delivery 3 taken back: no heartbeat"
    assert (entry["execution_id"], entry["job_id"], entry["tenant"]) == ("job-1:2030-01-01T00:00:00Z", "job-1", "acme")
    assert entry["level"] == "WARNING" and entry["logger"] == logger.name
    assert entry["ts"].endswith("Z") and "T" in entry["ts"]


def test_a_json_line_with_an_exception_keeps_the_traceback_in_one_line() -> None:
    logger, stream = _capture(JsonFormatter())
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log_execution(logger, logging.ERROR, "attempt failed", execution="e", job="j", tenant="t", exc_info=True)
    [line] = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert "RuntimeError: boom" in entry["exc"] and entry["tenant"] == "t"


def test_text_lines_append_the_ids_and_other_lines_are_unchanged() -> None:
    logger, stream = _capture(TextFormatter())
    log_execution(logger, logging.INFO, "rejected", execution="e1", job="j1", tenant="acme")
    logger.info("a line about nothing in particular")
    first, second = stream.getvalue().splitlines()
    assert first.endswith("rejected execution_id=e1 job_id=j1 tenant=acme")
    assert second.endswith("a line about nothing in particular")


def test_a_level_that_is_off_builds_nothing() -> None:
    logger, stream = _capture(JsonFormatter(), level=logging.INFO)
    log_execution(logger, logging.DEBUG, "handed out", execution="e", job="j", tenant="t")
    assert stream.getvalue() == ""


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="text, json"):
        formatter_for("xml")


def test_the_server_refuses_an_unknown_log_format_naming_the_flag() -> None:
    from tickwheel_server.config import ConfigError, ServerConfig

    with pytest.raises(ConfigError, match=r"--log-format"):
        ServerConfig(store="sqlite://", etcd="memory", admin_token="x" * 16, log_format="xml")
    with pytest.raises(ConfigError, match=r"--trace-export"):
        ServerConfig(store="sqlite://", etcd="memory", admin_token="x" * 16, trace_export="zipkin")
