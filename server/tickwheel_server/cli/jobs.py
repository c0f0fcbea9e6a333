"""``tickwheel job ...`` and ``tickwheel dlq ...``: SchedulerService over the
Python SDK. Each handler makes its calls, then prints either the response as
one JSON document (``--json``) or readable lines; commands that create
something print its id last."""

from __future__ import annotations

import argparse
from datetime import timezone
from typing import Any

from tickwheel_server.cli import output as fmt
from tickwheel_server.cli.context import Context
from tickwheel_server.cli.parse import (
    UsageError,
    parse_duration,
    parse_instant,
    parse_key_limit,
    parse_key_value,
    read_payload,
)
from tickwheel_server.cli.tree import group, leaf

OVERLAP = ("skip", "queue_one", "allow", "replace")
MISFIRE = ("run_once", "run_all", "skip")
CALENDAR_RULES = ("only", "next", "previous", "skip")
STATES = ("active", "paused", "completed")
STATUSES = ("scheduled", "waiting", "running", "succeeded", "dead", "canceled")


# --- parsers ---------------------------------------------------------------------


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    jobs = group(subparsers, "job", parents, "create, inspect and control jobs (tenant API key)")

    p = leaf(jobs, "create", parents, create, auth="tenant", help="create a job; prints its id last",
             description="Create a job. Prints the job id on the last line of stdout.")
    p.add_argument("--name", required=True, help="human-readable name, 1 to 200 characters")
    _add_spec_args(p, create=True)
    p.add_argument("--request-id", metavar="ID",
                   help="idempotency key: repeating the command with it returns the same job "
                        "(default: a fresh uuid4)")

    from tickwheel_server.cli import jobbulk, jobimport, safechanges

    jobimport.register(jobs, parents)

    p = leaf(jobs, "get", parents, get, auth="tenant", help="show a job, its last run and next runs")
    p.add_argument("id", metavar="ID")
    p.add_argument("--next-runs", type=int, default=5, metavar="N", help="upcoming fires to show (default 5)")

    p = leaf(jobs, "list", parents, list_jobs, auth="tenant", help="list the tenant's jobs")
    p.add_argument("--state", choices=STATES)
    p.add_argument("--name-prefix", metavar="P")
    p.add_argument("--page-size", type=int, default=0, metavar="N", help="jobs per request (server default 100)")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="stop after N jobs (default: all)")

    p = leaf(jobs, "update", parents, update, auth="tenant", help="change the fields of one job or many",
             description="Change the fields whose flags are given (the update mask is built from them). "
                         "--version is the version you last read (job get); a stale one is refused. "
                         "With --file (ID VERSION lines) the same change goes to every job listed, through "
                         "BatchUpdateJobs; each job's outcome is reported, exit status 1 when any failed.")
    p.add_argument("ids", metavar="ID", nargs="*")
    p.add_argument("--version", type=int, metavar="V")
    p.add_argument("--name")
    _add_spec_args(p, create=False)
    jobbulk.add_bulk_args(p, update=True)
    safechanges.add_dry_run_args(p)
    safechanges.register(jobs, parents)

    p = leaf(jobs, "pause", parents, pause, auth="tenant",
             help="pause jobs (their executions not started are held until resumed)")
    p.add_argument("ids", metavar="ID", nargs="*")
    p.add_argument("--reason", default="")
    jobbulk.add_bulk_args(p, update=False)

    p = leaf(jobs, "resume", parents, resume, auth="tenant", help="resume paused jobs (late runs within the misfire threshold)")
    p.add_argument("ids", metavar="ID", nargs="*")
    jobbulk.add_bulk_args(p, update=False)

    p = leaf(jobs, "delete", parents, delete, auth="tenant", help="delete jobs (history is kept)",
             description="Delete the jobs named (and those of --file) and cancel their executions not "
                         "started. Several jobs go through BatchDeleteJobs; each job's outcome is reported, "
                         "exit status 1 when any failed.")
    p.add_argument("ids", metavar="ID", nargs="*")
    p.add_argument("--version", type=int, default=0, metavar="V",
                   help="refuse unless the job is at this version (one ID)")
    jobbulk.add_bulk_args(p, update=False)

    p = leaf(jobs, "trigger", parents, trigger, auth="tenant", help="run a job now; prints the execution id last")
    p.add_argument("id", metavar="ID")
    p.add_argument("--request-id", metavar="ID", help="runs once per request id (default: a fresh uuid4)")
    payload = p.add_mutually_exclusive_group()
    payload.add_argument("--payload", metavar="JSON", help="payload for this run only")
    payload.add_argument("--payload-file", metavar="FILE", help="payload bytes from FILE ('-' for stdin)")
    p.add_argument("--allow-overlap", action="store_true", help="run beside a running execution instead of queueing")

    p = leaf(jobs, "backfill", parents, backfill, auth="tenant",
             help="create the occurrences a window [from, to) had",
             description="Create the occurrences the schedule had in [--from, --to), with their normal ids "
                         "(a repeated backfill never duplicates). Windows over the server's cap are split "
                         "automatically; progress goes to stderr.")
    p.add_argument("id", metavar="ID")
    p.add_argument("--from", dest="from_at", required=True, metavar="RFC3339")
    p.add_argument("--to", dest="to_at", required=True, metavar="RFC3339", help="exclusive; 'now' allowed")
    p.add_argument("--dry-run", action="store_true", help="create nothing; list what would be created")
    p.add_argument("--allow-overlap", action="store_true")

    p = leaf(jobs, "history", parents, history, auth="tenant", help="a job's executions, newest first")
    p.add_argument("id", metavar="ID")
    p.add_argument("--status", action="extend", nargs="+", choices=STATUSES, default=[], metavar="S",
                   help=f"only these statuses ({', '.join(STATUSES)})")
    p.add_argument("--from", dest="from_at", metavar="RFC3339", help="nominally at or after")
    p.add_argument("--to", dest="to_at", metavar="RFC3339", help="nominally before")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N executions (default 20)")
    p.add_argument("--attempts", action="store_true",
                   help="also every attempt of each execution: start, end, lateness, worker, status, error")

    p = leaf(jobs, "preview", parents, preview, auth="tenant",
             help="next fires of a job, or of a cron expression")
    p.add_argument("id", metavar="ID", nargs="?")
    p.add_argument("--cron", metavar="EXPR")
    p.add_argument("--tz", metavar="ZONE")
    p.add_argument("--count", type=int, default=5, metavar="N")
    p.add_argument("--after", metavar="RFC3339", help="fires strictly after (default now)")

    dlq = group(subparsers, "dlq", parents, "dead-lettered executions (tenant API key)")
    p = leaf(dlq, "list", parents, dlq_list, auth="tenant", help="dead executions, newest first")
    p.add_argument("--job", metavar="ID", default="")
    p.add_argument("--limit", type=int, default=50, metavar="N")
    p = leaf(dlq, "replay", parents, dlq_replay, auth="tenant", help="start a dead execution again, same id")
    p.add_argument("execution_id", metavar="EXECUTION_ID")


