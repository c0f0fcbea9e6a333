"""The server's store lock limits as configured: ``store_lock_timeout`` and
``store_idle_in_transaction_timeout`` from flags, the environment and the
config file, bounded (0 leaves them to the database)."""

from __future__ import annotations

import pytest

from tickwheel_server.config import ConfigError, load_server_config
from tests.unit.test_webhook_config import ENV, server_args


def test_defaults_flags_environment_and_file(tmp_path) -> None:
    config = load_server_config(server_args(), ENV)
    assert (config.store_lock_timeout, config.store_idle_in_transaction_timeout) == (1.0, 60.0)
    flags = load_server_config(server_args("--store-lock-timeout", "2.5", "--store-idle-in-transaction-timeout", "0"),
                               ENV)
    assert (flags.store_lock_timeout, flags.store_idle_in_transaction_timeout) == (2.5, 0.0)
    env = {**ENV, "TICKWHEEL_STORE_LOCK_TIMEOUT": "0", "TICKWHEEL_STORE_IDLE_IN_TRANSACTION_TIMEOUT": "120"}
    from_env = load_server_config(server_args(), env)
    assert (from_env.store_lock_timeout, from_env.store_idle_in_transaction_timeout) == (0.0, 120.0)
    file = tmp_path / "server.toml"
    file.write_text("store_lock_timeout = 0.5\nstore_idle_in_transaction_timeout = 30\n")
    from_file = load_server_config(server_args("--config", str(file)), ENV)
    assert (from_file.store_lock_timeout, from_file.store_idle_in_transaction_timeout) == (0.5, 30.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--store-lock-timeout", "-1"), r"store_lock_timeout \(--store-lock-timeout\): must be between 0"),
        (("--store-lock-timeout", "601"), r"store_lock_timeout \(--store-lock-timeout\): must be between 0"),
        (("--store-lock-timeout", "nan"), r"store_lock_timeout \(--store-lock-timeout\): must be between 0"),
        (("--store-idle-in-transaction-timeout", "-0.5"), r"store_idle_in_transaction_timeout .*between 0"),
        (("--store-idle-in-transaction-timeout", "86401"), r"store_idle_in_transaction_timeout .*between 0"),
        (("--listen", "127.0.0.1:\u00b2"), r"listen: .* is not HOST:PORT"),  # isdigit's, not int's: a traceback
        (("--listen", "127.0.0.1:\u0663"), r"listen: .* is not HOST:PORT"),  # int's 3, not a port gRPC reads
        (("--http-listen", "127.0.0.1:\u00b2"), r"http_listen \(--http-listen\): .* is not HOST:PORT"),
    ],
)
def test_out_of_bounds_is_refused_naming_the_setting(argv, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_server_config(server_args(*argv), ENV)


def test_a_value_that_is_no_number_is_refused() -> None:
    with pytest.raises(ConfigError, match="store_lock_timeout: 'soon' is not a number"):
        load_server_config(server_args(), {**ENV, "TICKWHEEL_STORE_LOCK_TIMEOUT": "soon"})


@pytest.mark.parametrize(
    ("argv", "limit"),
    [
        ((), 10.0),  # 60 s configured, the session TTL lower: a frozen server's locks last one session
        (("--store-idle-in-transaction-timeout", "600"), 10.0),
        (("--store-idle-in-transaction-timeout", "0"), 10.0),  # not left to the database: the TTL
        (("--store-idle-in-transaction-timeout", "2.5"), 2.5),  # lower than the TTL: as set
        (("--store-idle-in-transaction-timeout", "600", "--session-ttl", "30"), 30.0),
    ],
)
def test_the_idle_limit_in_force_is_never_past_the_session_ttl(argv, limit) -> None:
    assert load_server_config(server_args(*argv), ENV).store_idle_limit == limit
