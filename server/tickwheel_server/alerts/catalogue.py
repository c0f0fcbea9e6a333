"""The alert catalogue: the kinds of alert, their deduplication keys and
the constructors of what each raiser raises (pure: no SQL, no clock read).

One alert per condition while it lasts, named by its key
(``<kind>:<subject>``): raising a key again while its alert is open counts a
repeat, resolving it closes the alert (``docs/architecture.md``, "Alerts").
The rows are kept by :mod:`tickwheel_server.store.alerts`; the loops that
raise and resolve them live beside this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwheel.shared.ids import to_us

ALERT_KINDS = (
    "late", "skipped", "dead_letter", "poison", "circuit_open", "partition_unowned", "clock_skew", "tzdata_shift",
    "job_unreadable", "schedule_uncomputable", "calendar_runs_changed", "etcd_nospace",
)  # fmt: skip
"""The kinds of alert, as ``tickwheel.v1.AlertKind`` names them (lower case, without the prefix)."""
SEVERITIES = ("info", "warning", "critical")
MAX_ERROR_DETAIL = 1024


def late_key(job_id: str) -> str:
    """The key of a job's lateness alert (one per job, however many of its occurrences wait)."""
    return f"late:{job_id}"


def dead_letter_key(execution_id: str) -> str:
    """The key of an execution's dead-letter alert (resolved when it is replayed)."""
    return f"dead_letter:{execution_id}"


def poison_key(execution_id: str) -> str:
    """The key of the alert for an execution dead-lettered because it killed its workers."""
    return f"poison:{execution_id}"


def clock_skew_key(server_id: str) -> str:
    """The key of a server's clock-skew alert."""
    return f"clock_skew:{server_id}"


ETCD_NOSPACE_KEY = "etcd_nospace:etcd"
"""The key of the alert for etcd's NOSPACE alarm (one for the cluster)."""


def etcd_nospace_alert(alarms: list[str], server_id: str) -> NewAlert:
    """The alert for an etcd that raised its NOSPACE alarm (``alarms`` as
    it reports them), seen by ``server_id``."""
    return NewAlert(
        key=ETCD_NOSPACE_KEY, kind="etcd_nospace", severity="critical", server_id=server_id,
        summary="etcd reached its space quota (NOSPACE alarm) and refuses every write: sessions, elections "
                "and wake-ups stop. Compact and defragment etcd, then disarm the alarm "
                "(etcdctl alarm disarm); see docs/operations.md",
        details={"alarms": ",".join(alarms)[:200]},
    )  # fmt: skip


def skipped_key(job_id: str) -> str:
    """The key of a job's skipped-occurrences alert (one per job, whatever the reason)."""
    return f"skipped:{job_id}"


def partition_unowned_key(partition: int) -> str:
    """The key of the alert for a partition nobody owns."""
    return f"partition_unowned:{partition}"


def job_unreadable_key(job_id: str) -> str:
    """The key of the alert for a job a server cannot read (one per job, whichever server)."""
    return f"job_unreadable:{job_id}"


def schedule_uncomputable_key(job_id: str) -> str:
    """The key of the alert for a job whose next fire a server cannot compute."""
    return f"schedule_uncomputable:{job_id}"


@dataclass(frozen=True)
class NewAlert:
    """What a raiser knows about a condition. ``kind`` is one of
    :data:`ALERT_KINDS`, ``severity`` one of :data:`SEVERITIES`; the
    subjects are ``''`` when the alert concerns none."""

    key: str
    kind: str
    severity: str
    summary: str
    tenant: str = ""
    job_id: str = ""
    execution_id: str = ""
    server_id: str = ""
    details: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("an alert needs a deduplication key")
        if self.kind not in ALERT_KINDS:
            raise ValueError(f"unknown alert kind {self.kind!r}; one of {ALERT_KINDS}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown alert severity {self.severity!r}; one of {SEVERITIES}")


def calendar_runs_changed_key(tenant: str, calendar: str, version: int) -> str:
    """One alert per calendar version that changed created runs."""
    return f"calendar_runs_changed:{tenant}/{calendar}@{version}"