def _add_spec_args(p: argparse.ArgumentParser, *, create: bool) -> None:
    when = p.add_mutually_exclusive_group(required=create)
    when.add_argument("--cron", metavar="EXPR", help="five-field cron expression")
    when.add_argument("--at", metavar="RFC3339", help="one-off instant")
    p.add_argument("--tz", metavar="ZONE", help="IANA zone of --cron (default UTC)")
    target = p.add_mutually_exclusive_group(required=create)
    target.add_argument("--handler", metavar="NAME", help="run a worker handler")
    target.add_argument("--url", metavar="URL", help="call an HTTP endpoint")
    p.add_argument("--method", help="HTTP method for --url (default POST)")
    p.add_argument("--header", action="append", metavar="NAME:VALUE", help="HTTP header for --url (repeatable)")
    payload = p.add_mutually_exclusive_group()
    payload.add_argument("--payload", metavar="JSON", help="payload, a JSON document")
    payload.add_argument("--payload-file", metavar="FILE", help="payload bytes from FILE ('-' for stdin)")
    jitter = p.add_mutually_exclusive_group()
    jitter.add_argument("--exact", action="store_true", default=None, help="no jitter at all")
    jitter.add_argument("--jitter", metavar="DURATION", help="jitter window (cron default 60s)")
    p.add_argument("--overlap", choices=OVERLAP, help="when the previous run still runs (default skip)")
    p.add_argument("--max-attempts", type=int, metavar="N", help="attempts including the first (default 5)")
    p.add_argument("--initial-backoff", metavar="DURATION", help="retry backoff base (default 1s)")
    p.add_argument("--max-backoff", metavar="DURATION", help="retry backoff cap (default 1h)")
    p.add_argument("--attempt-timeout", metavar="DURATION", help="how long one attempt may run (default 5m)")
    p.add_argument("--misfire", choices=MISFIRE, help="missed occurrences (default run_once)")
    p.add_argument("--misfire-threshold", metavar="DURATION", help="later than this is missed (default 60s)")
    p.add_argument("--lateness-threshold", metavar="DURATION", help="alert when not started by then (default 5m)")
    p.add_argument("--start-at", metavar="RFC3339")
    p.add_argument("--end-at", metavar="RFC3339")
    p.add_argument("--max-runs", type=int, metavar="N")
    p.add_argument("--dst-gap", choices=("auto", "shift", "skip"))
    p.add_argument("--dst-repeat", choices=("auto", "once", "both"))
    p.add_argument("--label", action="append", metavar="KEY=VALUE", help="repeatable; replaces all labels")
    p.add_argument("--concurrency-key", action="append", metavar="KEY=LIMIT",
                   help="repeatable; replaces all concurrency keys")
    calendar = p.add_mutually_exclusive_group()
    calendar.add_argument("--calendar", metavar="NAME", help="one of the tenant's business-day calendars")
    if not create:
        calendar.add_argument("--no-calendar", action="store_true", default=None,
                              help="the job no longer names a calendar")
    p.add_argument("--calendar-rule", choices=CALENDAR_RULES,
                   help="an occurrence off a business day: only (dropped), next (next business day, same wall "
                        "time), previous (previous business day, same wall time), skip (skipped and recorded)")


