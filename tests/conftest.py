"""Shared fixtures.

Real services are started once per test session by the plugins below, on free
loopback ports in a temporary folder, and stopped at the end:
``tests.support.postgres`` (fixture ``postgres_url``: a fresh database per test;
``migrated_postgres_url``: one holding the schema already)
and ``tests.support.etcd`` (fixture ``etcd_endpoint``: a running etcd, with a
per-test key prefix from ``etcd_prefix``). ``tests.support.sqlite`` hands out
migrated SQLite files (``migrated_sqlite_url``).
"""

pytest_plugins = ["tests.support.postgres", "tests.support.etcd", "tests.support.etcd_cluster", "tests.support.sqlite"]

import os

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis profiles: ``ci`` (the default; 100 examples, no deadline, so the
# suite stays fast on two cores) and ``thorough`` (a long local run:
# ``HYPOTHESIS_PROFILE=thorough``).
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.filter_too_much]
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# ------------------------------------------------------------ pytest-xdist
# scripts/test.sh runs the suite on several pytest-xdist workers. Each worker
# is a process of its own with its own PostgreSQL and etcd (the plugins above
# start them per session, on free ports, in folders of their own), so a
# test's fixtures are never shared with a test running beside it. What stays
# shared is outside those fixtures: the SDKs' toolchains and the builds in the
# tree (sdk/typescript/dist, sdk/java's example build, ~/.m2, the Go caches).
# So the scheduler below hands out whole modules, never single tests:
#
# - each module runs whole on one worker, so a module-scoped fixture (a Maven
#   build, the wheels, a `tickwheel dev`) is still set up once;
# - the modules that build or run an SDK's toolchain are one unit of work, so
#   no two of them build at once;
# - units are handed out longest first, roughly: that toolchain unit, then
#   the modules that wait real minutes (below), the other integration
#   modules, the conformance modules, the unit tests last, so that a long
#   module does not start last and leave the other workers idle.
TOOLCHAIN_UNIT = "toolchains"
TOOLCHAIN_MODULES = frozenset({
    "tests/integration/test_sdk_go.py",
    "tests/integration/test_sdk_java.py",
    "tests/integration/test_sdk_packages.py",
    "tests/integration/test_sdk_typescript.py",
    "tests/integration/test_worker_languages.py",
})  # fmt: skip
REAL_MINUTES_MODULES = frozenset({
    "tests/integration/test_overlap.py",
    "tests/integration/test_resume_late_api.py",
})  # fmt: skip
"""Modules whose tests wait for real minute boundaries (cron is minute-grained):
minutes that a quiet machine does not shorten as it shortens the rest, so
such a module, handed out among the others, may end alone after them
(loadtest/RESULTS.md, "suite time"). Handed out right after the toolchains."""
_RANK = {"integration": 2, "conformance": 3, "unit": 4}


def work_unit_of(nodeid: str) -> str:
    """The unit of work (for the xdist scheduler) that the test ``nodeid`` belongs to: its module, or
    :data:`TOOLCHAIN_UNIT`."""
    module = nodeid.split("::", 1)[0]
    return TOOLCHAIN_UNIT if module in TOOLCHAIN_MODULES else module


def _rank(nodeid: str) -> int:
    unit = work_unit_of(nodeid)
    if unit == TOOLCHAIN_UNIT:
        return 0
    if unit in REAL_MINUTES_MODULES:
        return 1
    parts = nodeid.split("/")
    return _RANK.get(parts[1], 5) if len(parts) > 2 and parts[0] == "tests" else 5


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the scheduler hands out units in this order
        items.sort(key=lambda item: _rank(item.nodeid))  # stable: every worker collects the same order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist") not in ("load", "loadfile", "loadscope", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with :func:`work_unit_of` as the scope, in collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit_of(nodeid)

    config.option.loadscopereorder = False  # keep the order above, not "most tests first"
    return ModuleScheduling(config, log)
