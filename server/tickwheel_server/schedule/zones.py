"""Time zones from the pinned ``tzdata`` package, as transition tables.

Tickwheel never uses the host's zone files: the project pins ``tzdata`` and
this module reads zones from it (through :class:`ZoneRegistry`).
:func:`pin_tzdata` additionally points the standard :mod:`zoneinfo` at the
same package (``zoneinfo.reset_tzpath(to=())``) so that any ``ZoneInfo``
created elsewhere in the process agrees with the engine; servers and the CLI
call it once at start.

A :class:`Zone` is a table of UTC-offset changes: ``T`` (instants, seconds
since the epoch, increasing) and ``O`` (``len(T) + 1`` offsets, ``O[k]`` in
force on ``[T[k-1], T[k])``). Explicit transitions come from the TZif file;
later ones are generated from its footer rule, lazily, as far as queries
reach. Tables only grow, and are swapped atomically, so a zone may be shared
between threads.

tzdata updates: :func:`zone_fingerprints` reduces every zone to a digest of
its offset changes over a fixed window (1970 to 2200), so two tzdata versions
can be compared zone by zone with :func:`zones_changed` without having both
installed: a server stores the fingerprints of the version it used, and on
start compares them with the ones of the version it runs. A digest depends
only on UTC offsets, so abbreviation-only or file-format-only changes do not
flag a zone.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import io
import threading
import zoneinfo as _zoneinfo
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path

from .errors import UnknownZoneError
from .tzif import TzifData, parse_tzif

INFINITY = 1 << 62
"""An instant later than any real one; the end of the last segment."""

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_INITIAL_YEARS = 2100
_MAX_YEAR = 9999
FINGERPRINT_START_YEAR = 1970
FINGERPRINT_END_YEAR = 2200


def _year_start(year: int) -> int:
    return (date(year, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86400


def _year_of(instant: int) -> int:
    days = instant // 86400 + _EPOCH_ORDINAL
    days = min(max(days, 1), date.max.toordinal())
    return date.fromordinal(days).year


class Zone:
    """One IANA zone as a table of UTC-offset changes.

    :meth:`table` returns the transition table, complete at least a year
    past the instant asked for: transitions the footer rule generates are
    added on demand. :meth:`offset_at` is the UTC offset in seconds at an
    instant. Instants are seconds since the epoch; wall times are "local
    seconds": seconds since 1970-01-01 00:00 on the zone's clocks.
    """

    __slots__ = ("key", "_data", "_table", "_lock", "_next_year", "_rule_from")

    def __init__(self, key: str, data: TzifData) -> None:
        self.key = key
        self._data = data
        self._lock = threading.Lock()
        transitions = [t for t, _ in data.transitions]
        offsets = [data.before] + [o for _, o in data.transitions]
        if data.rule is not None and data.rule.has_dst:
            self._rule_from = data.rule_from if data.rule_from is not None else -INFINITY
            self._next_year = _year_of(data.rule_from) - 1 if data.rule_from is not None else 1800
            self._table = _with_bounds(transitions, offsets, self._rule_from)
            self._extend_to_year(_INITIAL_YEARS)
        else:
            self._rule_from = INFINITY
            if data.rule is not None and data.rule.std_offset != offsets[-1]:
                # A static footer governs after the last transition (as
                # zoneinfo does), or always when there is none.
                if data.rule_from is None:
                    offsets = [data.rule.std_offset]
                else:
                    transitions.append(data.rule_from + 1)
                    offsets.append(data.rule.std_offset)
            self._next_year = _MAX_YEAR + 1
            self._table = _with_bounds(transitions, offsets, INFINITY)

    @classmethod
    def from_bytes(cls, key: str, data: bytes) -> Zone:
        """Build a zone from TZif bytes; ``ValueError`` when they are malformed."""
        return cls(key, parse_tzif(data))

    def __repr__(self) -> str:
        return f"Zone({self.key!r})"

    def _extend_to_year(self, last_year: int) -> None:
        rule = self._data.rule
        assert rule is not None
        with self._lock:
            transitions, offsets = self._table[0], self._table[1]
            if self._next_year > last_year:
                return
            transitions = list(transitions)
            offsets = list(offsets)
            floor = max(transitions[-1] if transitions else -INFINITY, self._rule_from)
            generated: list[tuple[int, int, int]] = []
            for year in range(self._next_year, min(last_year, _MAX_YEAR) + 1):
                generated.extend(rule.transitions(year))
            generated.sort()
            for instant, _order, offset in generated:
                if instant <= floor:
                    continue
                if transitions and transitions[-1] == instant:
                    # Two changes at one instant: the later one wins.
                    offsets[-1] = offset
                    if offsets[-1] == offsets[-2]:
                        transitions.pop()
                        offsets.pop()
                    continue
                if offset != offsets[-1]:
                    transitions.append(instant)
                    offsets.append(offset)
            self._next_year = last_year + 1
            covered = INFINITY if last_year >= _MAX_YEAR else _year_start(last_year + 1) - 8 * 86400
            self._table = _with_bounds(transitions, offsets, covered)

    def table(self, until: int) -> tuple[list[int], list[int], int, list[int], list[int]]:
        """``(T, O, covered, calm_from, calm_until)``, complete up to ``covered``.

        Every transition before ``covered`` is in ``T``; ``covered`` is at
        least ``until`` plus a year (or :data:`INFINITY` when the zone has no
        rule left to expand). ``calm_from[k]``/``calm_until[k]`` bound the part
        of segment ``k`` where no wall time is repeated by a neighbouring
        transition: from the end of the second pass of a repeat at the
        segment's start, to the start of the first pass of a repeat at its
        end (``covered`` for the last segment). The engine answers there
        without applying any DST rule.
        """
        table = self._table
        if until + 366 * 86400 >= table[2]:
            self._extend_to_year(_year_of(min(until, _year_start(_MAX_YEAR))) + 2)
            table = self._table
        return table

    def offset_at(self, instant: int) -> int:
        """The UTC offset in seconds at ``instant`` (seconds since the epoch)."""
        transitions, offsets = self.table(instant)[:2]
        return offsets[bisect_right(transitions, instant)]

    def instants_of_wall(self, wall: int) -> list[int]:
        """Every instant whose wall time is ``wall`` (local seconds), ascending.

        Empty in a gap, two (or more) in a repeat.
        """
        transitions, offsets = self.table(wall + 2 * 86400)[:2]
        found = []
        k = max(bisect_right(transitions, wall - 2 * 86400) - 1, 0)
        n = len(transitions)
        while k <= n:
            start = transitions[k - 1] if k > 0 else -INFINITY
            if start > wall + 2 * 86400:
                break
            end = transitions[k] if k < n else INFINITY
            instant = wall - offsets[k]
            if start <= instant < end:
                found.append(instant)
            k += 1
        return found

    def gap_of_wall(self, wall: int) -> tuple[int, int, int] | None:
        """For a wall time in a gap, ``(transition, offset_before, offset_after)``.

        The gap of a transition at instant ``t`` from offset ``a`` to ``b > a``
        is the wall range ``[t + a, t + b)``; ``None`` when ``wall`` is in none.
        """
        transitions, offsets = self.table(wall + 2 * 86400)[:2]
        k = bisect_right(transitions, wall - 2 * 86400)
        while k < len(transitions) and transitions[k] <= wall + 2 * 86400:
            t, a, b = transitions[k], offsets[k], offsets[k + 1]
            if t + a <= wall < t + b:
                return t, a, b
            k += 1
        return None

    def changes(self, start: int, end: int) -> tuple[int, list[tuple[int, int]]]:
        """The offset at ``start`` and every ``(instant, offset_after)`` in ``(start, end)``."""
        transitions, offsets = self.table(end)[:2]
        lo = bisect_right(transitions, start)
        hi = bisect_right(transitions, end - 1)
        return offsets[lo], list(zip(transitions[lo:hi], offsets[lo + 1 : hi + 1]))

    def fingerprint(self) -> str:
        """A digest of the offset changes from 1970 to 2200 (see module docstring)."""
        start, end = _year_start(FINGERPRINT_START_YEAR), _year_start(FINGERPRINT_END_YEAR)
        first, changes = self.changes(start, end)
        digest = hashlib.blake2b(digest_size=16, person=b"tickwheel-tz")
        digest.update(b"%d;" % first)
        for instant, offset in changes:
            digest.update(b"%d:%d;" % (instant, offset))
        return digest.hexdigest()


def _with_bounds(transitions: list[int], offsets: list[int], covered: int) -> tuple:
    calm_from = [-INFINITY] + [
        t + max(0, before - after) for t, before, after in zip(transitions, offsets, offsets[1:])
    ]
    calm_until = [
        t - max(0, before - after) for t, before, after in zip(transitions, offsets, offsets[1:])
    ] + [covered]
    return (transitions, offsets, covered, calm_from, calm_until)


class ZoneRegistry:
    """The zones of one tzdata release: the pinned package, or a directory.

    ``ZoneRegistry()`` reads the ``tzdata`` package; ``ZoneRegistry(root)``
    reads a directory of TZif files laid out by key (``root/Europe/London``),
    which is how tests and tools load a modified or older release. Zones are
    parsed once and kept; :meth:`get` raises :class:`UnknownZoneError` for a
    key the release does not contain.
    """

    def __init__(self, root: str | Path | None = None, version: str | None = None) -> None:
        self._root = Path(root) if root is not None else None
        self._zones: dict[str, Zone] = {}
        self._lock = threading.Lock()
        self._keys: frozenset[str] | None = None
        self._version = version

    @property
    def version(self) -> str:
        """The IANA release name, such as ``"2026f"`` (``"unknown"`` if not recorded)."""
        if self._version is None:
            if self._root is None:
                import tzdata

                self._version = str(tzdata.IANA_VERSION)
            else:
                self._version = _directory_version(self._root)
        return self._version

    def keys(self) -> frozenset[str]:
        """Every zone key of this release, links included (``US/Eastern``)."""
        if self._keys is None:
            if self._root is None:
                text = importlib.resources.files("tzdata").joinpath("zones").read_text("ascii")
                self._keys = frozenset(text.split())
            else:
                self._keys = frozenset(
                    path.relative_to(self._root).as_posix()
                    for path in self._root.rglob("*")
                    if path.is_file() and _is_tzif(path)
                )
        return self._keys

    def tzif_bytes(self, key: str) -> bytes:
        """The TZif bytes of ``key``; :class:`UnknownZoneError` if there is none."""
        if key not in self.keys():
            raise UnknownZoneError(key)
        if self._root is None:
            return importlib.resources.files("tzdata.zoneinfo").joinpath(*key.split("/")).read_bytes()
        return (self._root / key).read_bytes()

    def get(self, key: str) -> Zone:
        """The zone ``key`` (parsed once); :class:`UnknownZoneError` if unknown."""
        zone = self._zones.get(key)
        if zone is None:
            data = self.tzif_bytes(key)
            with self._lock:
                zone = self._zones.get(key)
                if zone is None:
                    zone = Zone.from_bytes(key, data)
                    self._zones[key] = zone
        return zone

    def fingerprints(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        """``{key: fingerprint}`` for ``keys`` (default: every zone)."""
        return {key: self.get(key).fingerprint() for key in sorted(keys if keys is not None else self.keys())}


def _is_tzif(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"TZif"


def _directory_version(root: Path) -> str:
    for name in ("+VERSION", "version"):
        if (root / name).is_file():
            return (root / name).read_text().strip() or "unknown"
    zi = root / "tzdata.zi"
    if zi.is_file():
        first = zi.read_text().splitlines()[:1]
        if first and first[0].startswith("# version "):
            return first[0].removeprefix("# version ").strip()
    return "unknown"


_DEFAULT = ZoneRegistry()


def default_registry() -> ZoneRegistry:
    """The registry of the pinned ``tzdata`` package, shared process-wide."""
    return _DEFAULT


def pin_tzdata() -> None:
    """Make :mod:`zoneinfo` read the pinned ``tzdata`` package, never the host's files.

    Idempotent. Clears ``ZoneInfo``'s cache so zones created before the call
    are not reused.
    """
    _zoneinfo.reset_tzpath(to=())
    _zoneinfo.ZoneInfo.clear_cache()


def zoneinfo(key: str) -> _zoneinfo.ZoneInfo:
    """A standard ``ZoneInfo`` for ``key`` built from the pinned ``tzdata`` bytes.

    Independent of ``TZPATH`` (it never reads the host's files), for code that
    wants ``datetime`` arithmetic rather than the engine. Raises
    :class:`UnknownZoneError` for a key the release does not contain.
    """
    cached = _ZONEINFOS.get(key)
    if cached is None:
        cached = _zoneinfo.ZoneInfo.from_file(io.BytesIO(_DEFAULT.tzif_bytes(key)), key=key)
        _ZONEINFOS[key] = cached
    return cached


_ZONEINFOS: dict[str, _zoneinfo.ZoneInfo] = {}


def tzdata_version() -> str:
    """The IANA release of the pinned ``tzdata`` package, such as ``"2026f"``.

    This is what a job records as the version that computed its next run.
    """
    return _DEFAULT.version


def zone_fingerprints(registry: ZoneRegistry | None = None) -> dict[str, str]:
    """Fingerprints of every zone of ``registry`` (default: the pinned release)."""
    return (registry or _DEFAULT).fingerprints()


def zones_changed(old: Mapping[str, str], new: Mapping[str, str]) -> frozenset[str]:
    """Keys whose offsets differ between two fingerprint maps.

    A zone present in only one of the maps counts as changed. Jobs in these
    zones need their stored next run recomputed; jobs elsewhere do not.
    """
    return frozenset(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
