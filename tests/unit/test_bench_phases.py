"""The benchmarks sum ``pg_stat_statements`` by phase of an execution's life
(claim, hand-out, start, outcome; ``loadtest/_harness.phase_of``): each
statement the store sends on those paths, as ``pg_stat_statements`` prints
it (driver placeholders and constants as ``$n``), lands in its phase."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tickwheel_server.store import arming, attempt_writes, claim_handout, claim_reads, claim_writes, handout
from tickwheel_server.store import handout_starts, handout_tenants, isolation, outcomes, partitions, plain_successes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from _harness import PHASES, phase_of  # noqa: E402


def printed(statement: str) -> str:
    """``statement`` as ``pg_stat_statements`` prints it: every placeholder
    and literal a ``$n`` (the numbers do not matter here)."""
    statement = re.sub(r"%\(\w+\)[sb]|:\w+\b|'[^']*'", "$1", statement)
    return re.sub(r"\b\d+\b", "$1", statement)


def _text(statement) -> str:
    return statement if isinstance(statement, str) else str(statement)


STORE = {
    "claim": [
        *claim_reads.DUE_SQL.values(), claim_reads._SPECS, claim_writes._INSERT_FROM_ARRAYS,
        claim_writes._INSERT_HANDED_OUT_FROM_ARRAYS, claim_writes._ADVANCE_FROM_ARRAYS,
        claim_writes._ADVANCE_WITH_NOMINAL_FROM_ARRAYS, claim_writes._EXTEND_FROM_ARRAYS, claim_handout._BUSY_JOBS,
        *claim_handout._TENANTS.values(), *partitions._CHECK_EPOCHS.values(),
    ],
    "hand_out": [
        handout._LATERAL_PICK, handout._TAKE_BY_ID, handout._TAKEN_ROWS, handout_tenants._READY_TENANTS, arming._ARM,
        handout_starts._BUSY_SHARED, handout_starts._NOT_STARTED,
    ],
    "start": [arming._START],
    "outcome": [
        outcomes._RESULT_ROWS, outcomes._RECORD_OUTCOMES, attempt_writes._INSERT_ATTEMPTS, outcomes._JOB_SPECS,
        plain_successes.RECORD_SUCCESSES, isolation._JOBS_WITH_WAITERS,
    ],
}


@pytest.mark.parametrize("phase", list(STORE))
def test_each_statement_of_a_phase_lands_in_it(phase: str) -> None:
    for statement in STORE[phase]:
        text = printed(_text(statement))
        assert phase_of(text) == phase, text


@pytest.mark.parametrize("query, phase", [
    ("BEGIN ISOLATION LEVEL READ COMMITTED", "transaction"),
    ("COMMIT", "transaction"),
    ("SET LOCAL lock_timeout = '1000ms'", "transaction"),
    ("SELECT executions.owner FROM executions WHERE executions.status = $2 GROUP BY executions.owner", "other"),
    ("", "other"),
])
def test_what_serves_no_phase_is_apart(query: str, phase: str) -> None:
    assert phase_of(query) == phase


def test_the_phases_are_named_once() -> None:
    names = [name for name, _ in PHASES]
    assert len(names) == len(set(names)) and "other" not in names
