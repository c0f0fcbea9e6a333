"""The rules in ``tickwheel_server.policy`` are pure: importing any of them, in
a fresh interpreter, loads no SQLAlchemy, no gRPC and no clock (protobuf
messages are fine: they are values)."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import pytest

import tickwheel_server.policy

MODULES = sorted(f"tickwheel_server.policy.{info.name}" for info in pkgutil.iter_modules(tickwheel_server.policy.__path__))
FORBIDDEN = ("sqlalchemy", "grpc", "tickwheel.shared.clock")
"""Top-level names (and everything under them) no rule may load."""

PROBE = """
import importlib, sys
importlib.import_module(sys.argv[1])
forbidden = sys.argv[2:]
print("\\n".join(sorted(n for n in sys.modules if any(n == f or n.startswith(f + ".") for f in forbidden))))
"""


def test_every_rule_module_is_found() -> None:
    names = {name.rsplit(".", 1)[1] for name in MODULES}
    assert {"admission", "breaker", "fairness", "jobchanges", "misfire", "ownership", "retry"} <= names


@pytest.mark.parametrize("module", MODULES)
def test_a_rule_imports_no_store_wire_or_clock(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module, *FORBIDDEN], capture_output=True, text=True, env=dict(os.environ),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [], f"{module} loads {result.stdout.split()}"
