"""The test PostgreSQL (tests/support/postgres.py) is started without a
fork() of the test process when it runs as another user.

Popen's ``user``/``group``/``extra_groups`` make Python fork() where it
otherwise vfork()s, and fork() runs every library's pthread_atfork
handlers. gRPC's, in a test process whose threads were in gRPC calls, left
the child to die of SIGSEGV before it ran postgres ("postgres exited during
start-up" with nothing logged; a PostgreSQL restart of
test_api_faults.py's creates test without its hold: the child's
faulthandler report, then the failure). The child here registers a
pthread_atfork prepare handler and counts its calls while the plugin starts
a program as the ``postgres`` user.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import ctypes, os, pwd, subprocess, sys, tempfile
from pathlib import Path
from tests.support.postgres import PostgresServer

libc = ctypes.CDLL(None)
calls = []
prepare = ctypes.CFUNCTYPE(None)(lambda: calls.append(1))
# pthread_atfork itself is a static wrapper in glibc; this is what it calls.
assert libc.__register_atfork(prepare, None, None, None) == 0
server = PostgresServer.__new__(PostgresServer)  # no initdb: only its way of starting programs
server._run_as = pwd.getpwnam("postgres")
server.base_dir = Path(tempfile.mkdtemp())
os.chmod(server.base_dir, 0o755)
out, _ = server._popen(["/bin/sh", "-c", "echo $(id -u) $(id -g) $(id -G)"], stdout=subprocess.PIPE).communicate(timeout=60)
print(out.decode().strip(), "|", len(calls))
"""


def _postgres_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("the plugin demotes PostgreSQL only when the tests run as root")
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no 'postgres' user")


def test_postgres_runs_as_its_user_without_forking_the_test_process() -> None:
    user = _postgres_user()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    identity, _, prepares = done.stdout.strip().rpartition(" | ")
    assert identity == f"{user.pw_uid} {user.pw_gid} {user.pw_gid}", "runs as postgres, in its group and no other"
    assert prepares == "0", "the child was started by fork(): every pthread_atfork handler (gRPC's) ran"
