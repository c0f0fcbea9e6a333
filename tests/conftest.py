"""Shared fixtures.

Real services are started once per test session by the plugins below, on free
loopback ports in a temporary folder, and stopped at the end:
``tests.support.postgres`` (fixture ``postgres_url``: a fresh database per test)
and ``tests.support.etcd`` (fixture ``etcd_endpoint``: a running etcd, with a
per-test key prefix from ``etcd_prefix``).
"""

pytest_plugins = ["tests.support.postgres", "tests.support.etcd"]

import os

from hypothesis import HealthCheck, settings

# Hypothesis profiles: ``ci`` (the default; 100 examples, no deadline, so the
# suite stays fast on two cores) and ``thorough`` (a long local run:
# ``HYPOTHESIS_PROFILE=thorough``).
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.filter_too_much]
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