# --- building a Job from flags ------------------------------------------------------


def _needs_current(a: argparse.Namespace) -> bool:
    """Whether an update touches only part of a sub-message, so the rest
    must come from the stored job (one GetJob)."""
    return any(
        v is not None
        for v in (a.cron, a.tz, a.dst_gap, a.dst_repeat, a.method, a.header,
                  a.max_attempts, a.initial_backoff, a.max_backoff)
    ) or (getattr(a, "calendar", None) is None) != (getattr(a, "calendar_rule", None) is None)  # fmt: skip


def apply_spec(job: Any, a: argparse.Namespace, current: Any | None = None) -> list[str]:
    """Sets on ``job`` the fields whose flags were given and returns their
    ``Job`` field names (the update mask). ``current`` is the stored job,
    used to complete sub-messages a flag only partly changes (``--tz``
    alone keeps the stored expression)."""
    from tickwheel import builders
    from tickwheel.v1 import job_pb2

    paths: list[str] = []
    if getattr(a, "name", None) is not None:
        job.name = a.name
        paths.append("name")

    if a.cron is not None or a.tz is not None or a.at is not None:
        if a.at is not None:
            if a.tz is not None:
                raise UsageError("--tz applies to --cron, not --at (an RFC 3339 instant carries its offset)")
            job.schedule.once_at.CopyFrom(builders.timestamp(parse_instant(a.at)))
        else:
            stored = current.schedule.cron if current is not None and current.schedule.HasField("cron") else None
            expression = a.cron if a.cron is not None else (stored.expression if stored else None)
            if expression is None:
                raise UsageError("--tz needs --cron: the job has no cron schedule")
            # An update that changes only the expression keeps the job's zone.
            zone = a.tz if a.tz is not None else (stored.time_zone if stored else "UTC")
            job.schedule.cron.CopyFrom(job_pb2.CronSchedule(expression=expression, time_zone=zone or "UTC"))
        paths.append("schedule")

    if a.dst_gap is not None or a.dst_repeat is not None:
        if current is not None:
            job.dst_policy.CopyFrom(current.dst_policy)
        job.dst_policy.MergeFrom(builders.dst_policy(a.dst_gap, a.dst_repeat))
        paths.append("dst_policy")

    if a.exact:
        job.jitter.exact = True
        paths.append("jitter")
    elif a.jitter is not None:
        job.jitter.window.CopyFrom(builders.duration(parse_duration(a.jitter)))
        paths.append("jitter")

    for flag, field in (("start_at", "start_at"), ("end_at", "end_at")):
        value = getattr(a, flag)
        if value is not None:
            getattr(job, field).CopyFrom(builders.timestamp(parse_instant(value)))
            paths.append(field)
    if a.max_runs is not None:
        if a.max_runs < 0:
            raise UsageError("--max-runs must be 0 (unlimited) or more")
        job.max_runs = a.max_runs
        paths.append("max_runs")

    headers = dict(parse_key_value(h, option="--header", separator=":") for h in a.header or [])
    headers = {k: v.strip() for k, v in headers.items()}
    if a.handler is not None:
        if a.method is not None or headers:
            raise UsageError("--method and --header apply to --url targets")
        job.target.CopyFrom(builders.handler_target(a.handler))
        paths.append("target")
    elif a.url is not None or a.method is not None or headers:
        base = current.target.http if current is not None and current.target.HasField("http") else None
        url = a.url if a.url is not None else (base.url if base else None)
        if url is None:
            raise UsageError("--method and --header need --url")
        method = a.method if a.method is not None else (base.method if base and a.url is None else "")
        merged = dict(base.headers) if base is not None and a.url is None else {}
        merged.update(headers)
        job.target.CopyFrom(builders.http_target(url, method.upper(), merged))
        paths.append("target")

    payload = read_payload(a.payload, a.payload_file)
    if payload is not None:
        job.payload = payload
        paths.append("payload")

    if a.attempt_timeout is not None:
        job.timeout.CopyFrom(builders.duration(parse_duration(a.attempt_timeout)))
        paths.append("timeout")

    if a.max_attempts is not None or a.initial_backoff is not None or a.max_backoff is not None:
        if current is not None:
            job.retry_policy.CopyFrom(current.retry_policy)
        if a.max_attempts is not None:
            if a.max_attempts < 1:
                raise UsageError("--max-attempts must be at least 1")
            job.retry_policy.max_attempts = a.max_attempts
        if a.initial_backoff is not None:
            job.retry_policy.initial_backoff.CopyFrom(builders.duration(parse_duration(a.initial_backoff)))
        if a.max_backoff is not None:
            job.retry_policy.max_backoff.CopyFrom(builders.duration(parse_duration(a.max_backoff)))
        paths.append("retry_policy")

    if a.overlap is not None:
        job.overlap_policy = builders.overlap_policy(a.overlap)
        paths.append("overlap_policy")
    if a.misfire is not None:
        job.misfire_policy = builders.misfire_policy(a.misfire)
        paths.append("misfire_policy")
    for flag, field in (("misfire_threshold", "misfire_threshold"), ("lateness_threshold", "lateness_threshold")):
        value = getattr(a, flag)
        if value is not None:
            getattr(job, field).CopyFrom(builders.duration(parse_duration(value)))
            paths.append(field)

    if a.label is not None:
        job.labels.clear()
        job.labels.update(dict(parse_key_value(x, option="--label") for x in a.label))
        paths.append("labels")
    if a.concurrency_key is not None:
        del job.concurrency_keys[:]
        for text in a.concurrency_key:
            key, limit = parse_key_limit(text, option="--concurrency-key")
            job.concurrency_keys.add(key=key, limit=limit)
        paths.append("concurrency_keys")
    calendar_name, rule_name = getattr(a, "calendar", None), getattr(a, "calendar_rule", None)
    if getattr(a, "no_calendar", None):
        if rule_name is not None:
            raise UsageError("--calendar-rule needs a calendar: drop --no-calendar")
        job.ClearField("calendar")
        paths.append("calendar")
    elif calendar_name is not None or rule_name is not None:
        stored = current.calendar if current is not None and current.HasField("calendar") else None
        name = calendar_name if calendar_name is not None else (stored.name if stored else None)
        rule = rule_name if rule_name is not None else (stored.rule if stored else None)
        if name is None:
            raise UsageError("--calendar-rule needs --calendar NAME: the job names no calendar")
        if rule is None:
            raise UsageError("--calendar needs --calendar-rule (only, next, previous or skip)")
        job.calendar.CopyFrom(builders.job_calendar(name, rule))
        paths.append("calendar")
    return paths


