"""The heartbeat interval a server announces: its configuration takes only
what workers take (``tickwheel.shared.heartbeats``), so the two agree."""

from __future__ import annotations

import pytest

from tickwheel.shared.heartbeats import MAX_HEARTBEAT_INTERVAL, MIN_HEARTBEAT_INTERVAL, clamp_heartbeat_interval
from tickwheel_server.config import ConfigError, load_server_config

from .policy.test_breaker import CONFIG_ENV, server_args


@pytest.mark.parametrize("value", ["0.01", "301", "nan", "inf"])
def test_a_heartbeat_interval_outside_what_workers_take_stops_the_server(tmp_path, value) -> None:
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text(f"heartbeat_interval = {value}\nheartbeat_timeout = 600\n")
    with pytest.raises(ConfigError, match=r"heartbeat_interval: must be between 0.05 and 300 seconds"):
        load_server_config(server_args("--config", str(config_file)), CONFIG_ENV)


def test_the_bounds_are_what_a_worker_clamps_to(tmp_path) -> None:
    config_file = tmp_path / "tickwheel.toml"
    for value in (MIN_HEARTBEAT_INTERVAL, MAX_HEARTBEAT_INTERVAL):
        config_file.write_text(f"heartbeat_interval = {value}\nheartbeat_timeout = 600\n")
        assert load_server_config(server_args("--config", str(config_file)), CONFIG_ENV).heartbeat_interval == value
        assert clamp_heartbeat_interval(value) == value
    assert clamp_heartbeat_interval(0.001) == MIN_HEARTBEAT_INTERVAL
    assert clamp_heartbeat_interval(1e9) == MAX_HEARTBEAT_INTERVAL
