"""Safe job changes on the command line: a change's runs before it is made, its revisions after, rollback to one.

``job update --dry-run`` sends UpdateJob with ``validate_only`` and prints
the runs the change adds, removes and moves (``--json``: the response).
``job revisions ID`` lists what the job was at each kept version;
``job rollback ID --to-version N`` reads revision N (GetJob ``revision``)
and updates the job to that definition at its current version, with an
empty mask (docs/architecture.md, "Job changes"): a rollback is an update
like any other and keeps a revision of its own.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from tickwheel_server.cli import output as fmt
from tickwheel_server.cli.context import Context
from tickwheel_server.cli.parse import UsageError
from tickwheel_server.cli.tree import leaf

MAX_DIFF_DAYS = 366


def add_dry_run_args(p: argparse.ArgumentParser) -> None:
    """``--dry-run`` and ``--diff-window`` on ``job update``."""
    p.add_argument("--dry-run", action="store_true",
                   help="change nothing: check the change and print the runs it adds, removes and moves")
    p.add_argument("--diff-window", type=int, metavar="DAYS",
                   help=f"with --dry-run: compare the runs this many days ahead (1 to {MAX_DIFF_DAYS}, default 30)")  # fmt: skip


def register(jobs: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = leaf(jobs, "revisions", parents, revisions, auth="tenant",
             help="what a job was before each change, newest first")
    p.add_argument("id", metavar="ID")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N revisions (default 20)")

    p = leaf(jobs, "rollback", parents, rollback, auth="tenant",
             help="change a job back to what it was at an earlier version",
             description="Read the job's revision at --to-version (job revisions lists them) and update the "
                         "job to that definition. --version, when given, must be the job's current version.")  # fmt: skip
    p.add_argument("id", metavar="ID")
    p.add_argument("--to-version", type=int, required=True, metavar="N")
    p.add_argument("--version", type=int, metavar="V", help="refuse unless the job is still at this version")
    add_dry_run_args(p)


def diff_window(a: argparse.Namespace) -> timedelta | None:
    """``--diff-window`` as a timedelta (None: the server's default); the
    server refuses what is out of bounds, naming ``diff_window``."""
    return None if a.diff_window is None else timedelta(days=a.diff_window)


def _fire_row(fire: Any) -> tuple[str, str, str]:
    return fmt.fmt_ts(fire, "nominal_at"), fire.local_time or "-", fmt.fmt_ts(fire, "due_at")


def print_dry_run(ctx: Context, response: Any) -> int:
    """Print UpdateJob's ``validate_only`` answer: the window, the counts and
    the runs listed (``--json``: the whole response)."""
    if ctx.json:
        ctx.emit_json(response)
        return 0
    diff = response.run_diff
    ctx.out(f"dry run: nothing changed; job {response.job.id} stays at version {response.job.version}")
    cut = " (cut: too many runs)" if diff.window_truncated else ""
    ctx.out(f"runs from {fmt.fmt_ts(diff, 'from_at')} to {fmt.fmt_ts(diff, 'to_at')}{cut}: "
            f"{diff.added_count} added, {diff.removed_count} removed, {diff.moved_count} moved, "
            f"{diff.unchanged_count} unchanged")  # fmt: skip
    for title, fires, count in (("added", diff.added, diff.added_count), ("removed", diff.removed, diff.removed_count)):
        if fires:
            ctx.out(f"{title}:" + (f" (first {len(fires)} of {count})" if count > len(fires) else ""))
            fmt.table(("NOMINAL (UTC)", "LOCAL", "DUE"), (_fire_row(f) for f in fires), ctx.stdout)
    if diff.moved:
        more = f" (first {len(diff.moved)} of {diff.moved_count})" if diff.moved_count > len(diff.moved) else ""
        ctx.out(f"moved:{more}")
        fmt.table(
            ("FROM (UTC)", "FROM LOCAL", "FROM DUE", "TO (UTC)", "TO LOCAL", "TO DUE"),
            ((*_fire_row(m.before)[:1], m.before.local_time, fmt.fmt_ts(m.before, "due_at"),
              *_fire_row(m.after)[:1], m.after.local_time, fmt.fmt_ts(m.after, "due_at")) for m in diff.moved),
            ctx.stdout,
        )  # fmt: skip
    return 0


def revisions(ctx: Context, a: argparse.Namespace) -> int:
    from tickwheel.v1 import scheduler_pb2

    merged = scheduler_pb2.ListJobRevisionsResponse()
    client = ctx.client
    for page in client.pages(client.list_job_revisions, job_id=a.id, page_size=min(max(a.limit, 1), 100)):
        merged.revisions.extend(page.revisions)
        if a.limit and len(merged.revisions) >= a.limit:
            del merged.revisions[a.limit :]
            break
    if ctx.json:
        ctx.emit_json(merged)
        return 0
    fmt.table(
        ("VERSION", "CHANGED AT", "BY", "FIELDS", "TO", "SCHEDULE"),
        ((r.version, fmt.fmt_ts(r, "changed_at"), r.changed_by, ",".join(r.update_mask.paths) or "(all)",
          r.changed_to_version, fmt.fmt_schedule(r.job)) for r in merged.revisions),
        ctx.stdout,
    )  # fmt: skip
    return 0


def rollback(ctx: Context, a: argparse.Namespace) -> int:
    if a.diff_window is not None and not a.dry_run:
        raise UsageError("--diff-window goes with --dry-run")
    client = ctx.client
    target = client.get_job(a.id, revision=a.to_version).job
    current = a.version if a.version is not None else client.get_job(a.id).job.version
    target.version = current
    if a.dry_run:
        return print_dry_run(ctx, client.preview_update(target, diff_window=diff_window(a)))
    response = client.update_job(target)
    if ctx.json:
        ctx.emit_json(response)
        return 0
    ctx.out(f"rolled job {response.job.id} back to its version {a.to_version}'s definition, "
            f"now version {response.job.version}, next run {fmt.fmt_ts(response.job, 'next_run_at')}")  # fmt: skip
    return 0
