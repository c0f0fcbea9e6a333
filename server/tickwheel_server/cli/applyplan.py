"""What ``tickwheel apply`` would do: the file's jobs matched by name
against the tenant's stored jobs, one :class:`Step` each. Pure: the command
reads the jobs and makes the calls.

A declared job is checked with the server's own rules
(:func:`~tickwheel_server.api.validate.normalise_job`, defaults filled in)
before anything is compared or sent; only what the server alone can judge
(its address policy for HTTP targets, the tenant's quotas) is left to it.
It is then compared with the stored job of its name on the fields a file
can express (:data:`MANAGED_FIELDS`): none differs, ``unchanged``; some do,
``update`` of those fields (the update mask); no stored job has the name,
``create``. A stored job whose name the file does not declare is
``delete`` with ``prune``, otherwise left alone. A ``conflict`` (nothing may
be written) is a job whose stored version is not the file's ``version``, a
file ``version`` for a name no job has (deleted since), or a name that
several stored jobs share (apply keys jobs by name).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwheel.shared.targets import TargetPolicy

from tickwheel_server.cli.applyfile import Declared, Problem

__all__ = ["MANAGED_FIELDS", "Step", "check", "file_key", "plan", "request_id"]

MANAGED_FIELDS = (
    "name", "schedule", "dst_policy", "jitter", "start_at", "end_at", "max_runs", "target", "payload", "timeout",
    "retry_policy", "overlap_policy", "misfire_policy", "misfire_threshold", "lateness_threshold", "labels",
    "concurrency_keys",
)  # fmt: skip
"""The ``Job`` fields a file sets (those of ``tickwheel job create``'s
flags). The others (``misfire_run_all_limit``, and fields this command does
not know) are neither compared nor sent: apply leaves them as they are."""

_ANY_ADDRESS = TargetPolicy.allowing(["0.0.0.0/0", "::/0"], origin="apply")
"""Every address allowed: the server's own policy judges a target's address."""

# A violation's path (``job.schedule.cron.expression``) -> the file's key, longest prefix first.
_KEYS = (
    ("job.schedule.cron.time_zone", "tz"), ("job.schedule.cron", "cron"), ("job.schedule.once_at", "at"),
    ("job.schedule", "cron"), ("job.target.http.url", "url"), ("job.target.http.method", "method"),
    ("job.target.http.headers", "headers"), ("job.target.http", "url"), ("job.target.handler", "handler"),
    ("job.target", "handler"), ("job.retry_policy.max_attempts", "max_attempts"),
    ("job.retry_policy.initial_backoff", "initial_backoff"), ("job.retry_policy.max_backoff", "max_backoff"),
    ("job.retry_policy", "max_attempts"), ("job.timeout", "attempt_timeout"), ("job.overlap_policy", "overlap"),
    ("job.misfire_policy", "misfire"), ("job.misfire_threshold", "misfire_threshold"),
    ("job.lateness_threshold", "lateness_threshold"), ("job.dst_policy.gap", "dst_gap"),
    ("job.dst_policy.repeat", "dst_repeat"), ("job.jitter", "jitter"), ("job.start_at", "start_at"),
    ("job.end_at", "end_at"), ("job.max_runs", "max_runs"), ("job.labels", "labels"),
    ("job.concurrency_keys", "concurrency_keys"), ("job.payload", "payload"), ("job.name", "name"),
)  # fmt: skip


def file_key(path: str) -> str:
    """The file's key a server field path names (``job.schedule.cron.expression``
    -> ``cron``), or "" for the job as a whole."""
    for prefix, key in _KEYS:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            return key
    return ""


def check(declared: list[Declared], now: datetime) -> tuple[list[Any], list[Problem]]:
    """Each declared job normalised as the server would store it (defaults
    filled in), in order, and the problems the server's rules find in them
    (each naming the file's key; the job's path in the reason)."""
    from tickwheel_server.api.validate import normalise_job
    from tickwheel_server.errors import InvalidArgument

    normalised: list[Any] = []
    problems: list[Problem] = []
    for entry in declared:
        try:
            normalised.append(normalise_job(entry.job, now, target_policy=_ANY_ADDRESS))
        except InvalidArgument as error:
            normalised.append(None)
            for violation in error.violations:
                key = file_key(violation.field)
                problems.append(entry.problem(key, f"{violation.description} ({violation.field})"))
    return normalised, problems


@dataclass
class Step:
    """One thing apply does (or would do). ``action`` is ``create``,
    ``update``, ``unchanged``, ``delete`` or ``conflict``; ``fields`` the
    Job fields an update changes (its mask); ``reason`` why a conflict is
    one; ``stored`` the job as read for the plan. The command fills
    ``run_diff`` (an update's, from UpdateJob ``validate_only``),
    ``outcome``, ``error`` and ``result`` (the job as stored after the step) as
    it goes."""

    action: str
    name: str
    declared: Declared | None = None
    stored: Any | None = None
    desired: Any | None = None
    fields: list[str] = field(default_factory=list)
    reason: str = ""
    run_diff: Any | None = None
    outcome: str = ""
    error: str = ""
    result: Any | None = None

    def as_json(self) -> dict[str, Any]:
        """The stable ``--json`` form of this step."""
        known = self.stored if self.stored is not None else self.result
        out: dict[str, Any] = {
            "action": self.action,
            "name": self.name,
            "line": self.declared.line if self.declared is not None else None,
            "id": known.id if known is not None else None,
            "version": self.stored.version if self.stored is not None else None,
            "applied_version": self.result.version if self.result is not None else None,
            "fields": list(self.fields),
            "reason": self.reason,
            "run_diff": None,
            "outcome": self.outcome,
            "error": self.error,
        }
        if self.run_diff is not None:
            from google.protobuf import json_format

            out["run_diff"] = json_format.MessageToDict(self.run_diff)
        return out


def _field_bytes(job: Any, name: str) -> bytes:
    """One field of ``job`` alone, serialized deterministically (equal bytes: equal values)."""
    part = type(job)()
    part.CopyFrom(job)
    for other in job.DESCRIPTOR.fields:
        if other.name != name:
            part.ClearField(other.name)
    return part.SerializeToString(deterministic=True)


def changed_fields(desired: Any, stored: Any) -> list[str]:
    """The :data:`MANAGED_FIELDS` whose values differ, in that order."""
    return [name for name in MANAGED_FIELDS if _field_bytes(desired, name) != _field_bytes(stored, name)]


def plan(declared: list[Declared], normalised: list[Any], stored: list[Any], *, prune: bool) -> list[Step]:
    """The steps that make ``stored`` (every job of the tenant) match
    ``declared`` (each with its ``normalised`` job, as :func:`check` gives
    them): one per declared job in file order, then with ``prune`` one
    ``delete`` per stored job whose name is not declared, by name then id."""
    by_name: dict[str, list[Any]] = {}
    for job in stored:
        by_name.setdefault(job.name, []).append(job)
    steps: list[Step] = []
    for entry, desired in zip(declared, normalised, strict=True):
        same = by_name.get(entry.name, [])
        if len(same) > 1:
            ids = ", ".join(sorted(j.id for j in same)[:5])
            steps.append(Step("conflict", entry.name, entry, desired=desired, reason=(
                f"{len(same)} jobs have this name ({ids}): apply keys jobs by name; rename or delete all but one")))
            continue
        if not same:
            if entry.version is not None:
                steps.append(Step("conflict", entry.name, entry, desired=desired, reason=(
                    f"the file gives version {entry.version}, but no job has this name (deleted since?)")))
            else:
                steps.append(Step("create", entry.name, entry, desired=desired))
            continue
        (current,) = same
        if entry.version is not None and entry.version != current.version:
            steps.append(Step("conflict", entry.name, entry, current, desired, reason=(
                f"changed since the file's version {entry.version}: job {current.id} is at version {current.version}")))
            continue
        fields = changed_fields(desired, current)
        steps.append(Step("update" if fields else "unchanged", entry.name, entry, current, desired, fields))
    if prune:
        declared_names = {entry.name for entry in declared}
        for job in sorted(stored, key=lambda j: (j.name, j.id)):
            if job.name not in declared_names:
                steps.append(Step("delete", job.name, stored=job))
    return steps


def request_id(entry: Declared, generation: int = 0) -> str:
    """The request id that creates ``entry``: ``apply-`` and 40 hex digits of
    SHA-256 over its name and the Job it describes (not its spelling: the
    same job in TOML or YAML has the same id), so applying the same file
    again (or twice at once) creates it once. Request ids are the tenant's
    own on the server, so the tenant needs no place in it. ``generation``
    > 0 (``-2``, ``-3``, ...) is for when the job that id created was
    deleted since: the server answers NOT_FOUND for that id for a day."""
    digest = hashlib.sha256(b"apply\n" + entry.job.SerializeToString(deterministic=True)).hexdigest()
    base = f"apply-{digest[:40]}"
    return base if generation == 0 else f"{base}-{generation + 1}"