# --- job commands -----------------------------------------------------------------------


def _state(job: Any) -> str:
    from tickwheel.v1 import job_pb2

    return fmt.enum_name(job_pb2.JobState, job.state, "JOB_STATE_")


def _status(value: int) -> str:
    from tickwheel.v1 import job_pb2

    return fmt.enum_name(job_pb2.ExecutionStatus, value, "EXECUTION_STATUS_")


def create(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import job_pb2

    job = job_pb2.Job()
    apply_spec(job, a)
    response = ctx.client.create_job(job, request_id=a.request_id)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    stored = response.job
    verb = "created" if response.created else "already created by this request id:"
    ctx.out(f'{verb} job "{stored.name}" ({_state(stored)}), {fmt.fmt_schedule(stored)}, '
            f"next run {fmt.fmt_ts(stored, 'next_run_at')}")  # fmt: skip
    ctx.out(stored.id)
    return 0


def _print_job(ctx: Context, job: Any) -> None:
    rows = [
        ("id", job.id),
        ("name", job.name),
        ("state", _state(job) + (f" ({job.pause_reason})" if job.pause_reason else "")),
        ("schedule", fmt.fmt_schedule(job)),
        ("target", fmt.fmt_target(job)),
        ("next run", f"{fmt.fmt_ts(job, 'next_run_at')} (due {fmt.fmt_ts(job, 'next_due_at')})"),
        ("runs", str(job.run_count) + (f" of {job.max_runs}" if job.max_runs else "")),
        ("version", str(job.version)),
    ]
    error: list[str] = []
    if job.HasField("last_run"):
        last = job.last_run
        text = f"{last.execution_id} {_status(last.status)} at {fmt.fmt_ts(last, 'finished_at')}"
        if last.error:
            first, *error = fmt.error_lines(last.error)
            text += f": {first}"
        rows.append(("last run", text))
    if job.labels:
        rows.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(job.labels.items()))))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        ctx.out(f"{key + ':':<{width + 1}} {fmt.printable(value)}")
        if key == "last run":  # the error's further lines, indented under it
            for line in error:
                ctx.out(f"{'':<{width + 2}}{line}")


