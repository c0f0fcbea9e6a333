"""Next-fire computation: cron in a zone with the DST rule, one-offs, windows.

Pure code: instants come in as arguments (nothing here reads the clock) and
go out as aware UTC datetimes; the only input besides the arguments is the
pinned time-zone database.

How a cron schedule is evaluated. A zone is a list of segments of constant
UTC offset (:class:`~tickwheel_server.schedule.zones.Zone`). Inside a segment
wall time and UTC move together, so the next fire there is the next matching
wall minute (:class:`~tickwheel_server.schedule.cron.CronMatcher`) minus the
offset, if that lands before the segment ends. Otherwise the search moves to
the next segment, applying the DST rule (:mod:`.dst`) at its start: a gap
whose skipped wall times contain a match fires once at the transition
instant when the policy shifts; after a jump back, wall times already seen
are excluded when the policy says "once". Almost every call is answered in
the first segment with one matcher call, all in integer arithmetic.

Compiled schedules (parsed expression, lookup tables, zone table) are cached
per ``(expression, zone, job id if the expression uses H)``; answers are
never cached. croniter is not used: it fires fixed-time jobs twice in a
repeated hour and computes about 4 k next fires a second (see
``loadtest/bench_next_fire.py`` for the comparison).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from functools import lru_cache, partial

from .cron import CronExpression, CronMatcher, parse_cron
from .dst import GapPolicy, RepeatPolicy, gap_shifts, repeat_note, repeat_once, shift_note, skip_note
from .errors import ScheduleError, UnknownZoneError
from .jitter import DEFAULT_CRON_WINDOW, MAX_WINDOW, jitter_delay
from .model import Fire, Schedule, ScheduleKind
from .zones import Zone, ZoneRegistry, default_registry

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ZERO = timedelta(0)
_YEAR = 366 * 86400
_PAST_OFFSETS = 2 * 86400
"""More than any two UTC offsets differ by: a transition this long before a
candidate instant ends a segment whose wall times all lie before the
candidate's wall time."""
_LOCAL_EARLIEST = datetime(1970, 1, 1)
_LOCAL_LATEST = datetime(9999, 1, 1)
"""A one-off's wall time is accepted in [_LOCAL_EARLIEST, _LOCAL_LATEST),
the range ``once_at`` takes, read as a wall time: every zone's offset is
under a day, so its instant is one a datetime holds."""
_WALL_FITS = (datetime(1, 1, 2), datetime(9999, 12, 31))
"""Wall times whose instants a datetime holds in any zone: a one-off's
wall time outside them never fires (a preview of an unchecked job)."""
_CRON = ScheduleKind.CRON
_new_fire = partial(tuple.__new__, Fire)


def _floor_seconds(instant: datetime) -> int:
    if instant.tzinfo is None:
        raise ValueError(f"instant {instant.isoformat()} must be timezone-aware")
    delta = instant - EPOCH
    return delta.days * 86400 + delta.seconds


def _ceil_seconds(instant: datetime) -> int:
    delta = instant - EPOCH
    return delta.days * 86400 + delta.seconds + (1 if delta.microseconds else 0)


