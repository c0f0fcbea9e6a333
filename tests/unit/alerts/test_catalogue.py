"""The alert catalogue at fixed instants: every key's form (it is stored, and
deduplicates across servers and releases), what each constructor raises,
and what a NewAlert refuses."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwheel.shared.ids import to_us
from tickwheel_server.alerts import catalogue as c

AT = datetime(2024, 3, 1, 6, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (c.late_key("job_a"), "late:job_a"),
        (c.dead_letter_key("job_a:01H"), "dead_letter:job_a:01H"),
        (c.poison_key("job_a:01H"), "poison:job_a:01H"),
        (c.clock_skew_key("s1"), "clock_skew:s1"),
        (c.skipped_key("job_a"), "skipped:job_a"),
        (c.partition_unowned_key(7), "partition_unowned:7"),
        (c.job_unreadable_key("job_a"), "job_unreadable:job_a"),
        (c.schedule_uncomputable_key("job_a"), "schedule_uncomputable:job_a"),
        (c.circuit_open_key("acme", "api.example.com"), "circuit_open:acme:api.example.com"),
    ],
)
def test_keys_keep_their_stored_form(key: str, expected: str) -> None:
    assert key == expected
    assert key.split(":", 1)[0] in c.ALERT_KINDS


@pytest.mark.parametrize(
    ("alert", "key", "kind", "severity", "subjects", "summary", "details"),
    [
        (
            c.late_alert(job_id="job_a", tenant="acme", execution_id="job_a:1", waiting=3, ready_at=AT,
                         late_by=timedelta(seconds=400.25), threshold=timedelta(minutes=5)),
            "late:job_a", "late", "warning", ("acme", "job_a", "job_a:1", ""),
            "job job_a did not run: execution job_a:1 has waited 400 s since it was due (threshold 300 s)",
            {"waiting_executions": "3", "ready_at": AT.isoformat(), "late_by_seconds": "400.250"},
        ),
        (
            c.dead_letter_alert(execution_id="job_a:1", job_id="job_a", tenant="acme", reason="attempts ran out",
                                error="x" * 5000),
            "dead_letter:job_a:1", "dead_letter", "warning", ("acme", "job_a", "job_a:1", ""),
            "execution job_a:1 of job job_a is dead: attempts ran out",
            {"reason": "attempts ran out", "error": "x" * c.MAX_ERROR_DETAIL},
        ),
        (
            c.poison_alert(execution_id="job_a:1", job_id="job_a", tenant="acme", reason="killed 3 workers"),
            "poison:job_a:1", "poison", "critical", ("acme", "job_a", "job_a:1", ""),
            "execution job_a:1 of job job_a kills its workers; dead-lettered: killed 3 workers",
            {"reason": "killed 3 workers"},
        ),
        (
            c.skipped_alert(job_id="job_a", tenant="acme", reason="misfire", from_at=AT,
                            to_at=AT + timedelta(minutes=2), count=3),
            "skipped:job_a", "skipped", "warning", ("acme", "job_a", "", ""),
            f"job job_a skipped 3 occurrences (misfire policy) from {AT.isoformat()} to "
            f"{(AT + timedelta(minutes=2)).isoformat()}",
            {"reason": "misfire", "count": "3", "from": AT.isoformat(),
             "to": (AT + timedelta(minutes=2)).isoformat(), "to_us": str(to_us(AT + timedelta(minutes=2)))},
        ),
        (
            c.partition_unowned_alert(partition=7, since=AT, last_owner="s2"),
            "partition_unowned:7", "partition_unowned", "critical", ("", "", "", "s2"),
            f"partition 7 has had no owner since {AT.isoformat()}: its jobs are not dispatched",
            {"partition": "7", "since": AT.isoformat(), "last_owner": "s2"},
        ),
        (
            c.circuit_open_alert(tenant="acme", host="api.example.com", reason="60% failed", opened_at=AT,
                                 open_for=30),
            "circuit_open:acme:api.example.com", "circuit_open", "warning", ("acme", "", "", ""),
            "tenant acme's calls to api.example.com are failing: 60% failed; "
            "its retries to api.example.com pause for 30 s, then probes decide",
            {"host": "api.example.com", "reason": "60% failed", "opened_at": AT.isoformat(),
             "probes_from": (AT + timedelta(seconds=30)).isoformat(),
             "probes_from_us": str(to_us(AT + timedelta(seconds=30)))},
        ),
    ],
)  # fmt: skip
def test_each_constructor_raises_its_alert(alert, key, kind, severity, subjects, summary, details) -> None:
    assert (alert.key, alert.kind, alert.severity) == (key, kind, severity)
    assert (alert.tenant, alert.job_id, alert.execution_id, alert.server_id) == subjects
    assert alert.summary == summary
    assert dict(alert.details) == details


def test_one_skipped_occurrence_is_singular() -> None:
    alert = c.skipped_alert(job_id="j", tenant="t", reason="overlap", from_at=AT, to_at=AT, count=1)
    assert "skipped 1 occurrence (overlap policy)" in alert.summary


@pytest.mark.parametrize(
    ("kind", "key", "what"),
    [
        ("job_unreadable", "job_unreadable:job_a", "cannot be read"),
        ("schedule_uncomputable", "schedule_uncomputable:job_a", "has a schedule that cannot be computed"),
    ],
)
def test_an_undispatchable_job_raises_the_alert_of_its_kind(kind: str, key: str, what: str) -> None:
    alert = c.undispatchable_alert(kind=kind, job_id="job_a", tenant="acme", version=4, reason="bad enum",
                                   server_id="s1", tzdata="2024a")  # fmt: skip
    assert (alert.key, alert.kind, alert.severity, alert.server_id) == (key, kind, "critical", "s1")
    assert alert.summary.startswith(f"job job_a (version 4) {what} by server s1: bad enum; ")
    assert dict(alert.details) == {"reason": "bad enum", "version": "4", "tzdata": "2024a"}


def test_only_dispatch_kinds_are_undispatchable() -> None:
    with pytest.raises(ValueError, match="not a dispatch alert kind"):
        c.undispatchable_alert(kind="late", job_id="j", tenant="t", version=1, reason="r", server_id="", tzdata="")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (dict(key="", kind="late", severity="warning"), "deduplication key"),
        (dict(key="x:1", kind="lateness", severity="warning"), "unknown alert kind"),
        (dict(key="x:1", kind="late", severity="fatal"), "unknown alert severity"),
    ],
)
def test_a_new_alert_refuses_what_the_catalogue_does_not_know(fields: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        c.NewAlert(summary="s", **fields)


def test_kinds_are_checked() -> None:
    assert c.checked_kinds(["late", "poison"]) == ("late", "poison")
    assert c.checked_kinds([]) == ()
    with pytest.raises(ValueError, match=r"unknown alert kinds \['nope'\]"):
        c.checked_kinds(["late", "nope"])


@pytest.mark.parametrize(
    ("notified", "resolved", "events"),
    [("", False, ("raised",)), ("", True, ("raised", "resolved")), ("raised", True, ("resolved",)),
     ("raised", False, ())],
)  # fmt: skip
def test_what_the_webhook_is_owed(notified: str, resolved: bool, events: tuple[str, ...]) -> None:
    record = c.AlertRecord(
        id="alr_1", key="late:j", kind="late", severity="warning", tenant="t", job_id="j", execution_id="",
        server_id="", summary="s", details={}, raised_at=AT, last_seen_at=AT, count=1,
        resolved_at=AT if resolved else None, changed_at=AT,
    )  # fmt: skip
    assert c.Owed(record, notified).events == events
