"""The circuit breaker's rule (``tickwheel_server.policy.breaker``) as tables
at fixed instants: what one call does to a closed, open or half-open circuit,
how long its retry is held, when an idle circuit closes; and the settings."""

from __future__ import annotations

import argparse
import random
from collections import deque

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.config import ConfigError, add_server_arguments, load_server_config
from tickwheel_server.policy.breaker import (
    CLOSED, HALF_OPEN, OPEN, BreakerSettings, Circuit, close, http_target_host, idle_expired, record_call, state_of,
)

SETTINGS = BreakerSettings(window=60, min_calls=20, failure_ratio=0.5, open_for=30, probes=1)
NOW = 1000.0
"""The instant every case decides at (monotonic seconds; a window bucket is 1 s)."""


class NoSpread(random.Random):
    """Every spread drawn is 0, so holds are exact."""

    def uniform(self, a: float, b: float) -> float:
        return a


def closed(calls: int, failures: int, *, at: float = NOW) -> Circuit:
    return Circuit(buckets=deque([[int(at), calls, failures]]), calls=calls, failures=failures)


def opened(until: float, probes_left: int) -> Circuit:
    return Circuit(open_until=until, probes_left=probes_left)


@pytest.mark.parametrize(
    "case, circuit, failed, started, hold, change, state",
    [
        ("closed, 19 calls all failed: under the minimum", closed(18, 18), True, NOW, None, None, CLOSED),
        ("closed, the 20th failure opens: it is the probe", closed(19, 19), True, NOW, 30.0, True, OPEN),
        ("closed, exactly the ratio opens", closed(19, 9), True, NOW, 30.0, True, OPEN),
        ("closed, under the ratio stays closed", closed(19, 9), False, NOW, None, None, CLOSED),
        ("closed, a success that completes the ratio opens, not held", closed(19, 19), False, NOW, None, True, OPEN),
        ("closed, old failures slid out of the window", closed(15, 15, at=NOW - 61), True, NOW, None, None, CLOSED),
        ("open, a failure takes the probe slot", opened(NOW + 20, 1), True, NOW, 20.0, None, OPEN),
        ("open, no probe slot: one more pause", opened(NOW + 20, 0), True, NOW, 50.0, None, OPEN),
        ("open, a success does not count", opened(NOW + 20, 0), False, NOW, None, None, OPEN),
        ("half-open, a fresh success closes", opened(NOW - 10, 0), False, NOW - 5, None, False, CLOSED),
        ("half-open, an old success decides nothing", opened(NOW - 10, 0), False, NOW - 20, None, None, HALF_OPEN),
        ("half-open, a fresh failure re-opens: the probe", opened(NOW - 10, 0), True, NOW - 5, 30.0, True, OPEN),
        ("half-open, an old failure, a probe slot left: normal backoff", opened(NOW - 10, 1), True, NOW - 20, None,
         None, HALF_OPEN),
        ("half-open, an old failure, no slot: one pause", opened(NOW - 10, 0), True, NOW - 20, 30.0, None, HALF_OPEN),
    ],
)
def test_record_call(case, circuit, failed, started, hold, change, state) -> None:
    got = record_call(circuit, SETTINGS, "a.example", failed=failed, started=started, now=NOW, rng=NoSpread())
    assert (got.hold, got.opened, state_of(circuit, NOW)) == (hold, change, state), case
    assert (got.reason != "") is (change is not None), case


def test_opening_names_the_counts_and_starts_a_fresh_window() -> None:
    circuit = closed(19, 19)
    got = record_call(circuit, SETTINGS, "a.example", failed=True, started=NOW, now=NOW, rng=NoSpread())
    assert got.reason == "20 of 20 calls in 60 s failed (100%; 50% opens it)"
    assert (circuit.calls, circuit.failures, list(circuit.buckets)) == (0, 0, [])
    assert (circuit.open_until, circuit.probes_left) == (NOW + 30, 0), "the opening failure took the probe slot"
    assert "probe call to a.example failed" in record_call(
        opened(NOW - 1, 0), SETTINGS, "a.example", failed=True, started=NOW, now=NOW, rng=NoSpread()
    ).reason


