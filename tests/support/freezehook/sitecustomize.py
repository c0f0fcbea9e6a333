"""Stops a ``tickwheel server``'s own process (SIGSTOP) once, in the middle
of a transaction that holds row locks, as a VM stall or an operator's
SIGSTOP would: for tests/integration/test_frozen_locks.py.

Loaded by Python at start when this folder is first on ``PYTHONPATH``; it
does nothing unless ``TICKWHEEL_TEST_FREEZE_MARK=PATH`` is set and the
process is a ``tickwheel server``. Then the first result batch that locks
its executions' rows (``store/outcomes.py``, the read ``FOR UPDATE`` by id)
writes what it locked to ``PATH`` (JSON, whole once it exists: an ``[id,
delivery, status]`` per row, as that read saw them inside the locking
transaction) and stops the process right after that read, before the
batch's writes and COMMIT:
every thread stops, the transaction's session stays idle in it, holding the
rows. A SIGCONT resumes it where it stopped. Never loaded outside tests.
"""

from __future__ import annotations

import os
import sys


def _install(mark: str) -> None:
    import json
    import signal
    import threading

    from tickwheel_server.store import outcomes

    execute_arrays = outcomes.execute_arrays
    once = threading.Lock()

    class Replay:
        """The rows a result held, read again as ``base.tuples`` reads a result."""

        def __init__(self, rows: list) -> None:
            self.cursor, self._rows = self, rows

        def fetchall(self) -> list:
            return self._rows

        def close(self) -> None:
            pass

    def freezing_execute_arrays(conn, statement, parameters):  # noqa: ANN001, ANN202
        result = execute_arrays(conn, statement, parameters)
        if statement == outcomes._RESULT_ROWS and once.acquire(blocking=False):
            rows = outcomes.tuples(result)
            with open(mark + ".part", "w") as out:
                json.dump([[row.id, row.delivery, row.status] for row in (outcomes._ResultRow(*r) for r in rows)], out)
            os.replace(mark + ".part", mark)
            os.kill(os.getpid(), signal.SIGSTOP)
            return Replay(rows)
        return result

    outcomes.execute_arrays = freezing_execute_arrays


if os.environ.get("TICKWHEEL_TEST_FREEZE_MARK") and "server" in sys.argv[1:2]:
    _install(os.environ["TICKWHEEL_TEST_FREEZE_MARK"])
