"""Five-field cron expressions: parsing, Jenkins ``H``, and a compiled matcher.

Syntax (what :func:`parse_cron` accepts): five whitespace-separated fields
of ASCII, minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
JAN-DEC) and day of week (0-7 or SUN-SAT; 0 and 7 are Sunday). Each field is a comma list
of terms: ``*``, ``N``, ``A-B``, each optionally ``/STEP`` (``N/STEP`` means
``N-max/STEP``), or Jenkins' ``H``, ``H(A-B)``, ``H/STEP``, ``H(A-B)/STEP``.
Names are case-insensitive; a day-of-week range may end on Sunday
(``FRI-SUN``). The day fields also take Quartz's day terms
(:mod:`.dayterms`): ``L``, ``L-n``, ``nW`` and ``LW`` in the day of the
month, ``d#k`` and ``dL`` in the day of the week, alone or in lists. The macros ``@hourly @daily @midnight @weekly @monthly
@yearly @annually`` stand for their five-field forms. Vixie cron's day rule
holds: when both day fields are restricted (neither starts with ``*``) a day
matches if either matches, otherwise both must.

``H`` picks a stable value from a hash (BLAKE2b, never Python's ``hash()``)
of the job id and the field position, so every job keeps its own minute
forever and thousands of ``H * * * *`` jobs spread over the hour. In the
day-of-month field a bare ``H`` ranges over 1-28 so that it fires every month.

A job is *wild* (docs/architecture.md, Semantics) when its minute or hour field
starts with ``*`` or with an ``H`` step; otherwise it is *fixed-time*.

croniter is not used here: its matcher is about 4 k next-fire computations a
second and it gets the DST rule wrong, so Tickwheel compiles each expression
to lookup tables (:class:`CronMatcher`) that jump straight to the next
matching month, day, hour and minute.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from dataclasses import dataclass
from datetime import date

from .dayterms import DayTerm, month_mask_function, parse_day_of_month_term, parse_day_of_week_term
from .errors import ScheduleError

EXPRESSION_FIELD = "schedule.cron.expression"

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTHS = {name: i + 1 for i, name in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}
_WEEKDAYS = {name: i for i, name in enumerate("SUN MON TUE WED THU FRI SAT".split())}
_MONTH_LABELS = {v: k.title() for k, v in _MONTHS.items()}
_MAX_MONTH_LENGTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    lo: int
    hi: int  # inclusive upper bound of `*` and of N/STEP
    accept_hi: int  # largest value accepted in a term (7 for day of week)
    names: dict[str, int] | None
    h_lo: int
    h_hi: int


_FIELDS = (
    _FieldSpec("minute", 0, 59, 59, None, 0, 59),
    _FieldSpec("hour", 0, 23, 23, None, 0, 23),
    _FieldSpec("day-of-month", 1, 31, 31, None, 1, 28),
    _FieldSpec("month", 1, 12, 12, _MONTHS, 1, 12),
    _FieldSpec("day-of-week", 0, 6, 7, _WEEKDAYS, 0, 6),
)

_H_RE = re.compile(r"H(?:\((\w+)-(\w+)\))?(?:/(\w+))?")


@dataclass(frozen=True, slots=True)
class _Term:
    """One comma-separated term: a stepped range, or an ``H`` form."""

    lo: int
    hi: int
    step: int
    is_h: bool = False


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed expression whose ``H`` terms are not resolved yet.

    ``fields`` are the five field texts (after macro expansion). ``wild``,
    ``dom_star`` and ``dow_star`` follow from the texts; ``uses_h`` says
    whether :meth:`resolve` needs a job id.
    """

    text: str
    fields: tuple[str, ...]
    terms: tuple[tuple[_Term | DayTerm, ...], ...]
    wild: bool
    dom_star: bool
    dow_star: bool
    uses_h: bool

    def resolve(self, job_id: str | None = None) -> CronFields:
        """The value sets, with ``H`` resolved from ``job_id``.

        Raises :class:`ScheduleError` when the expression uses ``H`` and
        ``job_id`` is empty, or when it can never fire.
        """
        if self.uses_h and not job_id:
            raise ScheduleError(
                EXPRESSION_FIELD, "H needs a job id to pick its value (save the job first, or pass one)"
            )
        sets: list[frozenset[int]] = []
        day_terms: list[tuple[DayTerm, ...]] = []
        for index, terms in enumerate(self.terms):
            values: set[int] = set()
            if index in (2, 4):
                day_terms.append(tuple(term for term in terms if isinstance(term, DayTerm)))
            for term in terms:
                if isinstance(term, DayTerm):
                    continue
                if term.is_h:
                    digest = hashlib.blake2b(
                        (job_id or "").encode(), digest_size=8, person=b"tickwheel-H%d" % index
                    ).digest()
                    seed = int.from_bytes(digest, "big")
                    span = term.hi - term.lo + 1
                    if term.step:
                        values.update(range(term.lo + seed % min(term.step, span), term.hi + 1, term.step))
                    else:
                        values.add(term.lo + seed % span)
                else:
                    values.update(range(term.lo, term.hi + 1, term.step))
            if index == 4 and 7 in values:
                values.discard(7)
                values.add(0)
            sets.append(frozenset(values))
        fields = CronFields(*sets, dom_star=self.dom_star, dow_star=self.dow_star, wild=self.wild,
                            dom_terms=day_terms[0], dow_terms=day_terms[1])
        _check_fires(fields)
        return fields


