"""A plain success taken straight into its statement's columns
(``PlainSuccesses.add``) is the record ``attempt_row`` makes of it, column
for column, and the SQLite rows carry the update ``succeeded`` makes."""

from __future__ import annotations

import pytest

from tickwheel_server.store.executions import OUTPUT_KEPT_BYTES, attempt_row
from tickwheel_server.store.outcomes import _ResultRow
from tickwheel_server.store.plain_successes import (
    SUCCESS_ARRAYS, PlainSuccesses, on_row, plain_success, succeeded,
)

NOW_US = 1_765_000_010_000_000


def row(handed_out_at: int | None, waiting_since: int | None, ident: str = "e1") -> _ResultRow:
    return _ResultRow(ident, "job_1", "acme", 3, "running", 2, 1, 1_765_000_000_000_000, 1_765_000_001_000_000,
                      handed_out_at, None, waiting_since, None, None, "echo", None, None)


CASES = [  # row, worker id, worker's start, output
    (row(1_765_000_002_000_000, None), "worker-1", 1_765_000_002_100_000, b""),
    (row(None, None), "w", None, b"done"),  # never handed out: started now
    (row(1_765_000_002_000_000, 1_765_000_001_500_000), "w", None, b"x" * (OUTPUT_KEPT_BYTES + 7)),
    (row(1_765_000_002_000_000, 1_765_000_003_000_000), "", -5, b"\x00\\\""),  # waited since after its start: 0
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_success_taken_by_column_is_its_attempt_row(case: int) -> None:
    executed, worker, worker_started, output = CASES[case]
    record = attempt_row(executed, "succeeded", worker, "", NOW_US, worker_started, output)
    taken, recorded = PlainSuccesses(), PlainSuccesses()
    taken.add(executed, worker, worker_started, output, NOW_US)
    recorded.add_record(executed, record)
    expected = {name: [record[key]] for name, _, _, key in SUCCESS_ARRAYS}
    expected["outputs"] = [None if record["output"] is None else "\\x" + record["output"].hex()]
    assert taken.parameters(NOW_US) == recorded.parameters(NOW_US) == {**expected, "finished": NOW_US}
    update = succeeded(executed, NOW_US)
    assert plain_success(update, executed, NOW_US)
    assert taken.updates(NOW_US) == [{**update, **on_row(record)}]


def test_a_batch_keeps_its_order() -> None:
    successes = PlainSuccesses()
    rows = [row(1_765_000_002_000_000 + i, None, f"e{i}") for i in range(3)]
    for executed in rows:
        successes.add(executed, "w", None, b"", NOW_US)
    assert len(successes) == 3
    assert successes.parameters(NOW_US)["ids"] == ["e0", "e1", "e2"]
    assert successes.parameters(NOW_US)["started"] == [1_765_000_002_000_000 + i for i in range(3)]
