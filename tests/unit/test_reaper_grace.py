"""The reaper's grace: the session TTL unless set (``--reaper-grace``,
``TICKWHEEL_REAPER_GRACE``), bounded, and refused by name when out of bounds."""

from __future__ import annotations

import pytest

from tickwheel_server.config import ConfigError, load_server_config

from .policy.test_breaker import CONFIG_ENV, server_args


def test_the_reaper_grace_comes_from_defaults_environment_and_flags() -> None:
    assert load_server_config(server_args(), CONFIG_ENV).reaper_grace == 0.0  # the session TTL
    assert load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_REAPER_GRACE": "120"}).reaper_grace == 120.0
    assert load_server_config(server_args("--reaper-grace", "2.5"), CONFIG_ENV).reaper_grace == 2.5


@pytest.mark.parametrize("value", ["-1", "3601", "nan"])
def test_a_reaper_grace_out_of_bounds_stops_the_server_naming_it(value) -> None:
    with pytest.raises(ConfigError, match=r"reaper_grace \(--reaper-grace\): must be between 0"):
        load_server_config(server_args("--reaper-grace", value), CONFIG_ENV)
    with pytest.raises(ConfigError, match=r"reaper_grace"):
        load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_REAPER_GRACE": "later"})
