"""TZif files (RFC 8536) and their POSIX TZ footer, as UTC-offset transitions.

The engine needs what :mod:`zoneinfo` does not expose: the list of instants at
which a zone's UTC offset changes, so that it can work in integer seconds and
know where every gap and repeat is. This module reads the same bytes
``zoneinfo`` reads (from the pinned ``tzdata`` package) and produces that
list; the tests check it against ``zoneinfo.ZoneInfo.utcoffset``.

Only the UTC offset matters here. Transitions that change only the DST flag or
the abbreviation are dropped, so two offsets in a row always differ.

Contract of :func:`parse_tzif`: given the bytes of a version 1, 2, 3 or 4 TZif
file it returns the offset before the first transition, the explicit
transitions ``(utc_second, offset_after)`` in increasing order, and the footer
rule (or ``None``) that extends the zone past the last explicit transition.
Malformed input raises :class:`ValueError`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from datetime import date

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_HEADER = struct.Struct(">4sc15x6l")


@dataclass(frozen=True, slots=True)
class RuleDate:
    """One end of a POSIX DST period: ``Mm.w.d``, ``Jn`` or ``n``, plus a time.

    ``kind`` is ``"M"`` (month ``m``, week ``w`` 1-5 where 5 is the last, weekday
    ``d`` 0-6 from Sunday), ``"J"`` (day 1-365, 29 February never counted) or
    ``"N"`` (zero-based day 0-365, 29 February counted). ``seconds`` is the
    local time of day of the change, -167 h to 167 h (RFC 8536 extension).
    """

    kind: str
    month: int
    week: int
    weekday: int
    day: int
    seconds: int

    def local_epoch_seconds(self, year: int) -> int:
        """The change as seconds since 1970-01-01 00:00 *local* time in ``year``."""
        if self.kind == "M":
            first = date(year, self.month, 1)
            first_cron_weekday = (first.weekday() + 1) % 7
            day = 1 + (self.weekday - first_cron_weekday) % 7 + (self.week - 1) * 7
            length = _month_length(year, self.month)
            while day > length:
                day -= 7
            ordinal = first.toordinal() + day - 1
        elif self.kind == "J":
            day = self.day
            if day >= 60 and _is_leap(year):
                day += 1
            ordinal = date(year, 1, 1).toordinal() + day - 1
        else:
            ordinal = date(year, 1, 1).toordinal() + self.day
        return (ordinal - _EPOCH_ORDINAL) * 86400 + self.seconds


@dataclass(frozen=True, slots=True)
class PosixRule:
    """A footer TZ string: a standard offset and optionally a yearly DST rule.

    Offsets are seconds east of UTC (the opposite sign of the TZ string).
    ``dst_offset``, ``start`` and ``end`` are ``None`` for a zone without DST.
    """

    std_offset: int
    dst_offset: int | None = None
    start: RuleDate | None = None
    end: RuleDate | None = None

    @property
    def has_dst(self) -> bool:
        return self.start is not None

    def transitions(self, year: int) -> list[tuple[int, int, int]]:
        """The two changes of ``year`` as ``(utc_second, order, offset_after)``.

        ``order`` breaks ties at one instant: the change to standard time sorts
        first, so a DST period that covers the whole year (``0/0,J365/25``)
        ends in DST.
        """
        assert self.start is not None and self.end is not None
        assert self.dst_offset is not None
        start = self.start.local_epoch_seconds(year) - self.std_offset
        end = self.end.local_epoch_seconds(year) - self.dst_offset
        return [(start, 1, self.dst_offset), (end, 0, self.std_offset)]


@dataclass(frozen=True, slots=True)
class TzifData:
    """What a TZif file says about UTC offsets.

    ``before`` applies before the first transition (the first standard-time
    type, as CPython's ``zoneinfo`` does); ``transitions`` are
    ``(utc_second, offset_after)``, strictly increasing, each changing the
    offset; ``rule`` governs instants after ``rule_from``, the file's last
    transition (which may be one that changes no offset and so is not in
    ``transitions``), or all instants when the file has no transition.
    """

    before: int
    transitions: tuple[tuple[int, int], ...]
    rule: PosixRule | None
    rule_from: int | None


def parse_tzif(data: bytes) -> TzifData:
    """Parse TZif bytes (see the module docstring for the contract)."""
    try:
        return _parse_tzif(data)
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"malformed TZif file: {error}") from None


def _parse_tzif(data: bytes) -> TzifData:
    if len(data) < _HEADER.size or data[:4] != b"TZif":
        raise ValueError("not a TZif file")
    version = data[4:5]
    counts = _HEADER.unpack_from(data, 0)[2:]
    isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt = counts
    time_size = 4
    offset = _HEADER.size
    if version >= b"2":
        # Skip the 32-bit block and read the 64-bit one that follows.
        offset += timecnt * 5 + typecnt * 6 + charcnt + leapcnt * 8 + isstdcnt + isutcnt
        if len(data) < offset + _HEADER.size or data[offset : offset + 4] != b"TZif":
            raise ValueError("truncated TZif file: second header missing")
        isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt = _HEADER.unpack_from(data, offset)[2:]
        offset += _HEADER.size
        time_size = 8
    if typecnt < 1:
        raise ValueError("TZif file has no local time types")
    fmt = ">%d%s" % (timecnt, "q" if time_size == 8 else "l")
    times = struct.unpack_from(fmt, data, offset)
    offset += timecnt * time_size
    indices = data[offset : offset + timecnt]
    offset += timecnt
    types: list[tuple[int, int]] = []
    for _ in range(typecnt):
        utoff, isdst, _abbr = struct.unpack_from(">lBB", data, offset)
        types.append((utoff, isdst))
        offset += 6
    offset += charcnt + leapcnt * (time_size + 4) + isstdcnt + isutcnt
    if len(indices) != timecnt or offset > len(data):
        raise ValueError("truncated TZif file")
    rule: PosixRule | None = None
    if version >= b"2":
        footer = data[offset:]
        if not footer.startswith(b"\n") or b"\n" not in footer[1:]:
            raise ValueError("TZif footer missing")
        text = footer[1 : footer.index(b"\n", 1)].decode("ascii")
        rule = parse_posix_tz(text) if text else None
    before = next((utoff for utoff, isdst in types if not isdst), types[0][0])
    transitions: list[tuple[int, int]] = []
    current = before
    for when, index in zip(times, indices):
        if index >= typecnt:
            raise ValueError("TZif transition names an unknown type")
        utoff = types[index][0]
        if utoff != current:
            transitions.append((when, utoff))
            current = utoff
    rule_from = times[-1] if times else None
    return TzifData(before=before, transitions=tuple(transitions), rule=rule, rule_from=rule_from)


_NAME = r"(?:[A-Za-z]{3,}|<[A-Za-z0-9+-]+>)"
_OFFSET = r"[+-]?\d{1,3}(?::\d{1,2}(?::\d{1,2})?)?"
_TZ_RE = re.compile(rf"(?P<std>{_NAME})(?P<stdoff>{_OFFSET})(?:(?P<dst>{_NAME})(?P<dstoff>{_OFFSET})?)?")
_DATE_RE = re.compile(r"M(\d{1,2})\.(\d)\.(\d)|J(\d{1,3})|(\d{1,3})")


def _hms(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    parts = [int(p) for p in text.lstrip("+-").split(":")]
    while len(parts) < 3:
        parts.append(0)
    return sign * (parts[0] * 3600 + parts[1] * 60 + parts[2])


def _rule_date(text: str) -> RuleDate:
    when, _, time = text.partition("/")
    m = _DATE_RE.fullmatch(when)
    if m is None:
        raise ValueError(f"bad TZ rule date {text!r}")
    seconds = _hms(time) if time else 7200
    if abs(seconds) > 167 * 3600:
        raise ValueError(f"bad TZ rule time {text!r}")
    if m.group(1):
        month, week, weekday = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if not (1 <= month <= 12 and 1 <= week <= 5 and 0 <= weekday <= 6):
            raise ValueError(f"bad TZ rule date {text!r}")
        return RuleDate("M", month, week, weekday, 0, seconds)
    if m.group(4):
        day = int(m.group(4))
        if not 1 <= day <= 365:
            raise ValueError(f"bad TZ rule date {text!r}")
        return RuleDate("J", 0, 0, 0, day, seconds)
    day = int(m.group(5))
    if not 0 <= day <= 365:
        raise ValueError(f"bad TZ rule date {text!r}")
    return RuleDate("N", 0, 0, 0, day, seconds)


def parse_posix_tz(text: str) -> PosixRule:
    """Parse a POSIX TZ string such as ``"GMT0BST,M3.5.0/1,M10.5.0"``.

    A DST name without rules gets the US rules (``M3.2.0,M11.1.0``), as POSIX
    leaves it to the implementation and tzcode does.
    """
    spec, *rules = text.split(",")
    m = _TZ_RE.fullmatch(spec)
    if m is None:
        raise ValueError(f"bad TZ string {text!r}")
    std_offset = -_hms(m.group("stdoff"))
    if m.group("dst") is None:
        if rules:
            raise ValueError(f"TZ rule without DST in {text!r}")
        return PosixRule(std_offset)
    dst_offset = -_hms(m.group("dstoff")) if m.group("dstoff") else std_offset + 3600
    if not rules:
        rules = ["M3.2.0", "M11.1.0"]
    if len(rules) != 2:
        raise ValueError(f"bad TZ rules in {text!r}")
    return PosixRule(std_offset, dst_offset, _rule_date(rules[0]), _rule_date(rules[1]))


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _month_length(year: int, month: int) -> int:
    if month == 2:
        return 29 if _is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31