def calendar_runs_changed_alert(*, tenant: str, calendar: str, version: int, changed: int, runs: list[str]) -> NewAlert:
    """The alert for a calendar change (the calendar now at ``version``)
    that moved or dropped ``changed`` created runs of the jobs naming it;
    ``runs`` the first of them as the UpdateCalendar response lists them."""
    shown = "; ".join(runs)
    return NewAlert(
        key=calendar_runs_changed_key(tenant, calendar, version), kind="calendar_runs_changed", severity="info",
        summary=f"calendar {calendar} of tenant {tenant} (version {version}) moved or dropped {changed} created "
                f"run{'s' if changed != 1 else ''}",
        tenant=tenant,
        details={"calendar": calendar, "version": str(version), "changed": str(changed), "runs": shown[:4000]},
    )  # fmt: skip


def dead_letter_alert(*, execution_id: str, job_id: str, tenant: str, reason: str, error: str = "") -> NewAlert:
    """The alert for an execution dead-lettered for ``reason`` (its attempts
    ran out, or it failed permanently), ``error`` being its last attempt's."""
    details = {"reason": reason}
    if error:
        details["error"] = error[:MAX_ERROR_DETAIL]
    return NewAlert(
        key=dead_letter_key(execution_id), kind="dead_letter", severity="warning",
        summary=f"execution {execution_id} of job {job_id} is dead: {reason}",
        tenant=tenant, job_id=job_id, execution_id=execution_id, details=details,
    )  # fmt: skip


def late_alert(
    *, job_id: str, tenant: str, execution_id: str, waiting: int, ready_at: datetime, late_by: timedelta,
    threshold: timedelta,
) -> NewAlert:
    """The alert for a job with ``waiting`` executions not started within
    its lateness ``threshold``, the oldest (``execution_id``) ready since
    ``ready_at`` and waiting for ``late_by``."""
    seconds = late_by.total_seconds()
    return NewAlert(
        key=late_key(job_id), kind="late", severity="warning",
        summary=f"job {job_id} did not run: execution {execution_id} has waited {seconds:.0f} s "
        f"since it was due (threshold {threshold.total_seconds():g} s)",
        tenant=tenant, job_id=job_id, execution_id=execution_id,
        details={"waiting_executions": str(waiting), "ready_at": ready_at.isoformat(),
                 "late_by_seconds": f"{seconds:.3f}"},
    )  # fmt: skip


def poison_alert(*, execution_id: str, job_id: str, tenant: str, reason: str) -> NewAlert:
    """The alert for an execution dead-lettered as poison: its workers died
    or went silent under it more often than the cap allows. It stands for the
    dead letter too (one alert, not two)."""
    return NewAlert(
        key=poison_key(execution_id), kind="poison", severity="critical",
        summary=f"execution {execution_id} of job {job_id} kills its workers; dead-lettered: {reason}",
        tenant=tenant, job_id=job_id, execution_id=execution_id, details={"reason": reason},
    )  # fmt: skip


def skipped_alert(
    *, job_id: str, tenant: str, reason: str, from_at: datetime, to_at: datetime, count: int
) -> NewAlert:
    """The alert for ``count`` occurrences of a job, nominally from
    ``from_at`` to ``to_at``, not run because of its ``reason`` policy
    (``misfire``, ``overlap``, or ``backlog``: the job's cap of executions
    not started, :mod:`tickwheel_server.policy.backlog`). A repeat while it is open carries the
    latest range: ``to_us`` is what its resolution compares with (see
    :mod:`tickwheel_server.alerts.skipped`)."""
    return NewAlert(
        key=skipped_key(job_id), kind="skipped", severity="warning",
        summary=f"job {job_id} skipped {count} occurrence{'s' if count != 1 else ''} "
                f"({reason} policy) from {from_at.isoformat()} to {to_at.isoformat()}",
        tenant=tenant, job_id=job_id,
        details={"reason": reason, "count": str(count), "from": from_at.isoformat(), "to": to_at.isoformat(),
                 "to_us": str(to_us(to_at))},
    )  # fmt: skip


