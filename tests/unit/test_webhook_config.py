"""``--alert-webhook URL``: from flags, the environment and the config file,
checked when the configuration is built."""

from __future__ import annotations

import argparse

import pytest

from tickwheel_server.config import ConfigError, add_server_arguments, load_server_config

ENV = {"TICKWHEEL_ADMIN_TOKEN": "t" * 20}


def server_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(["--store", "sqlite://", "--etcd", "memory", *argv])


def test_the_webhook_url_from_file_environment_and_flags(tmp_path) -> None:
    assert load_server_config(server_args(), ENV).alert_webhook == ""
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text('alert_webhook = "https://hooks.example.com/file"\n')
    assert load_server_config(server_args("--config", str(config_file)), ENV).alert_webhook == (
        "https://hooks.example.com/file"
    )
    env = {**ENV, "TICKWHEEL_ALERT_WEBHOOK": "https://hooks.example.com/env"}
    assert load_server_config(server_args("--config", str(config_file)), env).alert_webhook == (
        "https://hooks.example.com/env"
    )
    flagged = server_args("--config", str(config_file), "--alert-webhook", "http://10.0.0.5:8080/flag")
    assert load_server_config(flagged, env).alert_webhook == "http://10.0.0.5:8080/flag"


@pytest.mark.parametrize("url", ["hooks.example.com/x", "ftp://hooks.example.com/", "https://user:pw@hooks.example.com/"])
def test_a_bad_webhook_url_stops_the_server_naming_the_setting(url: str) -> None:
    with pytest.raises(ConfigError, match=r"alert_webhook \(--alert-webhook\): "):
        load_server_config(server_args("--alert-webhook", url), ENV)