@dataclass(frozen=True, slots=True)
class CronFields:
    """Resolved value sets (day of week 0-6, Sunday 0), the day-rule flags,
    and the Quartz day terms of each day field (:mod:`.dayterms`)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_star: bool
    dow_star: bool
    wild: bool
    dom_terms: tuple[DayTerm, ...] = ()
    dow_terms: tuple[DayTerm, ...] = ()

    @property
    def days_or(self) -> bool:
        """True when a day matches if *either* day field matches (Vixie)."""
        return not (self.dom_star or self.dow_star)


def _check_fires(fields: CronFields) -> None:
    """Raise when no date can match: both day fields must match (one starts
    with ``*``) and no listed day of the month exists in any listed month.
    Otherwise some date matches within 400 years (the Gregorian cycle).
    With Quartz day terms, which days match depends only on a month's length
    and the weekday it starts on: :func:`_day_terms_match` asks the month
    mask of each such kind of month listed (at most 28 masks), never the
    matcher's 400-year search."""
    if fields.dom_terms or fields.dow_terms:
        if not _day_terms_match(fields):
            terms = " ".join(term.text for term in fields.dom_terms + fields.dow_terms)
            months = ", ".join(_MONTH_LABELS[m] for m in sorted(fields.months))
            raise ScheduleError(EXPRESSION_FIELD, f"never fires: the day fields ({terms}) match no day of {months}")
        return
    if fields.days_or:
        return
    possible = [m for m in sorted(fields.months) if min(fields.days) <= _MAX_MONTH_LENGTH[m]]
    if not possible:
        days = ",".join(str(d) for d in sorted(fields.days))
        months = ", ".join(_MONTH_LABELS[m] for m in sorted(fields.months))
        if len(fields.days) > 1:
            reason = f"never fires: days {days} of the month never occur in {months}"
        else:
            reason = f"never fires: day {days} of the month never occurs in {months}"
        raise ScheduleError(EXPRESSION_FIELD, reason)


def _day_terms_match(fields: CronFields) -> bool:
    """Whether some month the fields list has a day the day fields (with
    Quartz terms) match (pure). Every listed month occurs with each of its
    lengths (February's 28 and 29) starting on each weekday within the
    400-year Gregorian cycle, so this is the matcher's search from 1970
    answered in at most 4 lengths x 7 weekdays mask evaluations."""
    mask = month_mask_function(fields.days, fields.weekdays, fields.dom_terms, fields.dow_terms, fields.days_or)
    lengths = {_MONTH_LENGTHS[m] for m in fields.months} | ({29} if 2 in fields.months else set())
    return any(mask(length, first_weekday) for length in sorted(lengths) for first_weekday in range(7))


def parse_cron(text: str) -> CronExpression:
    """Parse ``text`` (see the module docstring) without resolving ``H``.

    Raises :class:`ScheduleError` on ``schedule.cron.expression`` naming the
    field and the problem: a character not ASCII, wrong field count, unknown
    macro or name, out-of-range value, backwards range, bad step.
    """
    if not text.isascii():  # isdigit, int, split: other scripts' digits and spaces ("²", which int refuses)
        index, char = next((i, c) for i, c in enumerate(text) if not c.isascii())
        raise ScheduleError(EXPRESSION_FIELD, f"U+{ord(char):04X} at character {index + 1}: a cron expression is ASCII")
    stripped = text.strip()
    if not stripped:
        raise ScheduleError(EXPRESSION_FIELD, "empty cron expression")
    if stripped.startswith("@"):
        expanded = MACROS.get(stripped.lower())
        if expanded is None:
            known = " ".join(MACROS)
            raise ScheduleError(EXPRESSION_FIELD, f"unknown macro {stripped!r} (known: {known})")
        parts = expanded.split()
    else:
        parts = stripped.split()
    if len(parts) != 5:
        raise ScheduleError(
            EXPRESSION_FIELD,
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}",
        )
    terms = tuple(_parse_field(part, spec) for part, spec in zip(parts, _FIELDS))
    wild = any(part.startswith("*") or (field_terms[0].is_h and field_terms[0].step > 0)
               for part, field_terms in zip(parts[:2], terms[:2]))
    return CronExpression(
        text=text,
        fields=tuple(parts),
        terms=terms,
        wild=wild,
        dom_star=parts[2].startswith("*"),
        dow_star=parts[4].startswith("*"),
        uses_h=any(isinstance(term, _Term) and term.is_h for field_terms in terms for term in field_terms),
    )