def get(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.get_job(a.id, next_runs=a.next_runs)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    _print_job(ctx, response.job)
    if response.next_runs:
        ctx.out("next runs:")
        _print_fires(ctx, response.next_runs)
    return 0


def _print_fires(ctx: Context, fires: Any) -> None:
    fmt.table(
        ("NOMINAL (UTC)", "LOCAL", "DUE", "NOTE"),
        ((fmt.fmt_ts(f, "nominal_at"), f.local_time or "-", "skipped" if f.skipped else fmt.fmt_ts(f, "due_at"),
          f.note) for f in fires),
        ctx.stdout,
    )


def list_jobs(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import scheduler_pb2

    merged = scheduler_pb2.ListJobsResponse()
    client = ctx.client
    for page in client.pages(client.list_jobs, state=a.state, name_prefix=a.name_prefix or "", page_size=a.page_size):
        merged.jobs.extend(page.jobs)
        if a.limit and len(merged.jobs) >= a.limit:
            del merged.jobs[a.limit :]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    fmt.table(
        ("ID", "NAME", "STATE", "SCHEDULE", "NEXT RUN"),
        ((j.id, j.name, _state(j), fmt.fmt_schedule(j), fmt.fmt_ts(j, "next_run_at")) for j in merged.jobs),
        ctx.stdout,
    )
    return 0


def update(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import job_pb2

    from tickwheel_server.cli import jobbulk, safechanges

    if jobbulk.wants_bulk(a):
        if a.dry_run:
            raise UsageError("--dry-run previews one job at a time")
        return jobbulk.update_many(ctx, a)
    if a.diff_window is not None and not a.dry_run:
        raise UsageError("--diff-window goes with --dry-run")
    if a.version is None:
        raise UsageError("--version is required: the version you last read (job get)")
    (a.id,) = a.ids
    current = ctx.client.get_job(a.id).job if _needs_current(a) else None
    job = job_pb2.Job(id=a.id, version=a.version)
    paths = apply_spec(job, a, current)
    if not paths:
        raise UsageError("nothing to update: give the flags of the fields to change")
    if a.dry_run:
        return safechanges.print_dry_run(
            ctx, ctx.client.preview_update(job, update_mask=paths, diff_window=safechanges.diff_window(a))
        )
    response = ctx.client.update_job(job, update_mask=paths)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"updated job {response.job.id} ({', '.join(paths)}), now version {response.job.version}, "
            f"next run {fmt.fmt_ts(response.job, 'next_run_at')}")  # fmt: skip
    return 0


def pause(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel_server.cli import jobbulk

    if jobbulk.wants_bulk(a):
        return jobbulk.pause_many(ctx, a)
    (a.id,) = a.ids
    response = ctx.client.pause_job(a.id, reason=a.reason)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"paused job {response.job.id}; {response.held_executions} execution(s) not started are held until resumed")
    return 0


def resume(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel_server.cli import jobbulk

    if jobbulk.wants_bulk(a):
        return jobbulk.resume_many(ctx, a)
    (a.id,) = a.ids
    response = ctx.client.resume_job(a.id)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"resumed job {response.job.id}, next run {fmt.fmt_ts(response.job, 'next_run_at')}; "
            f"{response.released_executions} held execution(s) released")  # fmt: skip
    if response.HasField("skipped") and response.skipped.count:
        s = response.skipped
        ctx.out(f"skipped while paused: {s.count} occurrence(s) from {fmt.fmt_ts(s, 'from_at')} "
                f"to {fmt.fmt_ts(s, 'to_at')}")  # fmt: skip
    return 0


def delete(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel_server.cli import jobbulk

    if jobbulk.wants_bulk(a):
        return jobbulk.delete_many(ctx, a)
    (a.id,) = a.ids
    response = ctx.client.delete_job(a.id, version=a.version)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"deleted job {a.id}; {response.canceled_executions} execution(s) not started were canceled")
    return 0


def trigger(ctx: Context, a: argparse.Namespace) -> int:
    payload = read_payload(a.payload, a.payload_file) or b""
    response = ctx.client.trigger_job(a.id, request_id=a.request_id, payload=payload, allow_overlap=a.allow_overlap)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    execution = response.execution
    verb = "triggered" if response.created else "already triggered by this request id:"
    ctx.out(f"{verb} job {execution.job_id or a.id}, execution {_status(execution.status)}")
    ctx.out(execution.id)
    return 0


def backfill(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel_server.cli.backfill import backfill_in_chunks

    start, end = parse_instant(a.from_at), parse_instant(a.to_at)
    if not start < end:
        raise UsageError("--from must be before --to")
    client = ctx.client
    total_seconds = (end - start).total_seconds()
    # A progress line only on a terminal, and never beside --json: piped or
    # scripted output stays the result alone (as `job import` does).
    live = not ctx.json and hasattr(ctx.stderr, "isatty") and ctx.stderr.isatty()

    def call(lo: Any, hi: Any) -> Any:
        return client.backfill_job(a.id, lo, hi, dry_run=a.dry_run, allow_overlap=a.allow_overlap)

    def progress(chunks: int, until: Any, merged: Any) -> None:
        done = 100.0 * (until - start).total_seconds() / total_seconds
        line = (f"backfill: {done:5.1f}% through {until.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}, "
                f"{chunks} chunk(s), {merged.created_count} created, {merged.existing_count} existing")  # fmt: skip
        ctx.stderr.write("\r" + line)
        ctx.stderr.flush()

    merged, chunks = backfill_in_chunks(call, start, end, progress=progress if live else None)
    if live and chunks > 1:
        ctx.stderr.write("\n")
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    if a.dry_run:
        fmt.table(
            ("EXECUTION", "NOMINAL (UTC)", "EXISTS"),
            ((o.execution_id, fmt.fmt_ts(o, "nominal_at"), "yes" if o.already_exists else "no")
             for o in merged.occurrences),
            ctx.stdout,
        )  # fmt: skip
        ctx.out(f"dry run: would create {merged.created_count}, {merged.existing_count} already exist")
    else:
        ctx.out(f"backfilled job {a.id}: {merged.created_count} created, {merged.existing_count} already existed")
    return 0


def history(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import scheduler_pb2

    client = ctx.client
    merged = scheduler_pb2.ListExecutionsResponse()
    seen_skips: set[bytes] = set()
    limit = max(a.limit, 1)
    kwargs: dict[str, Any] = {"statuses": a.status, "page_size": min(limit, 500)}
    if a.from_at:
        kwargs["from_at"] = parse_instant(a.from_at)
    if a.to_at:
        kwargs["to_at"] = parse_instant(a.to_at)
    for page in client.pages(client.list_executions, job_id=a.id, **kwargs):
        merged.executions.extend(page.executions)
        for skip in page.skips:
            key = skip.SerializeToString(deterministic=True)
            if key not in seen_skips:
                seen_skips.add(key)
                merged.skips.append(skip)
        if len(merged.executions) >= limit:
            del merged.executions[limit:]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    rows = []
    for e in merged.executions:
        last = e.attempts[-1] if e.attempts else None
        lateness = fmt.fmt_duration(last, "lateness") if last is not None else "-"
        rows.append((e.id, fmt.fmt_ts(e, "nominal_at"), _status(e.status), e.attempt or "-", lateness,
                     fmt.one_line(e.error or e.dead_reason, 60)))  # fmt: skip
    fmt.table(("EXECUTION", "NOMINAL (UTC)", "STATUS", "ATTEMPT", "LATENESS", "ERROR"), rows, ctx.stdout)
    from tickwheel.v1 import execution_pb2

    if a.attempts:
        ctx.out("attempts:")
        fmt.table(
            ("EXECUTION", "ATTEMPT", "STARTED (UTC)", "FINISHED (UTC)", "LATENESS", "WORKER", "STATUS", "ERROR"),
            ((e.id, t.attempt, fmt.fmt_ts(t, "started_at"), fmt.fmt_ts(t, "finished_at"),
              fmt.fmt_duration(t, "lateness"), t.worker_id or "-",
              fmt.enum_name(execution_pb2.AttemptStatus, t.status, "ATTEMPT_STATUS_"), fmt.one_line(t.error, 60) or "-")
             for e in merged.executions for t in e.attempts),
            ctx.stdout,
        )  # fmt: skip
    if merged.skips:
        ctx.out("skipped:")
        for s in merged.skips:
            reason = fmt.enum_name(execution_pb2.SkipReason, s.reason, "SKIP_REASON_")
            ctx.out(f"  {s.count} occurrence(s) {fmt.fmt_ts(s, 'from_at')} .. {fmt.fmt_ts(s, 'to_at')}: {reason}")
    return 0


def preview(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import job_pb2

    if (a.id is None) == (a.cron is None):
        raise UsageError("give a job ID or --cron EXPR (with --tz ZONE), not both")
    if a.id is not None and a.tz is not None:
        raise UsageError("--tz goes with --cron")
    after = parse_instant(a.after) if a.after else None
    if a.id is not None:
        response = ctx.client.preview_schedule(a.id, after=after, count=a.count)
    else:
        job = job_pb2.Job(schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression=a.cron, time_zone=a.tz or "UTC")))
        response = ctx.client.preview_schedule(job=job, after=after, count=a.count)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    _print_fires(ctx, response.fires)
    if response.tzdata_version:
        ctx.note(f"tzdata {response.tzdata_version}")
    return 0


# --- dlq commands ------------------------------------------------------------------------


def dlq_list(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import scheduler_pb2

    client = ctx.client
    merged = scheduler_pb2.ListDeadLettersResponse()
    limit = max(a.limit, 1)
    for page in client.pages(client.list_dead_letters, job_id=a.job, page_size=min(limit, 500)):
        merged.executions.extend(page.executions)
        if len(merged.executions) >= limit:
            del merged.executions[limit:]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    fmt.table(
        ("EXECUTION", "JOB", "NOMINAL (UTC)", "ATTEMPT", "REASON"),
        ((e.id, e.job_id, fmt.fmt_ts(e, "nominal_at"), e.attempt, fmt.one_line(e.dead_reason or e.error, 60))
         for e in merged.executions),
        ctx.stdout,
    )  # fmt: skip
    return 0


def dlq_replay(ctx: Context, a: argparse.Namespace) -> int:
    response = ctx.client.replay_dead_letter(a.execution_id)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    e = response.execution
    ctx.out(f"replayed {e.id}: {_status(e.status)}, ready at {fmt.fmt_ts(e, 'ready_at')}")
    return 0

