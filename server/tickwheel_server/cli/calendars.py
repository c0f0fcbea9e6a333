"""``tickwheel calendar ...``: business-day calendars over the Python SDK,
holidays given as dates or imported from an iCalendar file (:mod:`.ics`).
Each handler prints the response as one JSON document (``--json``) or
readable lines; ``create`` prints the calendar's name last."""

from __future__ import annotations

import argparse
from datetime import date
from typing import Any

from tickwheel_server.cli import output as fmt
from tickwheel_server.cli.context import Context
from tickwheel_server.cli.parse import UsageError
from tickwheel_server.cli.tree import group, leaf

ICS_YEARS = 10
"""How many years past this one a yearly .ics rule is expanded by default."""


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    calendars = group(subparsers, "calendar", parents, "business-day calendars (tenant API key)")

    p = leaf(calendars, "create", parents, create, auth="tenant", help="create a calendar; prints its name last",
             description="Create a business-day calendar. Holidays come from --holiday dates and/or an "
                         "iCalendar file (--holidays-ics): its all-day events, multi-day ones expanded, "
                         "yearly rules expanded up to --ics-until.")
    p.add_argument("name", metavar="NAME", help="1 to 64 characters of [A-Za-z0-9_.-]")
    p.add_argument("--tz", required=True, metavar="ZONE", help="IANA time zone whose local days the dates are")
    _add_definition_args(p)
    p.add_argument("--request-id", metavar="ID",
                   help="idempotency key: repeating the command with it returns the same calendar "
                        "(default: a fresh uuid4)")

    p = leaf(calendars, "get", parents, get, auth="tenant", help="show a calendar with its holidays and half-days")
    p.add_argument("name", metavar="NAME")

    p = leaf(calendars, "list", parents, list_calendars, auth="tenant", help="list the tenant's calendars")
    p.add_argument("--page-size", type=int, default=0, metavar="N", help="calendars per request (server default 100)")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="stop after N calendars (default: all)")

    p = leaf(calendars, "update", parents, update, auth="tenant", help="change a calendar",
             description="Replace the fields whose flags are given (the update mask is built from them): "
                         "--holiday and --holidays-ics together replace the holidays. --version is the "
                         "version you last read (calendar get); a stale one is refused.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, required=True, metavar="V")
    p.add_argument("--tz", metavar="ZONE")
    _add_definition_args(p)
    p.add_argument("--no-holidays", action="store_true", help="remove every holiday")
    p.add_argument("--no-half-days", action="store_true", help="remove every half-day")

    p = leaf(calendars, "delete", parents, delete, auth="tenant", help="delete a calendar")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, default=0, metavar="V", help="refuse unless the calendar is at this version")


def _add_definition_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--business-days", metavar="DAYS",
                   help="comma-separated weekdays that are business days, e.g. mon,tue,wed,thu,fri "
                        "(the default when creating) or sun-thu as sun,mon,tue,wed,thu")
    p.add_argument("--holiday", action="append", metavar="YYYY-MM-DD", help="a holiday date (repeatable)")
    p.add_argument("--holidays-ics", metavar="FILE", help="import the all-day events of an iCalendar file as holidays")
    p.add_argument("--ics-until", metavar="YYYY-MM-DD",
                   help=f"expand the file's yearly rules up to this date (default: the end of the year "
                        f"{ICS_YEARS} years from now)")
    p.add_argument("--half-day", action="append", metavar="YYYY-MM-DD",
                   help="a business day with shortened hours (repeatable)")


def _parse_date(text: str, option: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} expects a date YYYY-MM-DD, got {text!r}") from None


def _holidays(ctx: Context, a: argparse.Namespace) -> list[str] | None:
    """The holidays the flags give (None when neither --holiday nor --holidays-ics is given)."""
    if a.holiday is None and a.holidays_ics is None:
        if a.ics_until is not None:
            raise UsageError("--ics-until applies to --holidays-ics")
        return None
    found = {_parse_date(text, "--holiday") for text in a.holiday or []}
    if a.holidays_ics is not None:
        from tickwheel_server.cli.ics import IcsError, holidays_from_ics, read_ics

        until = (_parse_date(a.ics_until, "--ics-until") if a.ics_until is not None
                 else date(date.today().year + ICS_YEARS, 12, 31))  # fmt: skip
        try:
            imported = holidays_from_ics(read_ics(a.holidays_ics), until=until)
        except IcsError as error:
            raise UsageError(f"--holidays-ics {a.holidays_ics}: {error}") from None
        ctx.note(f"imported {len(imported.dates)} holiday dates from {imported.events} events of "
                 f"{a.holidays_ics} (yearly rules up to {until.isoformat()}"
                 + (f"; {imported.cancelled} cancelled events left out)" if imported.cancelled else ")"))  # fmt: skip
        found.update(imported.dates)
    return [d.isoformat() for d in sorted(found)]


