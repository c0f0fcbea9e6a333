"""Which executions may be armed ahead of their instant (policy/arming.py), table-tested."""

from __future__ import annotations

import pytest

from tickwheel_server.config import ConfigError, load_server_config
from tickwheel_server.policy.admission import Rules
from tickwheel_server.policy.arming import may_arm, runs_beside

SKIP = Rules("skip", ())
ALLOW = Rules("allow", ())
KEYED = Rules("allow", (("db", 1),))


@pytest.mark.parametrize(
    "rules, one_off, origin, allow_overlap, tenant_cap, wait_key, expected",
    [
        (SKIP, True, "scheduled", False, 0, None, True),  # a one-off's own occurrence
        (SKIP, False, "scheduled", False, 0, None, False),  # a recurring one: its predecessor may still run
        (ALLOW, False, "scheduled", False, 0, None, True),  # runs beside whatever runs
        (SKIP, False, "trigger", True, 0, None, True),  # a manual run that may overlap
        (SKIP, True, "trigger", False, 0, None, False),  # a manual run queues behind: a decision at its instant
        (SKIP, True, "backfill", False, 0, None, False),
        (Rules("replace", ()), True, "scheduled", False, 0, None, True),  # the only run of its job
        (KEYED, True, "scheduled", True, 0, None, False),  # a key is counted under its lock at the instant
        (ALLOW, True, "scheduled", False, 3, None, False),  # so is a tenant's cap
        (ALLOW, True, "scheduled", False, 0, "db", False),  # a woken waiter keeps its place in a line
        (None, True, "scheduled", True, 0, None, False),  # job gone or unreadable: the round's path
    ],
)
def test_may_arm(rules, one_off, origin, allow_overlap, tenant_cap, wait_key, expected) -> None:
    assert may_arm(rules, one_off=one_off, origin=origin, allow_overlap=allow_overlap, tenant_cap=tenant_cap,
                   wait_key=wait_key) is expected


@pytest.mark.parametrize("rules, allow_overlap, expected", [(SKIP, False, False), (SKIP, True, True), (ALLOW, False, True)])
def test_runs_beside(rules, allow_overlap, expected) -> None:
    assert runs_beside(rules, allow_overlap) is expected


def test_how_far_ahead_comes_from_defaults_environment_and_flags() -> None:
    from .test_breaker import CONFIG_ENV, server_args

    assert load_server_config(server_args(), CONFIG_ENV).arm_ahead == 10.0
    assert load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_ARM_AHEAD": "0"}).arm_ahead == 0.0
    assert load_server_config(server_args("--arm-ahead", "1.5"), CONFIG_ENV).arm_ahead == 1.5


@pytest.mark.parametrize("value", ["-1", "31", "nan"])
def test_an_arm_ahead_out_of_bounds_stops_the_server_naming_it(value) -> None:
    from .test_breaker import CONFIG_ENV, server_args

    with pytest.raises(ConfigError, match=r"arm_ahead \(--arm-ahead\): must be between 0 and 30"):
        load_server_config(server_args("--arm-ahead", value), CONFIG_ENV)
    with pytest.raises(ConfigError, match=r"arm_ahead"):
        load_server_config(server_args(), {**CONFIG_ENV, "TICKWHEEL_ARM_AHEAD": "soon"})