def _parse_field(text: str, spec: _FieldSpec) -> tuple[_Term | DayTerm, ...]:
    return tuple(_parse_day_term(term, spec) or _parse_term(term, spec) for term in text.split(","))


def _parse_day_term(text: str, spec: _FieldSpec) -> DayTerm | None:
    """A Quartz day term of the day fields, or None (not one: parsed as usual)."""

    def fail(reason: str) -> ScheduleError:
        return _fail(spec, reason)

    if spec.name == "day-of-month":
        return parse_day_of_month_term(text, fail)
    if spec.name == "day-of-week":
        return parse_day_of_week_term(text, lambda token: _value(token, spec), fail)
    return None


def _fail(spec: _FieldSpec, reason: str) -> ScheduleError:
    return ScheduleError(EXPRESSION_FIELD, f"{spec.name} field: {reason}")


def _value(token: str, spec: _FieldSpec) -> int:
    if token.isdigit():
        value = int(token)
    elif spec.names is not None and token.upper() in spec.names:
        return spec.names[token.upper()]
    else:
        raise _fail(spec, f"{token!r} is not a number{' or a name' if spec.names else ''}")
    if not spec.lo <= value <= spec.accept_hi:
        raise _fail(spec, f"{value} is out of range {spec.lo}-{spec.accept_hi}")
    return value


def _step(token: str, spec: _FieldSpec) -> int:
    span = spec.hi - spec.lo + 1
    if not token.isdigit() or not 1 <= int(token) <= span:
        raise _fail(spec, f"bad step {token!r}: must be a whole number from 1 to {span}")
    return int(token)


def _parse_term(text: str, spec: _FieldSpec) -> _Term:
    if not text:
        raise _fail(spec, "empty list item")
    if text.startswith("H"):
        m = _H_RE.fullmatch(text)
        if m is None:
            raise _fail(spec, f"bad H form {text!r} (use H, H(A-B), H/STEP or H(A-B)/STEP)")
        lo, hi = spec.h_lo, spec.h_hi
        if m.group(1) is not None:
            lo, hi = _value(m.group(1), spec), _value(m.group(2), spec)
            if lo > hi:
                raise _fail(spec, f"range {text!r} is backwards")
        step = _step(m.group(3), spec) if m.group(3) is not None else 0
        return _Term(lo, hi, step, is_h=True)
    base, slash, step_text = text.partition("/")
    step = _step(step_text, spec) if slash else 1
    if base == "*":
        return _Term(spec.lo, spec.hi, step)
    first, dash, last = base.partition("-")
    lo = _value(first, spec)
    if dash:
        hi = _value(last, spec)
        if spec.name == "day-of-week" and hi == 0 and lo > 0:
            hi = 7  # FRI-SUN: Sunday as the end of a range
        if lo > hi:
            raise _fail(spec, f"range {base!r} is backwards")
    elif slash:
        hi = spec.hi if lo <= spec.hi else lo
    else:
        hi = lo
    return _Term(lo, hi, step)


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_SEARCH_YEARS = 400  # every month/day/weekday combination recurs within 400 years
_NONE = 99


_ALL_DAYS, _DAYS_OR, _DOM_ONLY, _DOW_ONLY, _DOM_AND_DOW, _BY_MONTH = range(6)
_MONTH_LENGTHS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _calendar_table(first_year: int, end_year: int) -> array:
    """``table[n]``: day ``n`` after 1 Jan ``first_year`` packed as ``year << 9 | month << 5 | day``.

    Decoding a date from this table is several times faster than
    ``date.fromordinal`` and three attribute reads; the matcher falls back to
    ``fromordinal`` outside it.
    """
    table = array("l")
    for year in range(first_year, end_year):
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        for month in range(1, 13):
            length = 29 if month == 2 and leap else _MONTH_LENGTHS[month]
            base = year << 9 | month << 5
            table.extend(range(base + 1, base + length + 1))
    return table


_CALENDAR = _calendar_table(1970, 2200)


class CronMatcher:
    """Lookup tables for one resolved expression, searched in local wall minutes.

    A wall minute is a count of minutes since 1970-01-01 00:00 on the zone's
    clocks. :meth:`next_match` returns the first matching wall minute at or
    after its argument, or ``None`` when there is none within 400 years (or
    before the year 9999); it visits a few table entries per month and jumps
    over months and days that cannot match.
    """

    __slots__ = ("fields", "next_match")

    def __init__(self, fields: CronFields) -> None:
        self.fields = fields
        self.next_match = _compile_search(fields)

    def matches(self, wall_minute: int) -> bool:
        """Whether ``wall_minute`` itself matches."""
        return self.next_match(wall_minute) == wall_minute


