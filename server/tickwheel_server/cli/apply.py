"""``tickwheel apply -f FILE``: make the tenant's jobs match a TOML or YAML
file, keyed by job name; print the plan, and carry it out with ``--yes``.

In order, each step over the whole file before the next (so nothing is
written while any job of the file is wrong):

1. read the file (:mod:`.applyfile`: bounds, keys, names) and check every
   job with the server's rules (:func:`.applyplan.check`);
2. read the tenant's jobs (ListJobs, every page) and match them by name
   (:func:`.applyplan.plan`);
3. send each update as UpdateJob ``validate_only`` at the version read:
   the server checks it as the real update (its version included) and
   answers its run diff, shown in the plan;
4. print the plan; without ``--yes``, or with any conflict, stop there;
5. create through BatchCreateJobs with request ids derived from each job's
   name and content (:func:`.applyplan.request_id`: a rerun, or two applies
   at once, create a job once), then update through BatchUpdateJobs (each
   item an UpdateJob at the version read in 2, with the mask of the fields
   that differ), then with ``--prune`` delete through BatchDeleteJobs at
   the version read. A stage with a failure or a conflict stops the stages
   after it.

Exit status (:data:`EXIT_CONFLICT` documented in ``--help`` and
docs/operations.md): 0 when the plan was printed or carried out; 2 for an
invalid file or usage (nothing written); 3 for a conflict; 1 for any other
failure (a job the server refused when created, a call that failed).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from datetime import datetime, timezone
from typing import Any

from tickwheel_server.cli import applyfile, applyplan
from tickwheel_server.cli import output as fmt
from tickwheel_server.cli.applyfile import MAX_FILE_BYTES, MAX_JOBS, Declared, FileError, Problem
from tickwheel_server.cli.applyplan import Step
from tickwheel_server.cli.context import Context
from tickwheel_server.cli.parse import UsageError
from tickwheel_server.cli.progress import ProgressLine, live_stream
from tickwheel_server.cli.safechanges import MAX_DIFF_DAYS
from tickwheel_server.cli.tree import leaf

__all__ = ["EXIT_CONFLICT", "EXIT_FAILED", "EXIT_INVALID", "register", "run"]

EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_CONFLICT = 3
MAX_BATCH = 1000
MAX_GENERATIONS = 8
"""Request ids tried for one create whose earlier ids' jobs were deleted since (:func:`.applyplan.request_id`)."""
SHOWN_FIRES = 3
"""Runs added, removed and moved listed per update in the text plan (``--json`` has the whole diff)."""
SHOWN_PROBLEMS = 50

FORMAT_HELP = f"""\
The file (TOML or YAML, from its extension .toml .yaml .yml or --format) holds one key, `jobs`, a list of jobs:

  [[jobs]]                          jobs:
  name = "nightly-report"             - name: nightly-report
  cron = "0 2 * * *"                    cron: "0 2 * * *"
  tz = "Europe/London"                  tz: Europe/London
  handler = "report"                    handler: report
  payload = {{ day = "yesterday" }}       payload: {{day: yesterday}}
  labels = {{ team = "data" }}            labels: {{team: data}}
  version = 3    # optional             version: 3

A job's keys are `tickwheel job create`'s flags with _ for -: {", ".join(sorted(applyfile.JOB_KEYS - {"version"}))}; \
labels, headers and concurrency_keys are tables, payload any value (sent as its JSON). `version`, when given, is \
the version of the job the file was written against: a job changed since is a conflict. Any other key is refused. \
Names are the keys: unique in the file, and a name several stored jobs share is a conflict. A field the file \
does not set takes the server's default; fields a file cannot express (misfire_run_all_limit) are left as they \
are. At most {MAX_JOBS} jobs and {MAX_FILE_BYTES // (1024 * 1024)} MiB per file; no NUL byte; YAML without \
anchors, aliases or tags.

Prints the plan: each job created, updated (the fields and the runs the change adds, removes and moves, from \
UpdateJob validate_only) or unchanged, and with --prune each job of the tenant the file does not name, deleted. \
Nothing is written without --yes. Every job is checked before anything is written; the server's address policy \
for HTTP targets and the tenant's quotas are judged when a job is created, and a create refused stops the apply \
before any update or delete.

Exit status: 0 plan printed or applied; 1 a job refused or a call failed; 2 invalid file or usage (nothing \
written); {EXIT_CONFLICT} conflict (a job changed since the file's version or since the plan was read; \
nothing written when found at plan time)."""


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = leaf(subparsers, "apply", parents, run, auth="tenant",
             help="make the tenant's jobs match a TOML or YAML file (plan; --yes applies)",
             description="\n\n".join(textwrap.fill(part) if not part.startswith("  [[") else part
                                     for part in FORMAT_HELP.split("\n\n")))  # fmt: skip
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="the jobs file ('-' reads stdin; give --format)")
    p.add_argument("--format", choices=("toml", "yaml"), help="default: from the extension")
    p.add_argument("--yes", action="store_true", help="carry the plan out (without it nothing is written)")
    p.add_argument("--prune", action="store_true", help="delete the tenant's jobs the file does not name")
    p.add_argument("--diff-window", type=int, metavar="DAYS",
                   help=f"compare an update's runs this many days ahead (1 to {MAX_DIFF_DAYS}, default 30)")
    p.add_argument("--batch-size", type=int, default=MAX_BATCH, metavar="N",
                   help=f"jobs per batch call, 1 to {MAX_BATCH} (default {MAX_BATCH})")


