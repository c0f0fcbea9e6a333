"""The Java SDK's one build folder for the test run: Maven goals run on it under the example worker's lock.

sdk/java is 350 source files (most of them generated from the protos); a cold
compile costs about 37 s of CPU, an up-to-date one (Maven's "Nothing to
compile") about 6 s. The example worker's `run` script builds the SDK into
``.build/sdk`` beside it, under a lock on ``.build/.lock``, and builds again
only when a source changed. test_sdk_java.py (main and test classes, JUnit)
and test_sdk_packages.py (`mvn install`) run their goals on that same folder,
under the same lock, so the SDK's main classes are compiled once a run (and
not at all in a kept checkout whose sources did not change), not three times.
The run script's digest stamp still decides its own rebuild; Maven's own
up-to-date check finds the classes compiled.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.server import REPO

SDK = REPO / "sdk" / "java"
MVN = shutil.which("mvn") or "/usr/bin/mvn"
EXAMPLE_BUILD = SDK / "examples" / "worker" / ".build"
"""The example worker's build folder (its `run` script's default, which the tests never override)."""
SDK_BUILD = EXAMPLE_BUILD / "sdk"
"""Where Maven builds the SDK (``-Dtickwheel.build.dir``): ``classes``, ``test-classes``, the jar."""


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Held while Maven writes :data:`SDK_BUILD`: the lock the `run` script's build takes."""
    EXAMPLE_BUILD.mkdir(parents=True, exist_ok=True)
    with open(EXAMPLE_BUILD / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def mvn(*goals: str, cwd: Path = SDK, timeout: float = 900) -> subprocess.CompletedProcess:
    """``mvn -q -B GOALS`` in ``cwd`` on the SDK's build folder, under :func:`build_lock`."""
    with build_lock():
        return subprocess.run(
            [MVN, "-q", "-B", "-Dstyle.color=never", f"-Dtickwheel.build.dir={SDK_BUILD}", *goals],
            cwd=cwd, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
