"""Failures: exactly one line on stderr, exit 2 for bad input, 1 for the
rest; and the delegation of server roles to their owners' entry points."""

from __future__ import annotations

import sys
import types

import grpc
import pytest

from tests.unit.sdk.fake_tickwheel import failure
from tickwheel_server.cli.parse import UsageError, parse_duration, parse_instant


def _one_error_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("error: ")
    return err.rstrip("\n")


def test_invalid_argument_prints_the_violations_and_exits_2(cli, fake, tenant) -> None:
    fake.reply("CreateJob", failure(grpc.StatusCode.INVALID_ARGUMENT, "invalid job",
                                    [("job.schedule.cron.expression", "minute 61 out of range 0-59")]))  # fmt: skip
    result = cli(*tenant, "job", "create", "--name", "n", "--cron", "61 * * * *", "--handler", "echo")
    assert result.code == 2 and result.out == ""
    line = _one_error_line(result.err)
    assert line == "error: INVALID_ARGUMENT: job.schedule.cron.expression: minute 61 out of range 0-59 (invalid job)"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (grpc.StatusCode.FAILED_PRECONDITION, 2),
        (grpc.StatusCode.OUT_OF_RANGE, 2),
        (grpc.StatusCode.NOT_FOUND, 1),
        (grpc.StatusCode.PERMISSION_DENIED, 1),
        (grpc.StatusCode.INTERNAL, 1),
        (grpc.StatusCode.ALREADY_EXISTS, 1),
    ],
)
def test_status_codes_map_to_exit_statuses(cli, fake, tenant, code, status) -> None:
    fake.reply("DeleteJob", failure(code, "nope"))
    result = cli(*tenant, "job", "delete", "job_1")
    assert result.code == status
    assert _one_error_line(result.err) == f"error: {code.name}: nope"


def test_an_rpc_the_server_lacks_is_unimplemented_exit_1(cli, fake, operator) -> None:
    result = cli(*operator, "admin", "recompute-tz", "--dry-run")  # no reply scripted
    assert result.code == 1 and result.out == ""
    assert _one_error_line(result.err).startswith("error: UNIMPLEMENTED:")


def test_missing_credential_names_how_to_give_one(cli, fake) -> None:
    result = cli("--address", fake.address, "admin", "status")
    assert result.code == 1
    line = _one_error_line(result.err)
    assert line.startswith("error: UNAUTHENTICATED:") and "--admin-token" in line


def test_unreachable_server_is_exit_1(cli, monkeypatch) -> None:
    monkeypatch.setenv("TICKWHEEL_API_KEY", "k")
    result = cli("job", "get", "job_1", "--address", "127.0.0.1:1", "--timeout", "1")
    assert result.code == 1
    assert _one_error_line(result.err).startswith("error: UNAVAILABLE:")


@pytest.mark.parametrize(
    "argv",
    [
        ["job", "create", "--name", "n", "--handler", "echo"],  # no schedule
        ["job", "create", "--name", "n", "--cron", "* * * * *", "--handler", "h", "--url", "u"],
        ["job", "create", "--name", "n", "--at", "2026-01-01T00:00:00", "--handler", "echo"],  # no offset
        ["job", "create", "--name", "n", "--at", "2026-01-01T00:00:00Z", "--tz", "UTC", "--handler", "e"],
        ["job", "create", "--name", "n", "--cron", "* * * * *", "--handler", "e", "--jitter", "5 minutes"],
        ["job", "create", "--name", "n", "--cron", "* * * * *", "--handler", "e", "--payload", "{not json"],
        ["job", "get"],
        ["job", "frobnicate"],
        ["job", "get", "X", "--no-such-flag"],
        ["job", "backfill", "j", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"],
        ["job", "get", "X", "--timeout", "-1"],
        [],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(cli, fake, tenant, argv) -> None:
    result = cli(*argv, *tenant)
    assert result.code == 2
    _one_error_line(result.err)
    assert fake.calls == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("250ms", 0.25), ("1d", 86400), ("0", 0)],
)
def test_durations(text, seconds) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "30", "5x", "m5", "1h 30m", "-5s"])
def test_bad_durations(text) -> None:
    with pytest.raises(UsageError):
        parse_duration(text)


def test_instants_need_an_offset() -> None:
    assert parse_instant("2026-03-29T02:30:00+01:00").utcoffset().total_seconds() == 3600
    with pytest.raises(UsageError):
        parse_instant("2026-03-29T02:30:00")


# --- delegated commands ---------------------------------------------------------------


@pytest.fixture
def owners(monkeypatch):
    """Stand-ins for the modules other components own, recording argv."""
    seen: dict[str, list[str]] = {}

    def install(module: str, function: str, status: int = 0) -> None:
        def entry(argv: list[str]) -> int:
            seen[function] = argv
            return status

        monkeypatch.setitem(sys.modules, module, types.SimpleNamespace(**{function: entry}))

    install("tickwheel_server.dev", "dev_main")
    install("tickwheel_server.cli.server", "server_main", status=3)
    install("tickwheel_worker.cli", "worker_main")
    install("tickwheel_server.store.migrate_cli", "migrate_main")
    install("tickwheel_server.schedule.cli", "cron_next_main")
    return seen


def test_server_roles_get_the_rest_of_the_command_line_unparsed(cli, owners) -> None:
    assert cli("dev", "--listen", "127.0.0.1:6000", "--data", "/tmp/tw", "--help").code == 0
    assert owners["dev_main"] == ["--listen", "127.0.0.1:6000", "--data", "/tmp/tw", "--help"]

    assert cli("--address", "ignored:1", "server", "--store", "sqlite:///x", "--", "-x").code == 3
    assert owners["server_main"] == ["--store", "sqlite:///x", "--", "-x"]

    assert cli("worker", "--handler", "echo").code == 0 and owners["worker_main"] == ["--handler", "echo"]
    assert cli("migrate").code == 0 and owners["migrate_main"] == []
    assert cli("cron", "next", "*/15 * * * *", "--tz", "Europe/London", "-n", "3").code == 0
    assert owners["cron_next_main"] == ["*/15 * * * *", "--tz", "Europe/London", "-n", "3"]


def test_a_role_that_is_not_installed_is_one_error_line(cli, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tickwheel_server.dev", None)  # import raises ImportError
    result = cli("dev")
    assert result.code == 1
    assert "`tickwheel dev` is not available" in _one_error_line(result.err)


def test_cron_without_next_is_a_usage_error(cli) -> None:
    assert cli("cron").code == 2