# --- reading ------------------------------------------------------------------------------


def _read(a: argparse.Namespace) -> tuple[bytes, str]:
    """The file's bytes (at most one byte past the bound, so a larger file is
    refused without being held) and its format."""
    fmt_name = a.format or (None if a.file == "-" else applyfile.format_of(a.file))
    if fmt_name is None:
        raise UsageError("cannot tell the format of the file from its extension: give --format toml or yaml")
    if a.file == "-":
        return sys.stdin.buffer.read(MAX_FILE_BYTES + 1), fmt_name
    try:
        with open(a.file, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise FileError([Problem(None, "", "", f"the file is {size} bytes; at most {MAX_FILE_BYTES}")])
            return stream.read(MAX_FILE_BYTES + 1), fmt_name
    except OSError as error:
        raise UsageError(f"{error.strerror or error}: {a.file}") from None


def _stored_jobs(ctx: Context, progress: ProgressLine) -> list[Any]:
    """Every job of the tenant (ListJobs, every page)."""
    client = ctx.client
    jobs: list[Any] = []
    for page in client.pages(client.list_jobs, page_size=MAX_BATCH):
        jobs.extend(page.jobs)
        progress.show("apply", f"read {len(jobs)} jobs of the tenant")
    return jobs


def _update_request(step: Step) -> Any:
    """The UpdateJob of ``step``: the desired values of its fields, at the version read."""
    from tickwheel.v1 import job_pb2, scheduler_pb2

    job = job_pb2.Job()
    job.CopyFrom(step.desired)
    job.id, job.version = step.stored.id, step.stored.version
    request = scheduler_pb2.UpdateJobRequest(job=job)
    request.update_mask.paths.extend(step.fields)
    return request


def _preview(ctx: Context, steps: list[Step], window: Any, progress: ProgressLine) -> list[Problem]:
    """Each update sent with ``validate_only``: its run diff kept on the step,
    a stale version or a vanished job turned into a conflict, and the
    problems the server finds returned (nothing is written by any of it)."""
    from tickwheel import TickwheelError
    from tickwheel_server.cli.ratewait import paced

    updates = [s for s in steps if s.action == "update"]
    problems: list[Problem] = []
    for done, step in enumerate(updates, start=1):
        request = _update_request(step)
        try:
            response = paced(  # each diff's fires are charged to the tenant's request rate
                lambda: ctx.client.preview_update(request.job, update_mask=list(step.fields), diff_window=window)
            )
        except TickwheelError as error:
            if error.code_name in ("FAILED_PRECONDITION", "NOT_FOUND"):
                step.action, step.reason = "conflict", f"changed since it was read: {error}"
            elif error.code_name in ("INVALID_ARGUMENT", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED"):
                assert step.declared is not None
                problems.extend(_server_problems(step.declared, error))
            else:
                raise
        else:
            step.run_diff = response.run_diff
        progress.show("apply", f"checked {done} of {len(updates)} updates", done / len(updates))
    return problems


def _server_problems(entry: Declared, error: Any) -> list[Problem]:
    if not error.field_violations:
        return [entry.problem("", f"{error.message or error.code_name} ({error.code_name})")]
    return [entry.problem(applyplan.file_key(v.field), f"{v.description} ({v.field})") for v in error.field_violations]


# --- carrying the plan out -------------------------------------------------------------------


def _chunks(items: list[Step], size: int) -> list[list[Step]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _error_text(error: Any) -> str:
    violations = error.field_violations
    if violations:
        return f"{error.code_name}: " + "; ".join(f"{v.field}: {v.description}" for v in violations)
    return f"{error.code_name}: {error.message}"


def _create(ctx: Context, steps: list[Step], batch_size: int, progress: ProgressLine, total: int) -> int:
    """Creates the ``create`` steps; returns how many failed (each has its error)."""
    from tickwheel import TickwheelError

    failed = 0
    done = 0
    for chunk in _chunks(steps, batch_size):
        pending = [(step, 0) for step in chunk]
        while pending:
            assert all(step.declared is not None for step, _ in pending)
            try:
                outcomes = ctx.client.create_jobs(
                    [step.declared.job for step, _ in pending],  # type: ignore[union-attr]
                    [applyplan.request_id(step.declared, gen) for step, gen in pending],  # type: ignore[arg-type]
                    batch_size=batch_size,
                )  # fmt: skip
            except TickwheelError as error:
                for step, _ in pending:
                    step.outcome, step.error = "failed", f"the call failed: {error}"
                return failed + len(pending)
            again = []
            for (step, gen), outcome in zip(pending, outcomes, strict=True):
                if outcome.error is None:
                    step.outcome, step.result = "created", outcome.job
                elif outcome.error.code_name == "NOT_FOUND" and gen + 1 < MAX_GENERATIONS:
                    again.append((step, gen + 1))  # the job this id created was deleted since
                else:
                    step.outcome, step.error = "failed", _error_text(outcome.error)
                    failed += 1
            pending = again
        done += len(chunk)
        progress.show("apply", f"created {done} of {total}", done / total)
    return failed


def _update(ctx: Context, steps: list[Step], batch_size: int) -> int:
    """Applies the ``update`` steps, ``batch_size`` a call; returns how many
    did not apply. A call or an item refused over the tenant's request rate
    (a paused job's schedule change counts its paused span) is sent again
    after its retry delay (:func:`.ratewait.paced_items`)."""
    from tickwheel import TickwheelError

    from tickwheel_server.cli.ratewait import paced_items

    outcomes: list = []
    for start in range(0, len(steps), batch_size):
        chunk = steps[start : start + batch_size]
        try:
            done, _ = paced_items(chunk, lambda part: ctx.client.update_jobs(
                [_update_request(s) for s in part], batch_size=batch_size
            ))  # fmt: skip
        except TickwheelError as error:
            for step in steps[start:]:
                step.outcome, step.error = "failed", f"the call failed: {error}"
            return len(steps) - start + _bad(steps[:start], outcomes)
        outcomes.extend(done)
    return _bad(steps, outcomes)


def _bad(steps: list[Step], outcomes: list) -> int:
    """Records each update step's outcome; returns how many did not apply."""
    bad = 0
    for step, outcome in zip(steps, outcomes, strict=True):
        if outcome.error is None:
            step.outcome, step.result = "updated", outcome.job
        else:
            conflict = outcome.error.code_name in ("FAILED_PRECONDITION", "NOT_FOUND")
            step.outcome = "conflict" if conflict else "failed"
            step.error = _error_text(outcome.error)
            bad += 1
    return bad


def _delete(ctx: Context, steps: list[Step], batch_size: int) -> int:
    """Deletes the ``delete`` steps' jobs at the version read; returns how many did not apply."""
    from tickwheel import TickwheelError

    try:
        outcomes = ctx.client.delete_jobs([s.stored.id for s in steps], [s.stored.version for s in steps],
                                          batch_size=batch_size)  # fmt: skip
    except TickwheelError as error:
        for step in steps:
            step.outcome, step.error = "failed", f"the call failed: {error}"
        return len(steps)
    bad = 0
    for step, outcome in zip(steps, outcomes, strict=True):
        if outcome.error is None:
            step.outcome = "deleted"
        elif outcome.error.code_name == "NOT_FOUND":
            step.outcome = "deleted"  # gone already, as the plan wanted
            step.error = "already deleted"
        else:
            step.outcome = "conflict" if outcome.error.code_name == "FAILED_PRECONDITION" else "failed"
            step.error = _error_text(outcome.error)
            bad += 1
    return bad


def _carry_out(ctx: Context, steps: list[Step], batch_size: int, progress: ProgressLine) -> None:
    creates = [s for s in steps if s.action == "create"]
    updates = [s for s in steps if s.action == "update"]
    deletes = [s for s in steps if s.action == "delete"]
    stopped = ""
    if creates and _create(ctx, creates, batch_size, progress, len(creates)):
        stopped = "not applied: a create failed"
    if updates:
        if stopped:
            for step in updates:
                step.outcome, step.error = "skipped", stopped
        elif _update(ctx, updates, batch_size):
            stopped = "not applied: an update failed or conflicted"
    if deletes:
        if stopped:
            for step in deletes:
                step.outcome, step.error = "skipped", stopped
        else:
            _delete(ctx, deletes, batch_size)
    for step in steps:
        if step.action == "unchanged":
            step.outcome = "unchanged"


# --- the command ---------------------------------------------------------------------------


def run(ctx: Context, a: argparse.Namespace) -> int:
    if not 1 <= a.batch_size <= MAX_BATCH:
        raise UsageError(f"--batch-size must be 1 to {MAX_BATCH}")
    if a.diff_window is not None and not 1 <= a.diff_window <= MAX_DIFF_DAYS:
        raise UsageError(f"--diff-window must be 1 to {MAX_DIFF_DAYS} days")
    from tickwheel_server.cli.safechanges import diff_window

    try:
        data, fmt_name = _read(a)
        declared = applyfile.read(data, fmt_name)
    except FileError as error:
        return _invalid(ctx, a, error.problems)
    normalised, problems = applyplan.check(declared, datetime.now(timezone.utc))
    if problems:
        return _invalid(ctx, a, problems)
    progress = ProgressLine(live_stream(ctx))
    try:
        stored = _stored_jobs(ctx, progress)
        steps = applyplan.plan(declared, normalised, stored, prune=a.prune)
        problems = _preview(ctx, steps, diff_window(a), progress)
        if problems:
            progress.end()
            return _invalid(ctx, a, problems)
        conflicted = any(s.action == "conflict" for s in steps)
        applying = a.yes and not conflicted
        if applying:
            _carry_out(ctx, steps, a.batch_size, progress)
    finally:
        progress.end()
    status = _status(steps, applied=applying)
    not_in_file = 0 if a.prune else len({j.name for j in stored} - {d.name for d in declared})
    _report(ctx, a, steps, applied=applying, not_in_file=not_in_file, status=status)
    return status


def _status(steps: list[Step], *, applied: bool) -> int:
    if any(s.action == "conflict" or s.outcome == "conflict" for s in steps):
        return EXIT_CONFLICT
    if applied and any(s.outcome in ("failed", "skipped") for s in steps):
        return EXIT_FAILED
    return 0


def _invalid(ctx: Context, a: argparse.Namespace, problems: list[Problem]) -> int:
    """Reports an invalid file (nothing was written) and returns its exit status."""
    if ctx.json:
        _emit(ctx, {"file": a.file, "applied": False, "valid": False, "exit_status": EXIT_INVALID,
                    "counts": _counts([]), "not_in_file": 0, "steps": [],
                    "problems": [p.as_json() for p in problems]})  # fmt: skip
    for problem in problems[:SHOWN_PROBLEMS]:
        ctx.note(f"error: {problem.text(a.file)}")
    if len(problems) > SHOWN_PROBLEMS:
        ctx.note(f"error: ... and {len(problems) - SHOWN_PROBLEMS} more (--json lists them all)")
    ctx.note(f"error: {a.file} is not valid: nothing was written")
    return EXIT_INVALID


def _counts(steps: list[Step]) -> dict[str, int]:
    counts = {action: 0 for action in ("create", "update", "unchanged", "delete", "conflict")}
    for step in steps:
        counts[step.action] += 1
    return counts


def _emit(ctx: Context, document: dict[str, Any]) -> None:
    import json

    ctx.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


_MARK = {"create": "+", "update": "~", "unchanged": "=", "delete": "-", "conflict": "!"}


def _report(ctx: Context, a: argparse.Namespace, steps: list[Step], *, applied: bool, not_in_file: int,
            status: int) -> None:  # fmt: skip
    counts = _counts(steps)
    if ctx.json:
        _emit(ctx, {"file": a.file, "applied": applied, "valid": True, "exit_status": status, "counts": counts,
                    "not_in_file": not_in_file, "steps": [s.as_json() for s in steps], "problems": []})  # fmt: skip
        return
    ctx.out(f"plan for {a.file}: {counts['create']} to create, {counts['update']} to update, "
            f"{counts['unchanged']} unchanged, {counts['delete']} to delete, {counts['conflict']} in conflict")  # fmt: skip
    if not_in_file:
        ctx.out(f"{not_in_file} job name(s) of the tenant are not in the file: kept (--prune deletes them)")
    for step in steps:
        if step.action == "unchanged":
            continue
        ident = f" ({step.stored.id}, version {step.stored.version})" if step.stored is not None else ""
        line = f"{_MARK[step.action]} {step.action:<9} {step.name}{ident}"
        if step.action == "create" and step.desired is not None:
            line += f": {fmt.fmt_schedule(step.desired)}, {fmt.fmt_target(step.desired)}"
        elif step.action == "update":
            line += f": {', '.join(step.fields)}"
        elif step.action == "conflict":
            line += f": {step.reason}"
        if applied and step.outcome:
            line += f" -> {step.outcome}"
            if step.result is not None:
                line += f" {step.result.id} at version {step.result.version}"
            line += f" ({step.error})" if step.error else ""
        ctx.out(line)
        if step.run_diff is not None:
            _print_diff(ctx, step.run_diff)
    if counts["conflict"]:
        ctx.out(f"conflict: nothing was written (exit status {EXIT_CONFLICT}); read the jobs again and fix the file")
    elif not applied:
        changes = counts["create"] + counts["update"] + counts["delete"]
        ctx.out("no changes to make" if not changes else "nothing was written: run again with --yes to apply")
    else:
        done = {o: sum(1 for s in steps if s.outcome == o) for o in ("created", "updated", "deleted")}
        bad = sum(1 for s in steps if s.outcome in ("failed", "skipped", "conflict"))
        ctx.out(f"applied: {done['created']} created, {done['updated']} updated, {done['deleted']} deleted, "
                f"{counts['unchanged']} unchanged, {bad} not applied")  # fmt: skip


def _print_diff(ctx: Context, diff: Any) -> None:
    cut = " (cut: too many runs)" if diff.window_truncated else ""
    ctx.out(f"    runs {fmt.fmt_ts(diff, 'from_at')} .. {fmt.fmt_ts(diff, 'to_at')}{cut}: {diff.added_count} added, "
            f"{diff.removed_count} removed, {diff.moved_count} moved, {diff.unchanged_count} unchanged")  # fmt: skip
    for title, fires in (("added", diff.added), ("removed", diff.removed)):
        for fire in fires[:SHOWN_FIRES]:
            ctx.out(f"      {title} {fmt.fmt_ts(fire, 'nominal_at')} ({fire.local_time or '-'})")
    for move in diff.moved[:SHOWN_FIRES]:
        ctx.out(f"      moved {fmt.fmt_ts(move.before, 'nominal_at')} -> {fmt.fmt_ts(move.after, 'nominal_at')}")
