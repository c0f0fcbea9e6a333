"""Shared fixtures.

Real services are started once per test session by the plugins below, on free
loopback ports in a temporary folder, and stopped at the end:
``tests.support.postgres`` (fixture ``postgres_url``: a fresh database per test)
and ``tests.support.etcd`` (fixture ``etcd_endpoint``: a running etcd, with a
per-test key prefix from ``etcd_prefix``).
"""

pytest_plugins = ["tests.support.postgres", "tests.support.etcd"]
