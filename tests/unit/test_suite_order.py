"""The order in which tests/conftest.py hands the suite's modules to the
pytest-xdist workers: the toolchain unit, then the modules that wait real
minutes, the other integration modules, conformance, unit; and every module
its rules name exists (a renamed file would drop out of its rule silently)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REAL_MINUTES_MODULES, TOOLCHAIN_MODULES, TOOLCHAIN_UNIT, _rank, work_unit_of

REPO = Path(__file__).resolve().parents[2]


def test_every_module_named_by_a_rule_exists() -> None:
    missing = sorted(path for path in TOOLCHAIN_MODULES | REAL_MINUTES_MODULES if not (REPO / path).is_file())
    assert not missing, missing


def test_the_minute_waiting_modules_come_right_after_the_toolchains() -> None:
    nodeids = [
        "tests/unit/test_ids.py::test_a",
        "tests/conformance/test_x.py::test_b[sqlite]",
        "tests/integration/test_admin_ops.py::test_c",
        "tests/integration/test_resume_late_api.py::test_d",
        "tests/integration/test_overlap.py::test_e",
        "tests/integration/test_sdk_go.py::test_f",
        "tests/integration/test_api_faults.py::test_g",
    ]
    ordered = sorted(nodeids, key=_rank)
    assert [work_unit_of(nodeid) for nodeid in ordered] == [
        TOOLCHAIN_UNIT,
        "tests/integration/test_resume_late_api.py", "tests/integration/test_overlap.py",
        "tests/integration/test_admin_ops.py", "tests/integration/test_api_faults.py",
        "tests/conformance/test_x.py",
        "tests/unit/test_ids.py",
    ]  # fmt: skip
