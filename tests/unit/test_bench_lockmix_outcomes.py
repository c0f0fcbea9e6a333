"""The lock-mix benchmark's audit (``loadtest/bench_lockmix.py``:
``classify``, ``may_have_written``): each job's one occurrence in exactly
one terminal state, and which refused pauses its clients resume. Pure: no
store, no server.

Session 26's smoke once ended with 199 of 200 jobs counted ended and
nothing to tell why; a job whose one-off came due while a client held it
paused, before the claim took it, is skipped by design (docs/architecture.md,
Job changes, "Resume releases") and was counted as lost."""

from __future__ import annotations

import sys
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from bench_lockmix import LISTED, classify, may_have_written  # noqa: E402

RAN = [["succeeded", 1, 1, "s1", 10, None]]


def row(job: str, runs: int = 1, ended: int = 1, succeeded: int = 1, again: int = 0, reason: str | None = None,
        skips: int = 0, state: str = "completed", listed: list | None = RAN) -> tuple:
    return (job, state, runs, ended, succeeded, again, reason, skips, listed if runs else None)


def test_each_job_is_counted_in_the_one_terminal_state_it_reached() -> None:
    report = classify([
        row("ran"),
        row("paused-over-its-instant", runs=0, ended=0, succeeded=0, reason="job_paused", skips=1, state="active"),
        row("held", ended=0, succeeded=0, state="paused", listed=[["waiting", 1, 1, None, 10, None]]),
        row("never-claimed", runs=0, ended=0, succeeded=0, state="active"),
        row("redelivered", again=1, listed=[["succeeded", 1, 2, "s1", 10, None]]),
    ])
    assert report["ended"] == 2
    assert report["skipped"] == {"job_paused": 1}
    assert [u["job"] for u in report["unended"]] == ["held", "never-claimed"]
    assert report["unended"][0] == {"job": "held", "state": "paused", "executions": [["waiting", 1, 1, None, 10, None]]}
    assert report["twice"] == []
    assert report["redelivered"] == 1
    assert report["dropped"] == 3  # no succeeded execution: the skipped one and the two unended


@pytest.mark.parametrize("runs, skips", [(2, 0), (1, 1), (0, 2)])
def test_two_executions_or_an_execution_and_a_skip_are_twice_not_ended(runs: int, skips: int) -> None:
    report = classify([row("both", runs=runs, ended=runs, succeeded=runs, reason="job_paused" if skips else None,
                           skips=skips)])
    assert [t["job"] for t in report["twice"]] == ["both"]
    assert report["ended"] == 0 and report["skipped"] == {} and report["unended"] == []


def test_the_lists_are_cut_and_the_counts_are_not() -> None:
    report = classify([row(f"j{i}", ended=0, succeeded=0, state="paused") for i in range(LISTED + 5)])
    assert len(report["unended"]) == LISTED
    assert report["dropped"] == LISTED + 5


@pytest.mark.parametrize("code, details, written", [
    (grpc.StatusCode.UNAVAILABLE, "the store is unavailable (refusing locks (lock timeout)); nothing was written; "
                                  "retry later", False),
    (grpc.StatusCode.UNAVAILABLE, "the store did not answer the commit: the change may or may not have been made",
     True),
    (grpc.StatusCode.UNAVAILABLE, "Socket closed", True),
    (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True),
    (grpc.StatusCode.INTERNAL, "", True),
    (grpc.StatusCode.NOT_FOUND, "job not found", False),
    (grpc.StatusCode.FAILED_PRECONDITION, "version", False),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "request rate", False),
])
def test_a_pause_whose_answer_does_not_say_nothing_was_written_may_have_paused(
        code: grpc.StatusCode, details: str, written: bool) -> None:
    assert may_have_written(code, details) is written
