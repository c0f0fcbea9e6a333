"""``tickwheel job delete``, ``update``, ``pause`` and ``resume`` of many jobs: ids from the command line and ``--file`` through the batch RPCs, each id's outcome reported.

Deletes and updates go through the SDK's ``delete_jobs``/``update_jobs``,
pauses and resumes through BatchPauseJobs/BatchResumeJobs. One id and no
``--file`` keeps the single call (DeleteJob, UpdateJob, PauseJob,
ResumeJob) and its output. Otherwise every id is sent, in the order given, 1 000 per call;
an id that fails (not found, stale version, refused field) fails alone and
is listed with its code and reason; a resume or an update refused over
the tenant's request rate (the paused spans they count are charged to it)
is sent again once its retry delay has passed (:func:`.ratewait.paced_items`). A call
that fails as a whole (after the
SDK's retries) stops there: the ids before it were applied, the rest are
reported not sent. Exit status: 0 when every id was applied, 1 when any
failed, 2 for a usage error (nothing sent).

The calls ask ``JOB_VIEW_BASIC``: the report needs each job's outcome, not
its definition, and a full answer over jobs with large payloads would be
refused (or, for updates, sent again in halves).

``--file`` holds one id per line (``delete``, ``pause``, ``resume``) or ``ID VERSION`` per line
(``update``: the version last read, as ``job update --version``); blank
lines and lines starting with ``#`` are skipped; ``-`` reads stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from tickwheel_server.cli.context import Context
from tickwheel_server.cli.parse import UsageError

__all__ = [
    "MAX_IDS", "add_bulk_args", "bulk_problem", "delete_many", "pause_many", "read_targets", "resume_many",
    "update_many", "wants_bulk",
]

MAX_IDS = 1_000_000
"""Ids one command takes (each call carries at most 1 000)."""
MAX_LINE = 1024
SHOWN_FAILURES = 50
"""Failures listed in the text summary (``--json`` lists them all)."""


def add_bulk_args(p: argparse.ArgumentParser, *, update: bool) -> None:
    """``--file`` on ``job delete`` / ``job update``."""
    what = "ID VERSION per line (the version last read)" if update else "one job id per line"
    p.add_argument("--file", metavar="FILE",
                   help=f"more jobs: {what}; blank lines and # comments skipped; '-' reads stdin. "
                        "Several jobs go through the batch RPC, 1 000 per call")  # fmt: skip


def wants_bulk(a: argparse.Namespace) -> bool:
    """Several ids, or a file of them: the batch path."""
    return bool(a.file) or len(a.ids) != 1


def _lines(a: argparse.Namespace) -> Iterator[tuple[int, str]]:
    if not a.file:
        return
    stream: TextIO
    if a.file == "-":
        stream = sys.stdin
    else:
        try:
            stream = open(a.file, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as error:
            raise UsageError(f"--file: {error.strerror or error}: {a.file}") from None
    try:
        number = 0
        while line := stream.readline(MAX_LINE + 1):  # never more of a line than it may hold
            number += 1
            if len(line) > MAX_LINE:
                raise UsageError(f"--file line {number}: longer than {MAX_LINE} characters")
            text = line.strip()
            if text and not text.startswith("#"):
                yield number, text
    except UnicodeDecodeError:
        raise UsageError(f"--file {a.file}: not UTF-8") from None
    finally:
        if stream is not sys.stdin:
            stream.close()


def read_targets(a: argparse.Namespace, *, with_version: bool) -> list[tuple[str, int]]:
    """(id, version) of every job named, in order: the positional ids (with
    ``--version``, or 0), then ``--file``'s. ``UsageError`` for a malformed
    line, no id at all, or more than :data:`MAX_IDS`."""
    targets = [(job_id, getattr(a, "version", 0) or 0) for job_id in a.ids]
    for number, text in _lines(a):
        parts = text.split()
        if with_version:
            if len(parts) != 2 or not (parts[1].isascii() and parts[1].isdigit()) or int(parts[1]) < 1:
                raise UsageError(f"--file line {number}: expected ID VERSION (a version of 1 or more)")
            targets.append((parts[0], int(parts[1])))
        else:
            if len(parts) != 1:
                raise UsageError(f"--file line {number}: expected one job id")
            targets.append((parts[0], 0))
        if len(targets) > MAX_IDS:
            raise UsageError(f"more than {MAX_IDS} jobs: split the file")
    if not targets:
        raise UsageError("no job ids: give IDs or --file")
    if with_version and any(version < 1 for _, version in targets):
        raise UsageError("every job needs the version last read: --version for IDs, ID VERSION lines in --file")
    return targets


def _report(ctx: Context, verb: str, targets: list[tuple[str, int]], outcomes: list[Any], call_error: str | None,
            extra: dict[str, Any]) -> int:  # fmt: skip
    failures = [
        {"id": outcome.job_id, "code": outcome.error.code.name, "reason": outcome.error.message}
        for outcome in outcomes if not outcome.ok
    ]  # fmt: skip
    applied = len(outcomes) - len(failures)
    not_sent = len(targets) - len(outcomes)
    if ctx.json:
        ctx.out(json.dumps({verb: applied, "failed": len(failures), "not_sent": not_sent, **extra,
                            "failures": failures, "call_error": call_error}))  # fmt: skip
    else:
        details = "".join(f"; {value} {name.replace('_', ' ')}" for name, value in extra.items())
        ctx.out(f"{verb} {applied} of {len(targets)} job(s), {len(failures)} failed{details}")
        for failure in failures[:SHOWN_FAILURES]:
            ctx.note(f"{failure['id']}: {failure['code']}: {failure['reason']}")
        if len(failures) > SHOWN_FAILURES:
            ctx.note(f"... and {len(failures) - SHOWN_FAILURES} more (--json lists them all)")
        if call_error is not None:
            ctx.note(f"a call failed, {not_sent} job(s) not sent: {call_error}")
    return 1 if failures or call_error is not None else 0


def _send(ctx: Context, items: list, send: Any, *, paced_items: bool = False) -> tuple[list[Any], str | None]:
    """Outcomes of ``items`` sent 1 000 per call until one call fails; with
    ``paced_items`` each chunk goes through :func:`.ratewait.paced_items`."""
    from tickwheel import TickwheelError

    from tickwheel_server.cli.ratewait import paced_items

    outcomes: list[Any] = []
    for start in range(0, len(items), 1000):
        chunk = items[start : start + 1000]
        try:
            if not paced_items:
                outcomes.extend(send(chunk))
                continue
            done, failed = paced_items(chunk, send)
        except TickwheelError as error:
            return outcomes, str(error)
        outcomes.extend(done)
        if failed is not None:
            return outcomes, failed
    return outcomes, None


def delete_many(ctx: Context, a: argparse.Namespace) -> int:
    """``job delete`` of several ids (BatchDeleteJobs)."""
    if a.version and len(a.ids) != 1:
        raise UsageError("--version names one job's version: delete several jobs without it")
    targets = read_targets(a, with_version=False)

    def send(chunk: list[tuple[str, int]]) -> list[Any]:
        return ctx.client.delete_jobs([job_id for job_id, _ in chunk], [version for _, version in chunk])

    outcomes, call_error = _send(ctx, targets, send)
    canceled = sum(outcome.canceled_executions for outcome in outcomes if outcome.ok)
    return _report(ctx, "deleted", targets, outcomes, call_error, {"canceled_executions": canceled})


def update_many(ctx: Context, a: argparse.Namespace) -> int:
    """``job update`` of several ids (BatchUpdateJobs): the change the flags
    build applied to each job, each at its own version."""
    from tickwheel.v1 import job_pb2, scheduler_pb2

    from tickwheel_server.cli.jobs import apply_spec

    problem = bulk_problem(a)
    if problem is not None:
        raise UsageError(problem)
    if a.version is not None and len(a.ids) > 1:
        raise UsageError("--version names one job's version: list several jobs as ID VERSION lines in --file")
    patch = job_pb2.Job()
    paths = apply_spec(patch, a)
    if not paths:
        raise UsageError("nothing to update: give the flags of the fields to change")
    targets = read_targets(a, with_version=True)

    def send(chunk: list[tuple[str, int]]) -> list[Any]:
        changes = []
        for job_id, version in chunk:
            job = job_pb2.Job()
            job.CopyFrom(patch)
            job.id, job.version = job_id, version
            changes.append(job)
        return ctx.client.update_jobs(changes, paths, view=scheduler_pb2.JOB_VIEW_BASIC)

    outcomes, call_error = _send(ctx, targets, send, paced_items=True)
    return _report(ctx, "updated", targets, outcomes, call_error, {})


def bulk_problem(a: argparse.Namespace) -> str | None:
    """Why the flags cannot apply to many jobs at once: a flag that changes
    part of a sub-message needs each job's stored value (a GetJob each)."""
    if a.at is None and (a.cron is None) != (a.tz is None):
        return "updating several jobs, give --cron and --tz together (or --at)"
    partial = [flag for flag, value in (
        ("--dst-gap", a.dst_gap), ("--dst-repeat", a.dst_repeat), ("--max-attempts", a.max_attempts),
        ("--initial-backoff", a.initial_backoff), ("--max-backoff", a.max_backoff),
        ("--method", a.method if a.url is None else None), ("--header", a.header if a.url is None else None),
    ) if value is not None]  # fmt: skip
    if partial:
        return f"{partial[0]} changes part of what each job holds: update those jobs one by one"
    return None


