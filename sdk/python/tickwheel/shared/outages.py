"""One component's failures through an outage of what it depends on: a
line when the outage begins, a few while it lasts, one when it ends.

A restart of the store, of etcd or of a Tickwheel server makes a
component's every try fail, again and again, for as long as it lasts.
Those failures are expected and the component retries; a line (or a
traceback) a try would bury the one line an operator needs.
:class:`OutageLog` gives each component one WARNING line when an outage
begins (what failed and the error's first line), a ``still failing``
WARNING ``every`` seconds later, then after gaps that double up to
``at_most`` (so a day-long outage stays a short page of lines), DEBUG
for the failures in between, and one INFO line with the outage's
duration when a try succeeds again. A component whose tries alternate
(one succeeds between two that fail) still writes at most one WARNING
per ``every``: a relapse sooner than that is DEBUG, and so is its
recovery. An error that is no outage stays an ERROR with its traceback,
every time.

What counts as an outage is the caller's: ``kind_of`` names the outage
an error is (``"store"``, ``"etcd"``, ``"server"``...) or ``None``. The
server's (``tickwheel_server.telemetry.outages``) knows the store's and
etcd's errors; the worker's knows gRPC statuses. Standard library only:
the worker imports this too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

STILL_EVERY = 60.0
"""Seconds from an outage's first line to its first ``still failing`` line."""
STILL_AT_MOST = 900.0
"""Seconds between two ``still failing`` lines at most: the gaps double from
:data:`STILL_EVERY` (1, 2, 4, 8 minutes) up to this (15 minutes)."""


class Monotonic(Protocol):
    def monotonic(self) -> float: ...


def one_line(error: BaseException) -> str:
    """The error's type and the first line of its text (drivers add SQL and
    hints below); when that text only names the type of the error it was
    raised from (the store's "unreachable after N attempts: OperationalError"),
    that error's first line too."""
    line = _first_line(error)
    said = f"{type(error).__name__}: {line}" if line else type(error).__name__
    cause = error.__cause__
    if cause is not None and line.endswith(type(cause).__name__) and _first_line(cause):
        return f"{said} ({_first_line(cause)})"
    return said


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0].strip() if text else ""


class OutageLog:
    """The failures of one component's tries, logged as above.

    Call :meth:`failed` from the ``except`` of a try and :meth:`ok` after a
    try that succeeded. A component made of several steps calls :meth:`ok`
    once a whole pass went through. ``then`` ends each line: what the
    component does about it (a loop retries; an API refuses the call).
    ``kind_of(error)``: the outage ``error`` is, ``None`` for a defect;
    ``describe(error)``: the error as its lines show it (:func:`one_line`).
    """

    def __init__(
        self, logger: logging.Logger, component: str, clock: Monotonic, *,
        kind_of: Callable[[BaseException], str | None], describe: Callable[[BaseException], str] = one_line,
        every: float = STILL_EVERY, at_most: float = STILL_AT_MOST, then: str = "retrying",
    ) -> None:
        if not 0 < every <= at_most:
            raise ValueError("OutageLog needs 0 < every <= at_most")
        self._log = logger
        self.component = component
        self._clock = clock
        self._kind_of = kind_of
        self._describe = describe
        self._then = then
        self._every = every
        self._at_most = at_most
        self._gap = every
        """Seconds from the last WARNING line of this outage to its next one."""
        self.down_since: float | None = None
        """When the current outage began (the clock's monotonic seconds); ``None`` when none."""
        self._warned_at: float | None = None
        self._announced = False
        self._failures = 0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, what: str, error: BaseException, *, retryable: bool = False) -> None:
        """Log that ``what`` failed with ``error``: once per outage (then
        after the gaps above) if it is one, with its traceback if not.
        ``retryable``: the caller knows the error is one a retry may clear
        though it is no outage (a conflict that outlasted the store's own
        retries): a WARNING line without traceback, each time."""
        kind = self._kind_of(error)
        if kind is None:
            if retryable:
                self._log.warning("%s: %s failed: %s; %s", self.component, what, self._describe(error), self._then)
            else:
                self._log.error("%s: %s failed; %s", self.component, what, self._then, exc_info=error)
            return
        now = self._clock.monotonic()
        self._failures += 1
        if self.down_since is None:
            self.down_since = now
            self._failures = 1
            self._gap = self._every
            # A relapse within `every` of the last line (a try that did not
            # need the store succeeded meanwhile) stays quiet: the lines of
            # one component are rate-limited across outages too.
            quiet = self._warned_at is not None and now - self._warned_at < self._every
            self._announced = not quiet
            if quiet:
                self._log.debug("%s: %s failed again: %s", self.component, what, self._describe(error))
                return
            self._warned_at = now
            self._log.warning(
                "%s: %s failed, %s unavailable: %s; %s", self.component, what, kind, self._describe(error), self._then
            )
        elif self._warned_at is None or now - self._warned_at >= self._gap:
            if self._announced:  # the next line waits twice as long, up to `at_most`
                self._gap = min(self._gap * 2, self._at_most)
            self._warned_at = now
            self._announced = True
            self._log.warning(
                "%s: still failing for %.0f s (%d failures), %s unavailable: %s failed: %s; %s",
                self.component, now - self.down_since, self._failures, kind, what, self._describe(error), self._then,
            )
        else:
            self._log.debug("%s: %s failed: %s", self.component, what, self._describe(error))

    def ok(self) -> None:
        """A try went through: log the recovery if an outage was on."""
        if self.down_since is None:
            return
        lasted = self._clock.monotonic() - self.down_since
        self._log.log(logging.INFO if self._announced else logging.DEBUG,
                      "%s: recovered after %.0f s (%d failures)", self.component, lasted, self._failures)
        self.down_since = None
        self._failures = 0
