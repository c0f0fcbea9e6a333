"""The registry of jobs a server leaves out of its claims: bounds, versions, reasons."""

from __future__ import annotations

import pytest

from tickwheel_server.store.quarantine import (
    JOB_UNREADABLE,
    MAX_REASON,
    SCHEDULE_UNCOMPUTABLE,
    Finding,
    Quarantine,
    Unreadable,
)


def finding(job: str, version: int = 1, reason: str = "bad") -> Finding:
    return Finding(job, "acme", version, JOB_UNREADABLE, reason)


def test_excluded_by_id_and_version_and_known_once() -> None:
    q = Quarantine()
    assert q.record([finding("a"), finding("b", 3)]) == 2
    assert q.excluded_keys() == ["a@1", "b@3"]
    assert q.is_known(finding("a")) and not q.is_known(finding("a", 2)) and not q.is_known(finding("a", reason="x"))
    assert q.record([finding("a", 2)]) == 0, "a later version replaces the entry; it was excluded already"
    assert q.excluded_keys() == ["a@2", "b@3"]


def test_past_the_exclusion_bound_entries_are_known_then_move_up() -> None:
    q = Quarantine(max_excluded=2, max_known=3)
    assert q.record([finding("a"), finding("b"), finding("c"), finding("d")]) == 2
    assert q.excluded_keys() == ["a@1", "b@1"] and len(q) == 3, "c is known, d is past every bound"
    assert q.is_known(finding("c")) and not q.is_known(finding("d"))
    q.forget(["a"])
    assert q.excluded_keys() == ["b@1", "c@1"] and "a" not in q


def test_pages_walk_the_entries_in_id_order() -> None:
    q = Quarantine()
    q.record([finding(name) for name in "dcba"])
    assert [f.job_id for f in q.page("", 2)] == ["a", "b"]
    assert [f.job_id for f in q.page("b", 2)] == ["c", "d"]


@pytest.mark.parametrize("bounds", [(-1, 5), (5, 4)])
def test_bad_bounds_are_refused(bounds) -> None:
    with pytest.raises(ValueError):
        Quarantine(*bounds)


def test_a_reason_is_one_bounded_printable_line() -> None:
    error = Unreadable(SCHEDULE_UNCOMPUTABLE, "zone\x00'Mars'\n\u202e" + "x" * 10_000)
    assert error.reason.startswith("zone 'Mars' ") and len(error.reason) == MAX_REASON
    assert all(ch.isprintable() for ch in error.reason)
    assert Unreadable(JOB_UNREADABLE, "").reason == "no reason given"
    with pytest.raises(ValueError):
        Unreadable("late", "x")
