"""The jobs this server cannot dispatch, which its claim leaves out: a bounded registry.

A job is *unreadable* here when this server cannot read its stored row: the
definition does not parse, carries an enum value this build does not know (a
newer version wrote it during a rolling upgrade) or a value out of its
bounds, or the row's cursor is impossible. It is *uncomputable* here when it
reads but its next fire cannot be computed (a zone only a newer tzdata knows,
an expression this engine now rejects). Either way the claim plans nothing
for it and writes nothing to it: its state, cursor and definition stay as
they are, so a newer server, or the same job after UpdateJob, carries on
where it was (see ``docs/architecture.md``, Dispatch).

The claim excludes the recorded jobs from its range scan by *(id, version)*,
so a job updated since is read again at once. The registry is per process
(a newer server never inherits an older one's verdicts) and bounded: at most
``max_excluded`` jobs are excluded from the scan, since each is still read by
the index scan and compared; up to ``max_known`` more are remembered so their
alert is not raised again, but take their place in the claim's batch.

Thread-safe: claims run in executor threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

JOB_UNREADABLE = "job_unreadable"
SCHEDULE_UNCOMPUTABLE = "schedule_uncomputable"
KINDS = (JOB_UNREADABLE, SCHEDULE_UNCOMPUTABLE)
MAX_REASON = 500
"""Characters of a reason kept: it may quote text a tenant or a newer version stored."""


class Unreadable(Exception):
    """A job this server cannot dispatch: ``kind`` is one of :data:`KINDS`,
    ``reason`` one line saying what could not be read or computed."""

    def __init__(self, kind: str, reason: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; one of {KINDS}")
        # It quotes stored text (a zone, an expression): no control character
        # may reach the alert (PostgreSQL refuses NUL in text, and one bad
        # row must not fail the claim that reports it).
        printable = "".join(ch if ch.isprintable() else " " for ch in str(reason))
        reason = " ".join(printable.split())[:MAX_REASON] or "no reason given"
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Finding:
    """One job found unreadable or uncomputable at one version."""

    job_id: str
    tenant: str
    version: int
    kind: str
    reason: str

    @property
    def exclusion_key(self) -> str:
        """What the claim compares ``jobs.id || '@' || version`` with."""
        return exclusion_key(self.job_id, self.version)


def exclusion_key(job_id: str, version: int) -> str:
    return f"{job_id}@{version}"


class Quarantine:
    """The jobs this process found unreadable or uncomputable, by job id.

    :meth:`record` after the claim that found them committed; :meth:`forget`
    once a job reads again, changed, or is gone. An entry is *excluded* (the
    claim leaves its id and version out) while fewer than ``max_excluded``
    are; further entries are only *known* and take the place of an excluded
    one that is forgotten.
    """

    def __init__(self, max_excluded: int = 1000, max_known: int = 100_000) -> None:
        if max_excluded < 0 or max_known < max_excluded:
            raise ValueError("need 0 <= max_excluded <= max_known")
        self.max_excluded = max_excluded
        self.max_known = max_known
        self._excluded: dict[str, Finding] = {}
        self._known: dict[str, Finding] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._excluded) + len(self._known)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._excluded or job_id in self._known

    def get(self, job_id: str) -> Finding | None:
        with self._lock:
            return self._excluded.get(job_id) or self._known.get(job_id)

    def excluded_keys(self) -> list[str]:
        """The ``id@version`` keys the claim leaves out of its scan."""
        with self._lock:
            return [finding.exclusion_key for finding in self._excluded.values()]

    def is_known(self, finding: Finding) -> bool:
        """True when this very finding (job, version, kind, reason) is recorded:
        its alert was raised already."""
        return self.get(finding.job_id) == finding

    def record(self, findings: Iterable[Finding]) -> int:
        """Record ``findings`` (a job's later finding replaces its earlier
        one); how many jobs became excluded that were not before."""
        added = 0
        with self._lock:
            for finding in findings:
                if finding.job_id in self._excluded:
                    self._excluded[finding.job_id] = finding
                elif len(self._excluded) < self.max_excluded:
                    self._known.pop(finding.job_id, None)
                    self._excluded[finding.job_id] = finding
                    added += 1
                elif finding.job_id in self._known or len(self._known) < self.max_known - self.max_excluded:
                    self._known[finding.job_id] = finding
        return added

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop these jobs (readable again, changed or gone); known entries
        move up into the excluded ones' free places."""
        with self._lock:
            for job_id in job_ids:
                self._excluded.pop(job_id, None)
                self._known.pop(job_id, None)
            while self._known and len(self._excluded) < self.max_excluded:
                job_id = next(iter(self._known))
                self._excluded[job_id] = self._known.pop(job_id)

    def page(self, after: str, limit: int) -> list[Finding]:
        """Up to ``limit`` entries with ids after ``after``, in id order (for
        the review, which walks them a page at a time)."""
        with self._lock:
            entries = sorted((*self._excluded.values(), *self._known.values()), key=lambda f: f.job_id)
        return [f for f in entries if f.job_id > after][:limit]
