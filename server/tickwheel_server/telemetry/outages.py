"""Logging a component's failures by what they are: an outage of the store or
of etcd that the component rides out, or a defect.

A PostgreSQL or etcd restart makes every background loop of a server fail
at once, again each pass, for as long as it lasts. Those failures are
expected and the loops already retry; a traceback a pass would bury the one
line an operator needs. :class:`OutageLog` gives each component (the
reaper, the dispatcher, the liveness loop...) one WARNING line when an
outage begins (what failed, the error's first line), one more every
``every`` seconds while it lasts (how long, how many failures), DEBUG for
the failures between, and one INFO line when a pass succeeds again. A
component whose passes alternate (one that needs no store succeeds
between two that fail) still writes at most one WARNING per ``every``:
a relapse sooner than that is DEBUG, and so is its recovery. Any other
exception stays an ERROR with its traceback, every time.

What counts as an outage (:func:`outage_of`): the store's
:class:`~tickwheel_server.store.errors.StoreUnavailableError` (and an
ambiguous commit, which only a broken connection causes), etcd's
:class:`~tickwheel_server.lease.types.LeaseStoreUnavailable` and a lost
session, a refused, reset or closed connection, and a driver error the
driver itself marks as a lost connection.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..lease.types import LeaseStoreUnavailable, SessionLost
from ..store.errors import AmbiguousCommitError, StoreUnavailableError

STILL_EVERY = 60.0
"""Seconds between the WARNING lines of one component while an outage lasts."""


class _Monotonic(Protocol):
    def monotonic(self) -> float: ...


def outage_of(error: BaseException) -> str | None:
    """``"store"``, ``"etcd"`` or ``"connection"`` when ``error`` (or what it
    was raised from) is a known outage; ``None`` for anything else."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (StoreUnavailableError, AmbiguousCommitError)):
            return "store"
        if isinstance(current, (LeaseStoreUnavailable, SessionLost)):
            return "etcd"
        if isinstance(current, (ConnectionError, EOFError)):
            return "connection"
        if getattr(current, "connection_invalidated", False):  # SQLAlchemy's DBAPIError: the driver lost it
            return "store"
        current = current.__cause__ or current.__context__
    return None


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


def log_failure(logger: logging.Logger, what: str, error: BaseException, *, then: str = "retrying") -> None:
    """One failure outside a loop's pass: a known outage as one WARNING line
    (``what``, the outage, the error's first line), anything else as ERROR
    with its traceback."""
    kind = outage_of(error)
    if kind is None:
        logger.error("%s; %s", what, then, exc_info=error)
    else:
        logger.warning("%s, %s unavailable: %s; %s", what, kind, one_line(error), then)


class OutageLog:
    """The failures of one component's passes, logged as above.

    Call :meth:`failed` from the ``except`` of a pass and :meth:`ok` after a
    pass that succeeded. A component made of several steps calls
    :meth:`ok` once a whole pass went through. ``then`` ends each line: what
    the component does about it (a loop retries; an API refuses the call).
    """

    def __init__(
        self, logger: logging.Logger, component: str, clock: _Monotonic, *, every: float = STILL_EVERY,
        then: str = "retrying",
    ) -> None:
        self._log = logger
        self.component = component
        self._clock = clock
        self._then = then
        self._every = every
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
        every ``every`` seconds) if it is one, with its traceback if not.
        ``retryable``: the caller knows the error is one a retry may clear
        though it is no outage (a conflict that outlasted the store's own
        retries): a WARNING line without traceback, each time."""
        kind = outage_of(error)
        if kind is None:
            if retryable:
                self._log.warning("%s: %s failed: %s; %s", self.component, what, one_line(error), self._then)
            else:
                self._log.error("%s: %s failed; %s", self.component, what, self._then, exc_info=error)
            return
        now = self._clock.monotonic()
        self._failures += 1
        quiet = self._warned_at is None or now - self._warned_at >= self._every
        if self.down_since is None:
            self.down_since = now
            self._failures = 1
            # A relapse within a minute of the last line (a pass that did not
            # need the store succeeded meanwhile) stays quiet: the lines of
            # one component are rate-limited across outages too.
            self._announced = quiet
            if not quiet:
                self._log.debug("%s: %s failed again: %s", self.component, what, one_line(error))
                return
            self._warned_at = now
            self._log.warning(
                "%s: %s failed, %s unavailable: %s; %s", self.component, what, kind, one_line(error), self._then
            )
        elif quiet:
            self._warned_at = now
            self._announced = True
            self._log.warning(
                "%s: still failing for %.0f s (%d failures), %s unavailable: %s failed: %s; %s",
                self.component, now - self.down_since, self._failures, kind, what, one_line(error), self._then,
            )
        else:
            self._log.debug("%s: %s failed: %s", self.component, what, one_line(error))

    def ok(self) -> None:
        """A pass went through: log the recovery if an outage was on."""
        if self.down_since is None:
            return
        lasted = self._clock.monotonic() - self.down_since
        self._log.log(logging.INFO if self._announced else logging.DEBUG,
                      "%s: recovered after %.0f s (%d failures)", self.component, lasted, self._failures)
        self.down_since = None
        self._failures = 0