def _ceil_minute(seconds: int) -> int:
    return -(-seconds // 60)


class CompiledCron:
    """One cron expression, resolved for one job's ``H``, in one zone.

    Immutable and shareable between threads and jobs with the same key.
    """

    __slots__ = ("expression", "parsed", "zone", "matcher", "next_match", "wild")

    def __init__(self, parsed: CronExpression, matcher: CronMatcher, zone: Zone) -> None:
        self.expression = parsed.text
        self.parsed = parsed
        self.matcher = matcher
        self.next_match = matcher.next_match
        self.zone = zone
        self.wild = parsed.wild

    def next_after(self, after: int, gap: GapPolicy, repeat: RepeatPolicy) -> tuple[int, int, str] | None:
        """The first fire strictly after ``after`` (seconds since the epoch).

        Returns ``(instant, utc_offset, note)`` in seconds, or ``None`` when
        nothing matches within 400 years (or before year 9999).
        """
        zone = self.zone
        next_match = self.next_match
        table = zone._table
        if after + _YEAR >= table[2]:
            table = zone.table(after)
        transitions, offsets, covered, calm_from, calm_until = table
        k = bisect_right(transitions, after)
        if after >= calm_from[k]:
            # Fast path: inside one segment, away from any repeated wall time.
            offset = offsets[k]
            wall = next_match((after + offset) // 60 + 1)
            if wall is None:
                return None
            instant = wall * 60 - offset
            if instant < calm_until[k]:
                return instant, offset, ""
        return self._next_slow(after, gap, repeat, table, k)

    def _next_slow(
        self, after: int, gap: GapPolicy, repeat: RepeatPolicy, table: tuple, k: int
    ) -> tuple[int, int, str] | None:
        """:meth:`next_after` across segment boundaries, applying the DST rule."""
        zone = self.zone
        next_match = self.next_match
        wild = self.wild
        transitions, offsets, covered = table[0], table[1], table[2]
        count = len(transitions)
        first = True
        while True:
            offset = offsets[k]
            lowest = (after + offset) // 60 + 1
            if k > 0:
                start = transitions[k - 1]
                before = offsets[k - 1]
                if not first:
                    bound = _ceil_minute(start + offset)
                    if bound > lowest:
                        lowest = bound
                    if before < offset and gap_shifts(gap, wild, offset - before):
                        skipped = next_match(_ceil_minute(start + before))
                        if skipped is not None and skipped * 60 < start + offset:
                            return start, offset, self._shift_note(start, before, offset)
                if before > offset and repeat_once(repeat, wild, before - offset):
                    bound = _ceil_minute(start + before)
                    if bound > lowest:
                        lowest = bound
            wall = next_match(lowest)
            if wall is None:
                return None
            instant = wall * 60 - offset
            if k < count:
                end = transitions[k]
                if instant >= end:
                    # No wall time in [lowest, wall) matches. A segment starting two days
                    # past the search's start and ending two days before ``instant`` has
                    # all its wall times (and its opening gap's, its repeat's) in that
                    # range: such segments are passed in one step, not a search each (a
                    # fire every 28 years crossed 56). The one right after a fall-back
                    # near the start repeats wall times before ``lowest``: never passed.
                    searched_from = lowest * 60 - offset
                    k += 1
                    if end > searched_from + _PAST_OFFSETS:
                        k = max(k, bisect_left(transitions, instant - _PAST_OFFSETS, k, count))
                    first = False
                    continue
                if offsets[k + 1] < offset and instant >= end - (offset - offsets[k + 1]):
                    return instant, offset, self._first_of_repeat_note(wall * 60, end, offset, offsets[k + 1], repeat)
            elif instant >= covered:
                transitions, offsets, covered = zone.table(instant)[:3]
                count = len(transitions)
                continue
            if k > 0 and offsets[k - 1] > offset and wall * 60 < transitions[k - 1] + offsets[k - 1]:
                start = transitions[k - 1]
                return instant, offset, repeat_note(wall * 60, start, offsets[k - 1], offset, "second")
            return instant, offset, ""

    def _walls_in(self, low: int, high: int) -> tuple[list[int], int]:
        """Matching wall times (local seconds) in ``[low, high)``: first three and count."""
        walls: list[int] = []
        total = 0
        wall = self.matcher.next_match(_ceil_minute(low))
        while wall is not None and wall * 60 < high:
            if len(walls) < 3:
                walls.append(wall * 60)
            total += 1
            wall = self.matcher.next_match(wall + 1)
        return walls, total

    def _shift_note(self, transition: int, before: int, after: int) -> str:
        walls, total = self._walls_in(transition + before, transition + after)
        return shift_note(walls, total, transition, before, after)

    def _first_of_repeat_note(self, wall: int, transition: int, before: int, after: int, repeat: RepeatPolicy) -> str:
        which = "once" if repeat_once(repeat, self.wild, before - after) else "first"
        return repeat_note(wall, transition, before, after, which)

    def skipped_between(self, low: int, high: int, gap: GapPolicy) -> list[str]:
        """Notes for gaps in ``(low, high]`` whose matching wall times did not fire."""
        transitions, offsets = self.zone.table(high)[:2]
        notes = []
        k = bisect_right(transitions, low)
        while k < len(transitions) and transitions[k] <= high:
            start, before, after = transitions[k], offsets[k], offsets[k + 1]
            if after > before and not gap_shifts(gap, self.wild, after - before):
                walls, total = self._walls_in(start + before, start + after)
                if total:
                    notes.append(skip_note(walls, total, start, before, after))
            k += 1
        return notes


class Engine:
    """Computes fires for schedules against one time-zone release.

    ``Engine()`` uses the pinned ``tzdata`` package; pass a
    :class:`ZoneRegistry` to compute against another release (a recompute
    after a tzdata update, or a test with a modified zone file). Compiled
    schedules are cached, at most ``cache_size`` of each kind (with and
    without ``H``; a full cache is emptied and refills); the cache never
    holds answers. Thread-safe: compiled schedules and zones are immutable
    once built.
    """

    def __init__(self, zones: ZoneRegistry | None = None, cache_size: int = 100_000) -> None:
        self.zones = zones or default_registry()
        self.cache_size = cache_size
        self._parse = lru_cache(maxsize=cache_size)(parse_cron)
        self._matcher = lru_cache(maxsize=cache_size)(self._build_matcher)
        # (expression, zone) -> CompiledCron, or _USES_H when the job id matters;
        # (expression, zone, job id) -> CompiledCron for expressions with H.
        self._plain: dict[tuple[str, str], object] = {}
        self._with_h: dict[tuple[str, str, str], CompiledCron] = {}

    @property
    def tzdata_version(self) -> str:
        """The IANA release this engine computes with (``"2026f"``)."""
        return self.zones.version

    def clear_cache(self) -> None:
        """Forget every compiled schedule (zones stay loaded)."""
        self._parse.cache_clear()
        self._matcher.cache_clear()
        self._plain.clear()
        self._with_h.clear()

    def cache_len(self) -> int:
        """How many compiled schedules are cached."""
        return len(self._plain) + len(self._with_h)

    def _build_matcher(self, expression: str, seed: str) -> CronMatcher:
        return CronMatcher(self._parse(expression).resolve(seed or None))

    def _build(self, expression: str, zone_key: str, seed: str) -> CompiledCron:
        try:
            zone = self.zones.get(zone_key)
        except UnknownZoneError:
            raise ScheduleError("schedule.cron.time_zone", f"unknown time zone {zone_key!r}") from None
        return CompiledCron(self._parse(expression), self._matcher(expression, seed), zone)

    def compile(self, schedule: Schedule) -> CompiledCron:
        """The compiled form of a cron schedule (cached, bounded by ``cache_size``).

        Raises :class:`ScheduleError` for a bad expression, an unknown zone,
        ``H`` without a job id, or an expression that never fires.
        """
        key = (schedule.expression, schedule.zone or "UTC")
        compiled = self._plain.get(key)
        if compiled is None:
            parsed = self._parse(schedule.expression)
            compiled = _USES_H if parsed.uses_h else self._build(key[0], key[1], "")
            if len(self._plain) >= self.cache_size:
                self._plain.clear()
            self._plain[key] = compiled
        if compiled is _USES_H:
            h_key = (key[0], key[1], schedule.job_id)
            compiled = self._with_h.get(h_key)
            if compiled is None:
                if not schedule.job_id:
                    self._parse(key[0]).resolve(None)  # raises: H needs a job id
                compiled = self._build(key[0], key[1], schedule.job_id)
                if len(self._with_h) >= self.cache_size:
                    self._with_h.clear()
                self._with_h[h_key] = compiled
        return compiled  # type: ignore[return-value]

    def fires_depend_on_job_id(self, schedule: Schedule) -> bool:
        """Whether the nominal instants of ``schedule`` depend on its job id
        (a cron expression with ``H``); due instants always do (jitter).
        When not, every job with this schedule has the same nominal fires
        (:meth:`validate` with the job id left empty says which). Raises
        :class:`ScheduleError` for a bad expression."""
        if schedule.kind is not _CRON:
            return False
        compiled = self._plain.get((schedule.expression, schedule.zone or "UTC"))
        if compiled is not None:
            return compiled is _USES_H
        return self._parse(schedule.expression).uses_h

    def next_fire(self, schedule: Schedule, after: datetime, runs_so_far: int = 0) -> Fire | None:
        """The first fire of ``schedule`` nominally strictly after ``after``.

        ``None`` when the schedule has ended: ``runs_so_far`` reached
        ``max_runs``, the next fire is at or after ``end_at``, a one-off's
        instant has passed, or nothing ever matches again. Fires are never
        nominally before ``start_at``. ``after`` must be aware
        (``ValueError`` otherwise). Raises :class:`ScheduleError` when the
        schedule is invalid (see :meth:`validate`, which also checks the
        cheap fields).
        """
        if schedule.max_runs and runs_so_far >= schedule.max_runs:
            return None
        if schedule.kind is not _CRON:
            return self._next_one_off(schedule, after)
        if after.tzinfo is None:
            raise ValueError(f"instant {after.isoformat()} must be timezone-aware")
        delta = after - EPOCH
        low = delta.days * 86400 + delta.seconds
        if schedule.start_at is not None:
            start = _ceil_seconds(schedule.start_at) - 1
            if start > low:
                low = start
        found = self.compile(schedule).next_after(low, schedule.gap, schedule.repeat)
        if found is None:
            return None
        instant, offset, note = found
        if schedule.end_at is not None and instant >= _ceil_seconds(schedule.end_at):
            return None
        try:
            nominal = EPOCH + timedelta(0, instant)
        except OverflowError:
            return None
        return _new_fire((nominal, due_at(schedule, nominal), offset, note))

    def iter_fires(self, schedule: Schedule, after: datetime, runs_so_far: int = 0) -> Iterator[Fire]:
        """Every fire strictly after ``after``, in order, until the schedule ends.

        Infinite for a cron schedule without ``end_at`` or ``max_runs``.
        """
        while True:
            fire = self.next_fire(schedule, after, runs_so_far)
            if fire is None:
                return
            yield fire
            after = fire.nominal_at
            runs_so_far += 1

    def preview(self, schedule: Schedule, after: datetime, count: int, runs_so_far: int = 0) -> list[Fire]:
        """Up to ``count`` fires after ``after``, with notes for ``--explain``.

        Like :meth:`iter_fires`, and a fire that follows a gap whose wall
        times were not caught up also says which were skipped.
        """
        fires: list[Fire] = []
        compiled = self.compile(schedule) if schedule.kind is ScheduleKind.CRON else None
        previous = _floor_seconds(after)
        for fire in self.iter_fires(schedule, after, runs_so_far):
            if len(fires) >= count:
                break
            if compiled is not None:
                nominal = _floor_seconds(fire.nominal_at)
                notes = compiled.skipped_between(previous, nominal, schedule.gap)
                if notes:
                    fire = fire._replace(note="; ".join(notes + ([fire.note] if fire.note else [])))
                previous = nominal
            fires.append(fire)
        return fires

    def first_fire(self, schedule: Schedule, now: datetime) -> Fire | None:
        """The fire a new job starts from: next after ``now`` for cron; for a
        one-off its (first) fire even when already past, since the dispatcher's
        misfire rules decide what a past one-off does."""
        if schedule.kind is ScheduleKind.CRON:
            return self.next_fire(schedule, now)
        return self._next_one_off(schedule, None)

    def validate(self, schedule: Schedule, now: datetime) -> Fire:
        """Check every field of ``schedule``; return :meth:`first_fire`.

        Raises :class:`ScheduleError` naming the field: bad expression or
        zone, ``H`` without job id, jitter window negative or over an hour,
        naive ``start_at``/``end_at``, ``end_at`` not after ``start_at``,
        negative ``max_runs``, a one-off instant of the wrong kind, a local
        time outside [1970-01-01T00:00, 9999-01-01T00:00), and a schedule
        that never fires (at all, or inside its window from
        ``now``).
        """
        _check_fields(schedule)
        if schedule.kind is ScheduleKind.CRON:
            self.compile(schedule)
        else:
            self._one_off_fires(schedule)
        fire = self.first_fire(schedule, now)
        if fire is None:
            if schedule.kind is ScheduleKind.LOCAL and not self._one_off_fires(schedule):
                raise ScheduleError(
                    "schedule.local.local_time",
                    f"{schedule.at.isoformat()} does not exist in {schedule.zone} (skipped by a clock change) "
                    "and the DST gap policy does not shift it",
                )
            if schedule.start_at is not None or schedule.end_at is not None:
                raise ScheduleError("schedule", "never fires inside the job's start_at/end_at window")
            raise ScheduleError("schedule", "never fires again")
        return fire

    # One-offs.

    def _one_off_fires(self, schedule: Schedule) -> list[tuple[datetime, int, str]]:
        """Every fire of a one-off, ignoring the window: ``(instant, offset, note)``."""
        if schedule.kind is ScheduleKind.ONCE:
            at = schedule.at
            if at is None or at.tzinfo is None:
                raise ScheduleError("schedule.once_at", "a one-off instant must be an aware UTC timestamp")
            try:
                offset = self.zones.get(schedule.zone or "UTC").offset_at(_floor_seconds(at))
            except UnknownZoneError:
                offset = 0
            return [(at.astimezone(timezone.utc), offset, "")]
        wall_time = schedule.at
        if wall_time is None or wall_time.tzinfo is not None:
            raise ScheduleError("schedule.local.local_time", "a local time must be a wall time without offset")
        if not schedule.zone:
            raise ScheduleError("schedule.local.time_zone", "a local time needs a time zone")
        try:
            zone = self.zones.get(schedule.zone)
        except UnknownZoneError:
            raise ScheduleError("schedule.local.time_zone", f"unknown time zone {schedule.zone!r}") from None
        if not _WALL_FITS[0] <= wall_time < _WALL_FITS[1]:
            return []  # its instant may not fit a datetime (validate accepts a narrower range)
        wall = _floor_seconds(wall_time.replace(tzinfo=timezone.utc))
        fraction = timedelta(microseconds=wall_time.microsecond)
        instants = zone.instants_of_wall(wall)
        if len(instants) == 1:
            return [(EPOCH + timedelta(seconds=instants[0]) + fraction, wall - instants[0], "")]
        if instants:
            first, second = instants[0], instants[-1]
            before, after = wall - first, wall - second
            transition = _transition_between(zone, first, second)
            first_at = EPOCH + timedelta(seconds=first) + fraction
            if repeat_once(schedule.repeat, False, before - after):
                return [(first_at, before, repeat_note(wall, transition, before, after, "once"))]
            second_at = EPOCH + timedelta(seconds=second) + fraction
            return [
                (first_at, before, repeat_note(wall, transition, before, after, "first")),
                (second_at, after, repeat_note(wall, transition, before, after, "second")),
            ]
        gap = zone.gap_of_wall(wall)
        if gap is None:  # pragma: no cover - a wall time is always seen, repeated or skipped
            return []
        transition, before, after = gap
        if not gap_shifts(schedule.gap, False, after - before):
            return []
        note = shift_note([wall], 1, transition, before, after)
        return [(EPOCH + timedelta(seconds=transition), after, note)]

    def _next_one_off(self, schedule: Schedule, after: datetime | None) -> Fire | None:
        """The first fire of a one-off strictly after ``after`` (``None``: any) in its window."""
        if after is not None and after.tzinfo is None:
            raise ValueError(f"instant {after.isoformat()} must be timezone-aware")
        if schedule.kind is ScheduleKind.ONCE and after is not None:
            at = schedule.at
            if at is not None and at.tzinfo is not None and at <= after:
                # Its one fire is the instant itself, not after ``after``: what
                # the loop below finds, without its zone's offset (the claim
                # asks this of every one-off it claims).
                return None
        for nominal, offset, note in self._one_off_fires(schedule):
            if after is not None and nominal <= after:
                continue
            if schedule.start_at is not None and nominal < schedule.start_at:
                continue
            if schedule.end_at is not None and nominal >= schedule.end_at:
                return None
            return Fire(nominal, due_at(schedule, nominal), offset, note)
        return None


def due_at(schedule: Schedule, nominal: datetime) -> datetime:
    """The due instant of ``schedule``'s fire at ``nominal``: nominal plus the
    job's jitter (docs/architecture.md, Semantics: Jitter) within
    :func:`jitter_window`."""
    window = jitter_window(schedule)
    if not window:
        return nominal
    return nominal + jitter_delay(schedule.job_id, window)


def jitter_window(schedule: Schedule) -> timedelta:
    """The window ``schedule``'s fires are jittered within (zero: none).
    Cron jobs are jittered within 60 s unless ``exact`` or another window
    is set; one-offs only when a window is set. Every fire of one job is
    delayed by the same ``jitter_delay(job_id, window)``."""
    if schedule.exact:
        return _NO_WINDOW
    window = schedule.jitter_window
    if window is None:
        return DEFAULT_CRON_WINDOW if schedule.kind is _CRON else _NO_WINDOW
    return window


_NO_WINDOW = timedelta(0)


def _transition_between(zone, first: int, second: int) -> int:
    transitions = zone.table(second)[0]
    return transitions[bisect_right(transitions, first)]


def _check_fields(schedule: Schedule) -> None:
    window = schedule.jitter_window
    if window is not None and (window < _ZERO or window > MAX_WINDOW):
        raise ScheduleError("jitter.window", "the jitter window must be between 0 and 1 hour")
    for name in ("start_at", "end_at"):
        value = getattr(schedule, name)
        if value is not None and value.tzinfo is None:
            raise ScheduleError(name, f"{name} must be an aware UTC timestamp")
    if schedule.start_at is not None and schedule.end_at is not None and schedule.end_at <= schedule.start_at:
        raise ScheduleError("end_at", "end_at must be after start_at")
    if schedule.max_runs < 0:
        raise ScheduleError("max_runs", "max_runs must be 0 (unlimited) or more")
    if schedule.kind is ScheduleKind.LOCAL and schedule.at is not None and schedule.at.tzinfo is None:
        if not _LOCAL_EARLIEST <= schedule.at < _LOCAL_LATEST:
            raise ScheduleError(
                "schedule.local.local_time", "must be between 1970-01-01T00:00:00 and 9999-01-01T00:00:00 (exclusive)"
            )


_USES_H = object()
_DEFAULT_ENGINE = Engine()


def default_engine() -> Engine:
    """The process-wide engine on the pinned tzdata release."""
    return _DEFAULT_ENGINE


def next_fire(schedule: Schedule, after: datetime, runs_so_far: int = 0) -> Fire | None:
    """:meth:`Engine.next_fire` on the default engine."""
    return _DEFAULT_ENGINE.next_fire(schedule, after, runs_so_far)


def iter_fires(schedule: Schedule, after: datetime, runs_so_far: int = 0) -> Iterator[Fire]:
    """:meth:`Engine.iter_fires` on the default engine."""
    return _DEFAULT_ENGINE.iter_fires(schedule, after, runs_so_far)


def preview(schedule: Schedule, after: datetime, count: int, runs_so_far: int = 0) -> list[Fire]:
    """:meth:`Engine.preview` on the default engine."""
    return _DEFAULT_ENGINE.preview(schedule, after, count, runs_so_far)


def fires_depend_on_job_id(schedule: Schedule) -> bool:
    """:meth:`Engine.fires_depend_on_job_id` on the default engine."""
    return _DEFAULT_ENGINE.fires_depend_on_job_id(schedule)


def first_fire(schedule: Schedule, now: datetime) -> Fire | None:
    """:meth:`Engine.first_fire` on the default engine."""
    return _DEFAULT_ENGINE.first_fire(schedule, now)


def validate(schedule: Schedule, now: datetime) -> Fire:
    """:meth:`Engine.validate` on the default engine."""
    return _DEFAULT_ENGINE.validate(schedule, now)
