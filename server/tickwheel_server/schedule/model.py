"""What the engine takes (:class:`Schedule`) and returns (:class:`Fire`).

Both are immutable values. Instants are aware ``datetime`` objects; the
engine returns them in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, NamedTuple

from .dst import GapPolicy, RepeatPolicy, offset_text
from .errors import ScheduleError


class ScheduleKind(str, Enum):
    """How a schedule names its instants."""

    CRON = "cron"
    """A five-field cron expression in an IANA zone, recurring."""
    ONCE = "once"
    """One UTC instant."""
    LOCAL = "local"
    """One wall time in an IANA zone, resolved by the DST policy."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A job's schedule and the job fields that shape its fires.

    Fields:

    - ``kind``: cron, once or local (see :class:`ScheduleKind`).
    - ``expression``: the cron expression (kind cron only).
    - ``zone``: IANA zone key; ``"UTC"`` by default (cron), required for local.
    - ``at``: kind once, an aware instant; kind local, a naive wall time.
    - ``gap``, ``repeat``: the job's DST policy (``auto`` by default).
    - ``exact``: no jitter at all (wins over ``jitter_window``).
    - ``jitter_window``: the jitter window; ``None`` means the default
      (60 s for cron, none for one-offs). At most one hour.
    - ``start_at``: no fire is nominally before it (inclusive bound).
    - ``end_at``: no fire is nominally at or after it (exclusive bound).
    - ``max_runs``: the schedule ends after this many fires; 0 is unlimited.
    - ``job_id``: seeds ``H`` and jitter; empty for an unsaved schedule (then
      ``H`` is refused and jitter is zero).
    """

    kind: ScheduleKind = ScheduleKind.CRON
    expression: str = ""
    zone: str = "UTC"
    at: datetime | None = None
    gap: GapPolicy = GapPolicy.AUTO
    repeat: RepeatPolicy = RepeatPolicy.AUTO
    exact: bool = False
    jitter_window: timedelta | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int = 0
    job_id: str = ""

    @classmethod
    def cron(cls, expression: str, zone: str = "UTC", **fields: Any) -> Schedule:
        """A recurring cron schedule."""
        return cls(kind=ScheduleKind.CRON, expression=expression, zone=zone or "UTC", **fields)

    def for_job(self, job_id: str) -> Schedule:
        """This schedule for job ``job_id`` (every other field the same)."""
        return Schedule(
            self.kind, self.expression, self.zone, self.at, self.gap, self.repeat, self.exact, self.jitter_window,
            self.start_at, self.end_at, self.max_runs, job_id,
        )

    @classmethod
    def once(cls, at: datetime, **fields: Any) -> Schedule:
        """A one-off schedule at an aware instant."""
        return cls(kind=ScheduleKind.ONCE, at=at, **fields)

    @classmethod
    def local(cls, wall: datetime, zone: str, **fields: Any) -> Schedule:
        """A one-off schedule at a naive wall time in ``zone``."""
        return cls(kind=ScheduleKind.LOCAL, at=wall, zone=zone, **fields)


_FIELDS = ("kind", "expression", "zone", "at", "gap", "repeat", "exact", "jitter_window", "start_at", "end_at",
           "max_runs", "job_id")
if tuple(field.name for field in fields(Schedule)) != _FIELDS:  # a field added or moved: schedule_in_order follows
    raise TypeError(f"schedule_in_order writes {_FIELDS}, Schedule has {tuple(f.name for f in fields(Schedule))}")
(_set_kind, _set_expression, _set_zone, _set_at, _set_gap, _set_repeat, _set_exact, _set_jitter_window,
 _set_start_at, _set_end_at, _set_max_runs, _set_job_id) = (Schedule.__dict__[name].__set__ for name in _FIELDS)


def schedule_in_order(
    kind: ScheduleKind, expression: str, zone: str, at: datetime | None, gap: GapPolicy, repeat: RepeatPolicy,
    exact: bool, jitter_window: timedelta | None, start_at: datetime | None, end_at: datetime | None,
    max_runs: int, job_id: str,
) -> Schedule:
    """``Schedule(...)`` with every field given in order: the same value.

    The frozen dataclass's ``__init__`` calls ``object.__setattr__`` once a
    field; this writes each slot directly, which is what that call does in
    the end. For the claim, which builds one for every job its definition
    cache has not seen (every one-off)."""
    schedule = object.__new__(Schedule)
    _set_kind(schedule, kind)
    _set_expression(schedule, expression)
    _set_zone(schedule, zone)
    _set_at(schedule, at)
    _set_gap(schedule, gap)
    _set_repeat(schedule, repeat)
    _set_exact(schedule, exact)
    _set_jitter_window(schedule, jitter_window)
    _set_start_at(schedule, start_at)
    _set_end_at(schedule, end_at)
    _set_max_runs(schedule, max_runs)
    _set_job_id(schedule, job_id)
    return schedule


class Fire(NamedTuple):
    """One occurrence of a schedule.

    ``nominal_at`` is the occurrence's identity (execution ids and the
    ``Tickwheel-Scheduled-At`` header use it); ``due_at`` is ``nominal_at`` plus
    the job's jitter, the earliest hand-out instant. ``utc_offset`` is the
    zone's offset in seconds at ``nominal_at``. ``note`` is empty, or says how
    a DST rule shaped this fire.
    """

    nominal_at: datetime
    due_at: datetime
    utc_offset: int
    note: str = ""

    @property
    def local_at(self) -> datetime:
        """``nominal_at`` on the zone's wall clock, with a fixed UTC offset."""
        return self.nominal_at.astimezone(timezone(timedelta(seconds=self.utc_offset)))

    @property
    def local_text(self) -> str:
        """``local_at`` as RFC 3339, e.g. ``"2027-03-28T02:00:00+01:00"``."""
        wall = self.nominal_at.replace(tzinfo=None) + timedelta(seconds=self.utc_offset)
        return wall.isoformat(timespec="seconds") + offset_text(self.utc_offset)


_LOCAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?")


def parse_local_time(text: str) -> datetime:
    """Parse ``LocalTimeSchedule.local_time``: ``"2027-03-28T02:30"`` or with seconds.

    Returns a naive wall time. Raises :class:`ScheduleError` on
    ``schedule.local.local_time`` for anything else (an offset, a fraction, a
    date that does not exist).
    """
    if not _LOCAL_TIME.fullmatch(text):
        raise ScheduleError(
            "schedule.local.local_time", f"{text!r} is not a local date and time like 2027-03-28T02:30:00"
        )
    try:
        return datetime.fromisoformat(text)
    except ValueError as error:
        raise ScheduleError("schedule.local.local_time", f"{text!r} is not a valid date and time: {error}") from None
