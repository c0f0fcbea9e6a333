"""Secrets on the server's and migrate's command lines: they work, with a
warning naming the safer ways; the same settings from the environment or a
file say nothing."""

from __future__ import annotations

import argparse
import logging

import pytest

from tickwheel_server.cli import server as server_cli
from tickwheel_server.config import add_server_arguments, command_line_secrets, load_server_config
from tickwheel.shared.secretargs import flag_warning, url_has_password, url_may_carry_token
from tickwheel_server.store import migrate_cli
from tickwheel_server.store.errors import StoreError

PG = "postgresql+psycopg://tickwheel:s3cret@db:5432/tickwheel"


def server_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(["--etcd", "memory", *argv])


@pytest.mark.parametrize(
    ("argv", "warned"),
    [
        (["--store", PG], ["--store with a password"]),
        (["--store", "postgresql+psycopg://tickwheel@db/tickwheel"], []),
        (["--store", "sqlite:///tmp/x.db"], []),
        (["--store", "sqlite://", "--alert-webhook", "https://hooks.example.com/services/T0/B0/XyZ"],
         ["--alert-webhook (its path or query may be a token)"]),
        (["--store", "sqlite://", "--alert-webhook", "https://alerts.example.com/?token=abc"],
         ["--alert-webhook (its path or query may be a token)"]),
        (["--store", "sqlite://", "--alert-webhook", "https://alerts.example.com"], []),
    ],
)
def test_secrets_in_server_flags_are_named(argv: list[str], warned: list[str]) -> None:
    warnings = command_line_secrets(server_args(*argv))
    assert [w.partition(" on the command line")[0] for w in warnings] == warned
    assert all("visible to every local user" in w for w in warnings)


def test_the_same_secrets_from_the_environment_warn_nothing() -> None:
    args = server_args()
    env = {"TICKWHEEL_STORE": PG, "TICKWHEEL_ADMIN_TOKEN": "t" * 20,
           "TICKWHEEL_ALERT_WEBHOOK": "https://hooks.example.com/services/T0/B0/XyZ"}  # fmt: skip
    config = load_server_config(args, env)
    assert config.store == PG and command_line_secrets(args) == []


def test_the_server_logs_the_warning_once_it_has_its_logging(monkeypatch, caplog) -> None:
    started = []

    async def serve(server) -> None:
        started.append(server)

    monkeypatch.setattr(server_cli, "serve_until_signalled", serve)
    monkeypatch.setattr(server_cli, "TickwheelServer", lambda config: config)
    monkeypatch.setattr(server_cli.logs, "configure", lambda *args: None)
    monkeypatch.setenv("TICKWHEEL_ADMIN_TOKEN", "t" * 20)
    caplog.set_level(logging.WARNING, logger="tickwheel.server")
    assert server_cli.server_main(["--store", PG, "--etcd", "memory"]) == 0
    assert started and started[0].store == PG, "the flag still works"
    [record] = [r for r in caplog.records if "visible to every local user" in r.getMessage()]
    assert record.levelno == logging.WARNING and "s3cret" not in record.getMessage()
    assert "TICKWHEEL_STORE" in record.getMessage()


def test_migrate_warns_about_a_password_in_its_store_flag(monkeypatch, capsys) -> None:
    def refuse(url: str):
        raise StoreError("not reachable in this test")

    monkeypatch.setattr(migrate_cli, "create_store_engine", refuse)
    monkeypatch.delenv("TICKWHEEL_STORE", raising=False)
    assert migrate_cli.migrate_main(["--store", PG]) == 2
    err = capsys.readouterr().err
    assert err.startswith("warning: --store with a password on the command line") and "s3cret" not in err
    monkeypatch.setenv("TICKWHEEL_STORE", PG)
    assert migrate_cli.migrate_main([]) == 2
    assert "warning" not in capsys.readouterr().err


def test_url_checks() -> None:
    assert url_has_password(PG) and not url_has_password("postgresql://u@h/db") and not url_has_password("http://[")
    assert url_may_carry_token("https://h/x") and url_may_carry_token("https://h?k=v")
    assert not url_may_carry_token("https://h/") and not url_may_carry_token("http://[")
    assert flag_warning("--x", "A", "B").endswith("prefer A or B")
