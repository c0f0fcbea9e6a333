"""The worker runtime is what tenants install: it must not need the server.

Imported in a fresh interpreter, every ``tickwheel_worker`` module loads
without ``tickwheel_server`` (nor SQLAlchemy or an etcd client) coming in
with it (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import tickwheel_worker

_PROBE = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in {"tickwheel_server", "sqlalchemy", "pyetcd", "psycopg"})
print(",".join(leaked))
"""


def test_no_worker_module_imports_the_server() -> None:
    modules = ["tickwheel_worker"] + [
        "tickwheel_worker." + info.name for info in pkgutil.iter_modules(tickwheel_worker.__path__)
    ]
    assert len(modules) > 5
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
