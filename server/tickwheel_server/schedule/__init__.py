"""The schedule engine: when every job fires.

Public API (pure functions; instants are aware datetimes, results in UTC):

- :class:`Schedule`, :class:`ScheduleKind`, :class:`GapPolicy`,
  :class:`RepeatPolicy`: the input; :class:`Fire`: nominal and due instant,
  UTC offset and DST note.
- :func:`next_fire`, :func:`iter_fires`, :func:`preview`, :func:`first_fire`,
  :func:`validate`, :func:`fires_depend_on_job_id`: on the default :class:`Engine` (pinned tzdata, compiled
  schedules cached); build an :class:`Engine` over another
  :class:`ZoneRegistry` to compute against another tzdata release.
- :class:`ScheduleError`: invalid input, with ``field`` and ``reason``.
- tzdata: :func:`pin_tzdata`, :func:`tzdata_version`,
  :func:`zone_fingerprints`, :func:`zones_changed`.
- :func:`jitter_delay`, :func:`jitter_micros` (:func:`jitter_micros_within`), :func:`jitter_window`,
  :func:`due_at` (a nominal instant plus its job's jitter),
  :func:`parse_local_time`.

Files: ``cron.py`` (syntax, H, matcher), ``tzif.py`` (zone files),
``zones.py`` (zone tables, tzdata version and fingerprints), ``dst.py`` (the
DST rule and its notes), ``jitter.py``, ``model.py`` (Schedule, Fire),
``engine.py`` (next fire), ``cli.py`` (``tickwheel cron next``).
"""

from .dst import GapPolicy, RepeatPolicy
from .engine import (
    CompiledCron, Engine, default_engine, due_at, fires_depend_on_job_id, first_fire, iter_fires, jitter_window,
    next_fire, preview, validate,
)
from .errors import ScheduleError, UnknownZoneError
from .jitter import jitter_delay, jitter_micros, jitter_micros_within

from .model import Fire, Schedule, ScheduleKind, parse_local_time
from .zones import Zone, ZoneRegistry, pin_tzdata, tzdata_version, zone_fingerprints, zones_changed

__all__ = [
    "CompiledCron",
    "Engine",
    "Fire",
    "GapPolicy",
    "RepeatPolicy",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "UnknownZoneError",
    "Zone",
    "ZoneRegistry",
    "default_engine",
    "due_at",
    "fires_depend_on_job_id",
    "first_fire",
    "iter_fires",
    "jitter_delay",
    "jitter_micros",
    "jitter_micros_within",
    "jitter_window",
    "next_fire",
    "parse_local_time",
    "pin_tzdata",
    "preview",
    "tzdata_version",
    "validate",
    "zone_fingerprints",
    "zones_changed",
]