def test_held_retries_spread_over_a_tenth_of_the_pause() -> None:
    rng, twin = random.Random(3), random.Random(3)
    holds = [
        record_call(opened(NOW + 20, 0), SETTINGS, "h", failed=True, started=NOW, now=NOW, rng=rng).hold
        for _ in range(200)
    ]
    assert holds == [50.0 + twin.uniform(0, 3.0) for _ in range(200)]
    assert min(holds) < 50.3 and max(holds) > 52.7


def test_a_success_draws_no_spread() -> None:
    rng = random.Random(5)
    record_call(closed(0, 0), SETTINGS, "h", failed=False, started=NOW, now=NOW, rng=rng)
    assert rng.random() == random.Random(5).random()


@pytest.mark.parametrize(
    "case, circuit, now, idle",
    [
        ("closed", closed(5, 5), NOW + 10_000, False),
        ("open", opened(NOW, 1), NOW - 1, False),
        ("half-open, a window not yet over", opened(NOW, 0), NOW + 59.9, False),
        ("half-open, a window over", opened(NOW, 0), NOW + 60, True),
    ],
)
def test_idle_expired(case, circuit, now, idle) -> None:
    assert idle_expired(circuit, SETTINGS, now) is idle, case


@pytest.mark.parametrize(
    "case, circuit, now, state",
    [
        ("none yet", None, NOW, CLOSED),
        ("closed", closed(3, 1), NOW, CLOSED),
        ("before the pause ends", opened(NOW + 1, 0), NOW, OPEN),
        ("the instant it ends", opened(NOW, 0), NOW, HALF_OPEN),
        ("closed again", opened(NOW, 0), NOW, None),
    ],
)
def test_state_of(case, circuit, now, state) -> None:
    if state is None:
        close(circuit)
        state = CLOSED
    assert state_of(circuit, now) == state, case


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(window=0), "window"), (dict(min_calls=0), "min_calls"), (dict(failure_ratio=0), "failure_ratio"),
        (dict(failure_ratio=1.5), "failure_ratio"), (dict(open_for=0), "open_for"), (dict(probes=0), "probes"),
        (dict(max_circuits=0), "max_circuits"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        BreakerSettings(**changes)


def test_the_host_of_an_http_target_lower_case_without_port() -> None:
    job = job_pb2.Job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://API.Example.com:8443/x?y=1")))
    assert http_target_host(job) == "api.example.com"
    assert http_target_host(job_pb2.Job(target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))) == ""


def server_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(["--store", "sqlite://", "--etcd", "memory", *argv])


CONFIG_ENV = {"TICKWHEEL_ADMIN_TOKEN": "t" * 20}


def test_the_settings_from_defaults_file_environment_and_flags(tmp_path) -> None:
    assert load_server_config(server_args(), CONFIG_ENV).breaker_settings == BreakerSettings()
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text("breaker_window = 120\nbreaker_min_calls = 50\nbreaker_failure_ratio = 0.25\n")
    from_file = load_server_config(server_args("--config", str(config_file)), CONFIG_ENV).breaker_settings
    assert (from_file.window, from_file.min_calls, from_file.failure_ratio, from_file.open_for) == (120, 50, 0.25, 30)
    env = {**CONFIG_ENV, "TICKWHEEL_BREAKER_OPEN": "45", "TICKWHEEL_BREAKER_MIN_CALLS": "10"}
    flagged = server_args("--config", str(config_file), "--breaker-window", "30", "--breaker-failure-ratio", "1")
    settings = load_server_config(flagged, env).breaker_settings
    assert (settings.window, settings.min_calls, settings.failure_ratio, settings.open_for) == (30, 10, 1.0, 45)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--breaker-window", "0"), r"breaker_window \(--breaker-window\): between 1 and 3600"),
        (("--breaker-min-calls", "0"), r"breaker_min_calls \(--breaker-min-calls\): "),
        (("--breaker-failure-ratio", "1.5"), r"breaker_failure_ratio \(--breaker-failure-ratio\): "),
        (("--breaker-open", "-1"), r"breaker_open \(--breaker-open\): "),
    ],
)
def test_a_bad_setting_stops_the_server_naming_it(argv, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_server_config(server_args(*argv), CONFIG_ENV)


def test_a_setting_that_is_not_a_number_is_named(tmp_path) -> None:
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text('breaker_open = "soon"\n')
    with pytest.raises(ConfigError, match="breaker_open: 'soon' is not a number"):
        load_server_config(server_args("--config", str(config_file)), CONFIG_ENV)