@dataclass(frozen=True)
class _Outcome:
    """One item of a pause or resume batch, shaped as the SDK's outcomes."""

    job_id: str
    count: int = 0
    error: Any = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _outcomes(method: str, items: list, response: Any, count_of: Any) -> list[_Outcome]:
    """One outcome per item; a response that breaks the contract fails the call (INTERNAL)."""
    import grpc
    from tickwheel import TickwheelError

    if len(response.results) != len(items):
        raise TickwheelError(
            grpc.StatusCode.INTERNAL, f"{method} answered {len(response.results)} results for {len(items)} items"
        )
    out = []
    for item, result in zip(items, response.results):
        if result.WhichOneof("result") == "job":
            out.append(_Outcome(item.id, count=count_of(result.job)))
        elif result.WhichOneof("result") == "error":
            out.append(_Outcome(item.id, error=TickwheelError.from_status(result.error)))
        else:
            raise TickwheelError(grpc.StatusCode.INTERNAL, f"{method}: a result with neither a job nor an error")
    return out


def pause_many(ctx: Context, a: argparse.Namespace) -> int:
    """``job pause`` of several ids (BatchPauseJobs), each with ``--reason``."""
    from tickwheel.v1 import scheduler_pb2

    targets = read_targets(a, with_version=False)

    def send(chunk: list[tuple[str, int]]) -> list[Any]:
        items = [scheduler_pb2.PauseJobRequest(id=job_id, reason=a.reason) for job_id, _ in chunk]
        return _outcomes("BatchPauseJobs", items, ctx.client.batch_pause_jobs(items, view=scheduler_pb2.JOB_VIEW_BASIC), lambda r: r.held_executions)

    outcomes, call_error = _send(ctx, targets, send)
    held = sum(outcome.count for outcome in outcomes if outcome.ok)
    return _report(ctx, "paused", targets, outcomes, call_error, {"held_executions": held})


def resume_many(ctx: Context, a: argparse.Namespace) -> int:
    """``job resume`` of several ids (BatchResumeJobs)."""
    from tickwheel.v1 import scheduler_pb2

    targets = read_targets(a, with_version=False)

    def send(chunk: list[tuple[str, int]]) -> list[Any]:
        items = [scheduler_pb2.ResumeJobRequest(id=job_id) for job_id, _ in chunk]
        return _outcomes("BatchResumeJobs", items, ctx.client.batch_resume_jobs(items, view=scheduler_pb2.JOB_VIEW_BASIC),
                         lambda r: r.released_executions)  # fmt: skip

    outcomes, call_error = _send(ctx, targets, send, paced_items=True)
    released = sum(outcome.count for outcome in outcomes if outcome.ok)
    return _report(ctx, "resumed", targets, outcomes, call_error, {"released_executions": released})