def _next_table(values: frozenset[int], size: int, none: int) -> tuple[int, ...]:
    """``table[i]``: the smallest value ``>= i`` in ``values``, or ``none``."""
    table = [none] * size
    following = none
    for i in range(size - 1, -1, -1):
        if i in values:
            following = i
        table[i] = following
    return tuple(table)


def _compile_search(fields: CronFields):
    """Build ``next_match`` as a closure over the lookup tables (fast locals)."""
    next_minute = _next_table(fields.minutes, 61, -1)
    first_minute = min(fields.minutes)
    next_hour = _next_table(fields.hours, 25, -1)
    month_ok = tuple(i in fields.months for i in range(13))
    next_month = _next_table(fields.months, 14, -1)
    first_month = min(fields.months)
    next_dom = _next_table(fields.days, 33, _NONE)
    # dow_delta[w]: days from weekday w (0 Sunday) to the next matching weekday.
    dow_delta = tuple(min((k for k in range(7) if (w + k) % 7 in fields.weekdays), default=_NONE) for w in range(7))
    doms, weekdays = fields.days, fields.weekdays
    dom_all, dow_all = len(doms) == 31, len(weekdays) == 7
    month_mask = None
    if fields.dom_terms or fields.dow_terms:
        mode = _BY_MONTH
        month_mask = month_mask_function(doms, weekdays, fields.dom_terms, fields.dow_terms, fields.days_or)
    elif fields.days_or:
        mode = _DAYS_OR
    elif dom_all and dow_all:
        mode = _ALL_DAYS
    elif dow_all:
        mode = _DOM_ONLY
    elif dom_all:
        mode = _DOW_ONLY
    else:
        mode = _DOM_AND_DOW
    fromordinal = date.fromordinal
    ordinal_of = date.toordinal
    epoch_ordinal = _EPOCH_ORDINAL
    lengths = _MONTH_LENGTHS

    calendar = _CALENDAR
    calendar_days = len(_CALENDAR)

    def next_match(wall_minute: int) -> int | None:
        days = wall_minute // 1440
        rest = wall_minute - days * 1440
        hour = rest // 60
        minute = rest - hour * 60
        if 0 <= days < calendar_days:
            packed = calendar[days]
            year = packed >> 9
            month = packed >> 5 & 15
            day = packed & 31
        else:
            d = fromordinal(days + epoch_ordinal)
            year = d.year
            month = d.month
            day = d.day
        limit = year + _SEARCH_YEARS
        if limit > 9999:
            limit = 9999
        while True:
            if not month_ok[month]:
                following = next_month[month]
                if following < 0:
                    year += 1
                    month = first_month
                    if year > limit:
                        return None
                else:
                    month = following
                day = 1
                hour = minute = 0
                days = ordinal_of(date(year, month, 1)) - epoch_ordinal
            length = lengths[month]
            if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
                length = 29
            if mode == _ALL_DAYS:
                found = day
            elif mode == _DOM_ONLY:
                found = next_dom[day]
            elif mode == _DOW_ONLY:
                found = day + dow_delta[(days + 4) % 7]
            elif mode == _DAYS_OR:
                found = next_dom[day]
                by_weekday = day + dow_delta[(days + 4) % 7]
                if by_weekday < found:
                    found = by_weekday
            elif mode == _BY_MONTH:
                left = month_mask(length, (days - day + 5) % 7) >> day << day
                found = (left & -left).bit_length() - 1 if left else _NONE
            else:
                found = _NONE
                weekday = (days + 4) % 7
                for candidate in range(day, length + 1):
                    if candidate in doms and (weekday + candidate - day) % 7 in weekdays:
                        found = candidate
                        break
            if found > length:
                month += 1
                if month > 12:
                    month = 1
                    year += 1
                    if year > limit:
                        return None
                day = 1
                hour = minute = 0
                days = ordinal_of(date(year, month, 1)) - epoch_ordinal
                continue
            if found != day:
                days += found - day
                day = found
                hour = minute = 0
            h = next_hour[hour]
            if h == hour:
                m = next_minute[minute]
                if m >= 0:
                    return days * 1440 + h * 60 + m
                h = next_hour[hour + 1]
            if h >= 0:
                return days * 1440 + h * 60 + first_minute
            # Nothing left today: tomorrow.
            day += 1
            days += 1
            hour = minute = 0
            if day > length:
                day = 1
                month += 1
                if month > 12:
                    month = 1
                    year += 1
                    if year > limit:
                        return None

    return next_match
