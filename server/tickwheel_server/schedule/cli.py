"""``tickwheel cron next``: preview a cron expression without a server.

::

    tickwheel cron next EXPR --tz ZONE [--after RFC3339] [--count N] [--job-id ID] [--explain]

Prints one instant per line as RFC 3339 UTC with a ``Z`` suffix
(``2027-03-28T01:00:00Z``): the nominal instants, or with ``--job-id`` that
job's due instants (nominal plus its stable jitter, milliseconds shown when
not zero), with ``H`` resolved from the id. An expression using ``H``
without ``--job-id`` is refused. ``--after`` defaults to the clock's now,
``--count`` to 5 (1 to 10 000). ``--explain`` appends, tab-separated, the
nominal instant's local wall time with its offset, when a DST rule applied
a note, and when Quartz day terms (``L``, ``15W``, ``FRI#3``...) name the
day, which ones. Bad input: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import TextIO

from tickwheel.shared.clock import Clock, SystemClock

from .cron import parse_cron
from .dayterms import terms_naming
from .engine import Engine, default_engine
from .errors import ScheduleError
from .model import Schedule
from .zones import pin_tzdata

MAX_COUNT = 10_000


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


def build_parser() -> _Parser:
    """The arguments of ``tickwheel cron next`` (also read by ``tickwheel completion``)."""
    parser = _Parser(prog="tickwheel cron next", description="Print the next fire instants of a cron expression.")
    parser.add_argument("expression", metavar="EXPR", help='five-field cron expression or macro, e.g. "30 2 * * *"')
    parser.add_argument("--tz", required=True, metavar="ZONE", help="IANA time zone, e.g. Europe/London")
    parser.add_argument("--after", metavar="RFC3339", help="start strictly after this instant (default: now)")
    parser.add_argument("--count", type=int, default=5, metavar="N", help="how many instants (default 5)")
    parser.add_argument("--job-id", default="", metavar="ID", help="resolve H and add this job's jitter")
    parser.add_argument("--explain", action="store_true", help="add local wall time and DST notes")
    return parser


def format_instant(instant: datetime) -> str:
    """RFC 3339 in UTC with ``Z``; milliseconds only when not whole seconds."""
    utc = instant.astimezone(timezone.utc).replace(tzinfo=None)
    spec = "milliseconds" if utc.microsecond else "seconds"
    return utc.isoformat(timespec=spec) + "Z"


def _parse_after(text: str) -> datetime:
    try:
        after = datetime.fromisoformat(text)
    except ValueError:
        raise _UsageError(f"--after: {text!r} is not an RFC 3339 timestamp like 2027-03-28T00:00:00Z") from None
    if after.tzinfo is None:
        raise _UsageError(f"--after: {text!r} needs an offset or Z")
    return after


def cron_next_main(
    argv: list[str],
    clock: Clock | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    engine: Engine | None = None,
) -> int:
    """Run ``tickwheel cron next`` with ``argv`` (the words after ``next``).

    Returns the exit status: 0 on success, 2 on bad input (after writing one
    line to ``stderr``). ``clock`` supplies "now" for a missing ``--after``.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    if any(arg in ("-h", "--help") for arg in argv):
        build_parser().print_help(out)
        return 0
    try:
        args = build_parser().parse_args(argv)
        if not 1 <= args.count <= MAX_COUNT:
            raise _UsageError(f"--count must be from 1 to {MAX_COUNT}")
        after = _parse_after(args.after) if args.after else (clock or SystemClock()).now()
        pin_tzdata()
        engine = engine or default_engine()
        schedule = Schedule.cron(args.expression, args.tz, job_id=args.job_id, exact=not args.job_id)
        if args.explain:
            fires = engine.preview(schedule, after, args.count)
            fields = parse_cron(args.expression).resolve(args.job_id or None)
            day_terms = fields.dom_terms + fields.dow_terms
        else:
            fires = list(_take(engine, schedule, after, args.count))
    except _UsageError as error:
        print(f"tickwheel cron next: {error}", file=err)
        return 2
    except ScheduleError as error:
        option = {"schedule.cron.time_zone": "--tz", "schedule.cron.expression": "EXPR"}.get(error.field, error.field)
        print(f"tickwheel cron next: {option}: {error.reason}", file=err)
        return 2
    for fire in fires:
        line = format_instant(fire.due_at if args.job_id else fire.nominal_at)
        if args.explain:
            line += "\t" + fire.local_text
            if fire.note:
                line += "\t" + fire.note
            named = terms_naming(day_terms, datetime.fromisoformat(fire.local_text).date()) if day_terms else []
            if named:
                line += "\tday: " + "; ".join(term.describe() for term in named)
        print(line, file=out)
    return 0


def _take(engine: Engine, schedule: Schedule, after: datetime, count: int):
    for index, fire in enumerate(engine.iter_fires(schedule, after)):
        yield fire
        if index + 1 >= count:
            return