def _business_days(text: str | None) -> list[int] | None:
    if text is None:
        return None
    from tickwheel import builders

    try:
        return [builders.weekday(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise UsageError(f"--business-days: {error}") from None


def _weekday_names(days: Any) -> str:
    names = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
    return ",".join(names[d - 1] if 1 <= d <= 7 else str(d) for d in days)


def create(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import calendar_pb2

    calendar = calendar_pb2.Calendar(name=a.name, time_zone=a.tz)
    calendar.business_days.extend(_business_days(a.business_days) or [])
    calendar.holidays.extend(_holidays(ctx, a) or [])
    calendar.half_days.extend(d.isoformat() for d in sorted({_parse_date(t, "--half-day") for t in a.half_day or []}))
    response = ctx.client.create_calendar(calendar, request_id=a.request_id)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    stored = response.calendar
    verb = "created" if response.created else "already created by this request id:"
    ctx.out(f'{verb} calendar "{stored.name}" ({stored.time_zone}, business days '
            f"{_weekday_names(stored.business_days)}, {stored.holiday_count} holidays, "
            f"{stored.half_day_count} half-days), version {stored.version}")  # fmt: skip
    ctx.out(stored.name)
    return 0


def get(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.get_calendar(a.name)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    c = response.calendar
    rows = [
        ("name", c.name),
        ("time zone", c.time_zone),
        ("business days", _weekday_names(c.business_days)),
        ("holidays", f"{c.holiday_count}: {' '.join(c.holidays)}" if c.holidays else "0"),
        ("half-days", f"{c.half_day_count}: {' '.join(c.half_days)}" if c.half_days else "0"),
        ("version", str(c.version)),
        ("updated", fmt.fmt_ts(c, "updated_at")),
    ]
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        ctx.out(f"{key + ':':<{width + 1}} {value}")
    return 0


def list_calendars(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import calendar_pb2

    merged = calendar_pb2.ListCalendarsResponse()
    client = ctx.client
    for page in client.pages(client.list_calendars, page_size=a.page_size):
        merged.calendars.extend(page.calendars)
        if a.limit and len(merged.calendars) >= a.limit:
            del merged.calendars[a.limit :]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    fmt.table(
        ("NAME", "TIME ZONE", "BUSINESS DAYS", "HOLIDAYS", "HALF-DAYS", "VERSION"),
        ((c.name, c.time_zone, _weekday_names(c.business_days), c.holiday_count, c.half_day_count, c.version)
         for c in merged.calendars),
        ctx.stdout,
    )  # fmt: skip
    return 0


def update(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import calendar_pb2

    calendar = calendar_pb2.Calendar(name=a.name, version=a.version)
    paths = []
    if a.tz is not None:
        calendar.time_zone = a.tz
        paths.append("time_zone")
    days = _business_days(a.business_days)
    if days is not None:
        calendar.business_days.extend(days)
        paths.append("business_days")
    holidays = _holidays(ctx, a)
    if holidays is not None and a.no_holidays:
        raise UsageError("--no-holidays and --holiday/--holidays-ics exclude each other")
    if holidays is not None or a.no_holidays:
        calendar.holidays.extend(holidays or [])
        paths.append("holidays")
    if a.half_day is not None and a.no_half_days:
        raise UsageError("--no-half-days and --half-day exclude each other")
    if a.half_day is not None or a.no_half_days:
        calendar.half_days.extend(sorted({_parse_date(t, "--half-day").isoformat() for t in a.half_day or []}))
        paths.append("half_days")
    if not paths:
        raise UsageError("nothing to update: give the flags of the fields to change")
    response = ctx.client.update_calendar(calendar, update_mask=paths)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"updated calendar {response.calendar.name} ({', '.join(paths)}), now version {response.calendar.version}")
    if response.changed_run_count:
        shown = len(response.changed_runs)
        more = f" (the first {shown} below)" if shown < response.changed_run_count else ""
        ctx.out(f"{response.changed_run_count} created run(s) of its {response.job_count} job(s) moved or "
                f"dropped{more}:")  # fmt: skip
        fmt.table(
            ("EXECUTION", "DUE BEFORE", "DUE NOW"),
            ((c.execution_id, fmt.fmt_ts(c, "old_due_at"),
              fmt.fmt_ts(c, "new_due_at") if c.HasField("new_due_at") else "dropped (canceled)")
             for c in response.changed_runs),
            ctx.stdout,
        )  # fmt: skip
    return 0


def delete(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.delete_calendar(a.name, version=a.version)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"deleted calendar {a.name}")
    return 0