def undispatchable_alert(
    *, kind: str, job_id: str, tenant: str, version: int, reason: str, server_id: str, tzdata: str
) -> NewAlert:
    """The alert for a job the dispatcher of ``server_id`` leaves out of its
    claims: ``kind`` ``job_unreadable`` (its stored row cannot be read: a
    definition that does not parse, an enum value from a newer version, an
    impossible value) or ``schedule_uncomputable`` (its next fire cannot be
    computed with tzdata ``tzdata``). The job stays active and untouched."""
    if kind == "job_unreadable":
        key, what = job_unreadable_key(job_id), "cannot be read"
    elif kind == "schedule_uncomputable":
        key, what = schedule_uncomputable_key(job_id), "has a schedule that cannot be computed"
    else:
        raise ValueError(f"not a dispatch alert kind: {kind!r}")
    return NewAlert(
        key=key, kind=kind, severity="critical",
        summary=f"job {job_id} (version {version}) {what} by server {server_id or '-'}: {reason}; "
                "it stays active and is not dispatched until a server that can read it owns its partition "
                "or the job is updated",
        tenant=tenant, job_id=job_id, server_id=server_id,
        details={"reason": reason, "version": str(version), "tzdata": tzdata},
    )  # fmt: skip


def partition_unowned_alert(*, partition: int, since: datetime, last_owner: str) -> NewAlert:
    """The alert for ``partition`` without an owner in etcd since ``since``:
    nothing dispatches its jobs (``last_owner`` is the server that last
    raised its epoch, '' when none ever did)."""
    return NewAlert(
        key=partition_unowned_key(partition), kind="partition_unowned", severity="critical",
        summary=f"partition {partition} has had no owner since {since.isoformat()}: its jobs are not dispatched",
        server_id=last_owner,
        details={"partition": str(partition), "since": since.isoformat(), "last_owner": last_owner},
    )  # fmt: skip


@dataclass(frozen=True)
class AlertRecord:
    """An alert as stored."""

    id: str
    key: str
    kind: str
    severity: str
    tenant: str
    job_id: str
    execution_id: str
    server_id: str
    summary: str
    details: dict[str, str]
    raised_at: datetime
    last_seen_at: datetime
    count: int
    resolved_at: datetime | None
    changed_at: datetime

    @property
    def open(self) -> bool:
        return self.resolved_at is None


NOTIFY_STEPS = ("", "raised", "resolved")
"""What the webhook has sent of an alert, in the order it is sent."""


@dataclass(frozen=True)
class Owed:
    """An alert the webhook sink has not been sent all of: ``notified`` is
    what was sent so far; the raise is owed when it is ``''``, the resolve
    when the alert is resolved."""

    alert: AlertRecord
    notified: str

    @property
    def events(self) -> tuple[str, ...]:
        """What to send, in order: ``'raised'`` and/or ``'resolved'``."""
        owed = ("raised",) if self.notified == "" else ()
        return owed + (("resolved",) if self.alert.resolved_at is not None else ())


@dataclass(frozen=True)
class AlertPage:
    """One page of alerts, newest ``raised_at`` first."""

    alerts: tuple[AlertRecord, ...]
    more: bool

    @property
    def next_key(self) -> tuple[datetime, str] | None:
        """``before_key`` for the next page, or None on the last page."""
        if not self.more or not self.alerts:
            return None
        return self.alerts[-1].raised_at, self.alerts[-1].id


def checked_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """``kinds`` as a tuple; ValueError naming any that is not one of :data:`ALERT_KINDS`."""
    wanted = tuple(kinds)
    unknown = set(wanted) - set(ALERT_KINDS)
    if unknown:
        raise ValueError(f"unknown alert kinds {sorted(unknown)}")
    return wanted


def circuit_open_key(tenant: str, host: str) -> str:
    """The key of the alert for the open circuit of (tenant, target host):
    one per pair across the cluster, whichever server's breaker opened it."""
    return f"circuit_open:{tenant}:{host}"


def circuit_open_alert(*, tenant: str, host: str, reason: str, opened_at: datetime, open_for: float) -> NewAlert:
    """The alert for a circuit breaker that opened (or re-opened) at
    ``opened_at`` for ``tenant``'s calls to ``host`` because of ``reason``
    (the failure ratio, or a failed probe)."""
    resume = opened_at + timedelta(seconds=open_for)
    return NewAlert(
        key=circuit_open_key(tenant, host), kind="circuit_open", severity="warning",
        summary=f"tenant {tenant}'s calls to {host} are failing: {reason}; "
                f"its retries to {host} pause for {open_for:g} s, then probes decide",
        tenant=tenant,
        details={"host": host, "reason": reason, "opened_at": opened_at.isoformat(),
                 "probes_from": resume.isoformat(), "probes_from_us": str(to_us(resume))},
    )  # fmt: skip
