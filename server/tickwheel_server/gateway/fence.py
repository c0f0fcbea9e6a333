"""The fence every hand-out passes: this server's session surely alive and
its clock agreeing with the database's.

Never early: a hand-out compares ``ready_at`` with this server's clock. The
server's clock is compared with the database's before the first round and
every minute (every second while the comparison fails, is too slow to
decide, or finds them apart); a comparison reads the database's clock up
to three times back to back and judges by the read with the smallest round
trip. Nothing is handed out before a first conclusive comparison, while
they differ by more than the tolerance (250 ms), once the last conclusive
one is older than two minutes, or after this server's wall clock was
stepped (until a new comparison, made at once): the rules are
:mod:`.clockguard`'s. The log says so, and ``on_skew`` raises a clock-skew
alert (resolved when they agree again): at once for a skew found or a step,
but for comparisons that fail or are too slow to decide only once they
stayed so for ``skew_grace`` (10 s; meanwhile hand-out waits and the log
says so at INFO): an inconclusive read is not a skew.

Fenced by the session: every hand-out is stamped with this server's session
(``owner``), which the reaper treats as dead once its lease is gone. So a
round hands out only while that session surely lives (its
:meth:`~tickwheel_server.lease.base.Session.surely_alive`, by this server's
monotonic clock, with a margin of a quarter of its TTL): checked before the
round, inside each claim's transaction just before it commits (a refusal
rolls it back: nothing was handed out), and again before the claimed
executions are dealt (a refusal gives them back); see :mod:`.rounds`. A
process frozen past its TTL (SIGSTOP, a GC pause, a suspended VM) wakes to a
clock past that instant, so it hands nothing out under the dead session,
whatever task runs first; it resumes once the server holds a new session
(:meth:`Fence.use_session`). The clock guard is checked at the same three
points.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tickwheel.shared.clock import Clock

from ..lease.base import Session
from ..telemetry.outages import OutageLog
from . import clockguard

log = logging.getLogger(__name__)

SESSION_MARGIN = 0.25
"""Hand out only while the session surely lives for this part of its TTL more."""
SKEW_RETRY_INTERVAL = 1.0
"""Seconds between comparisons of the clocks while hand-out waits for one."""
SKEW_SAMPLES = 3
"""Reads of the database's clock one comparison takes, back to back: it
judges by the one with the smallest round trip, so one slow read (a busy
loop, a cold connection) does not leave it undecided."""
SKEW_SAMPLE_TIME = SKEW_RETRY_INTERVAL
"""Seconds of reading after which a comparison takes no further read (the
hand-out loop waits for it: with a store that slow, it waits no longer)."""
SKEW_GRACE = 10 * SKEW_RETRY_INTERVAL
"""Seconds the comparisons may stay inconclusive (reads failing or too slow)
before that is alerted on and logged as an error: about ten comparisons."""
CLOCK_STEP = 0.1
"""Seconds the wall clock may move against the monotonic clock before the
clocks are compared again (NTP slews at most 0.5 ms/s: 60 ms in two minutes)."""


@dataclass(frozen=True)
class Lease:
    """What a round hands out under: the owner it stamps and the session that
    name stands for (None: not fenced by a session, as in unit tests)."""

    owner: str
    session: Session | None


class Fence:
    """Whether hand-out may go on now: the session hand-outs are stamped
    with (:attr:`lease`) and the comparisons of this server's clock with the
    database's (``db_clock``; None: never compared, as in unit tests)."""

    def __init__(
        self,
        clock: Clock,
        *,
        owner: str,
        session: Session | None = None,
        db_clock=None,
        skew_tolerance: float = 0.25,
        skew_check_interval: float = 60.0,
        skew_max_age: float | None = None,
        skew_grace: float = SKEW_GRACE,
        on_skew: Callable[[float | None, bool], Awaitable[None]] | None = None,
    ) -> None:
        if not skew_grace >= 0:
            raise ValueError("skew_grace must be >= 0 seconds")
        self._clock = clock
        self.outages = OutageLog(log, "clock comparison", clock, then="comparing again shortly")
        self.lease = Lease(owner, session)
        """The current lease; a round or claim keeps the one it started with."""
        self._db_clock = db_clock
        self._skew_tolerance = skew_tolerance
        self._skew_check_interval = skew_check_interval
        self._skew_max_age = 2 * skew_check_interval if skew_max_age is None else skew_max_age
        self._skew_grace = skew_grace
        self._clock_check: clockguard.ClockCheck | None = None
        """The last conclusive comparison of the clocks (None: none yet)."""
        self._undecided_since: float | None = None
        """Monotonic start of the first inconclusive comparison since the
        last conclusive one (None: none since)."""
        self._next_skew_check = clock.monotonic()
        self._step_seen: clockguard.ClockCheck | None = None
        """The check after which a wall-clock step was last noticed (one re-check each)."""
        self._skew_reported: tuple[bool, float] | None = None
        """(within tolerance, monotonic instant) of the last ``on_skew`` call."""
        self._refused: tuple[str | None, bool] = (None, False)
        """Why hand-out stopped, as last logged (None: it runs), and whether
        that was alarming (:func:`clockguard.alarming`)."""
        self._stopped_loudly = False
        """An ERROR said hand-out stopped since it last ran."""
        self._on_skew = on_skew
        """Called after every check that changes the verdict (and every
        ``skew_check_interval`` while it is not good) with (skew in seconds,
        or None if the clocks could not be compared for ``skew_grace``;
        within tolerance): raises or resolves the alert."""
        self.clock_skew: float | None = None
        """This server's clock minus the database's, in seconds, at the last
        conclusive comparison (None: none yet)."""

    @property
    def owner(self) -> str:
        """The session name hand-outs are stamped with."""
        return self.lease.owner

    @owner.setter
    def owner(self, owner: str) -> None:
        self.lease = Lease(owner, self.lease.session)

    @property
    def session(self) -> Session | None:
        return self.lease.session

    def use_session(self, session: Session, owner: str) -> None:
        """Hand out under ``session`` (named ``owner`` in the store) from now
        on. The server calls it once the executions stamped with its previous
        session were re-stamped with this one. Rounds and claims under way
        keep the session they started with, and their fence refuses it.
        Wakes nothing: the caller runs a round (:meth:`.Gateway.use_session`)."""
        self.lease = Lease(owner, session)

    def refusal(self, lease: Lease | None = None) -> str | None:
        """Why nothing may be handed out under ``lease`` (the current one by
        default) now, or None if it may: its session is not surely alive
        for a quarter of its TTL more, or the clock guard refuses
        (:mod:`.clockguard`). Safe to call from any thread: a claim's
        transaction calls it just before committing."""
        session = (lease or self.lease).session
        if session is not None and not session.surely_alive(SESSION_MARGIN * session.ttl):
            return f"session {session.id:x} is lost or in doubt ({session.lost_reason or 'not renewed in time'})"
        return self._clock_refusal()

    def _clock_refusal(self) -> str | None:
        if self._db_clock is None:
            return None
        return clockguard.refusal(
            self._clock_check, self._clock.now(), self._clock.monotonic(), tolerance=self._skew_tolerance,
            max_age=self._skew_max_age, step=CLOCK_STEP,
        )

    @property
    def compares_clocks(self) -> bool:
        """True if the clocks are compared (a ``db_clock`` was given)."""
        return self._db_clock is not None

    @property
    def handing_out(self) -> bool:
        """True if a round started now would hand out."""
        return self.refusal() is None

    def _alarming(self, refused: str | None) -> bool:
        since = self._undecided_since
        undecided_for = None if since is None else self._clock.monotonic() - since
        return clockguard.alarming(refused, undecided_for, grace=self._skew_grace)

    def note_refusal(self, refused: str | None) -> None:
        """Log when hand-out stops and when it resumes (once each): at ERROR
        when the refusal is alarming (:func:`clockguard.alarming`), at INFO
        while it only waits for a conclusive comparison of the clocks within
        ``skew_grace`` (at ERROR once the grace is over and it still waits)."""
        alarming = self._alarming(refused)
        if (refused, alarming) == self._refused:
            return
        if refused is None:
            log.log(logging.WARNING if self._stopped_loudly else logging.INFO, "handing out resumes (session %s)",
                    self.owner)
            self._stopped_loudly = False
        elif alarming:
            log.error("handing out stops: %s", refused)
            self._stopped_loudly = True
        else:
            log.info("handing out waits: %s (comparing again; an error if no comparison settles it within %g s)",
                     refused, self._skew_grace)
        self._refused = (refused, alarming)

    async def check_skew_if_due(self) -> None:
        """Compare the clocks when the last comparison is a minute old, and
        at once after a wall-clock step; while the guard refuses, every
        second."""
        stepped = self._clock_refusal() == clockguard.STEPPED
        if stepped and self._clock_check is not self._step_seen:
            self._step_seen = self._clock_check
            log.warning("this server's wall clock was stepped: comparing it with the database's again")
            self._next_skew_check = self._clock.monotonic()
        if self._clock.monotonic() < self._next_skew_check:
            return
        good = await self.check_skew()
        refused = self._clock_refusal()
        again = self._skew_check_interval if good and refused is None else SKEW_RETRY_INTERVAL
        self._next_skew_check = self._clock.monotonic() + again

    async def check_skew(self) -> bool:
        """Compare the clocks: read the database's clock up to
        :data:`SKEW_SAMPLES` times back to back (no further read after a
        failed one, nor once :data:`SKEW_SAMPLE_TIME` was spent reading) and
        judge by the conclusive read with the smallest round trip
        (:func:`clockguard.judge`, :func:`clockguard.best`). True if the
        comparison was conclusive (whatever it found)."""
        started = self._clock.monotonic()
        checks: list[clockguard.ClockCheck | None] = []
        slowest = 0.0
        failed = False
        for _ in range(SKEW_SAMPLES):
            before, before_mono = self._clock.now(), self._clock.monotonic()
            try:
                db_now = await self._db_clock()
            except Exception as error:
                self.outages.failed("reading the database's clock", error)
                failed = True
                break
            after, after_mono = self._clock.now(), self._clock.monotonic()
            checks.append(clockguard.judge(before, before_mono, after, after_mono, db_now,
                                           tolerance=self._skew_tolerance))
            slowest = max(slowest, after_mono - before_mono)
            if after_mono - started >= SKEW_SAMPLE_TIME:
                break
        if not failed:
            self.outages.ok()
        check = clockguard.best(checks)
        if check is None:
            if self._undecided_since is None:
                self._undecided_since = started
            if checks:
                log.info("the database's clock took up to %.3f s to read in %d reads (or this server's clock "
                         "moved meanwhile): clock skew not checked this time", slowest, len(checks))
            await self._report_skew(None)
            return False
        self._undecided_since = None
        previous, self._clock_check = self._clock_check, check
        self.clock_skew = check.skew
        ok = check.within(self._skew_tolerance)
        was_ok = previous is None or previous.within(self._skew_tolerance)
        if not ok and was_ok:
            log.error(
                "clock skew %.3f s between this server and the database exceeds %.3f s: "
                "handing out stops until they agree (never early)", check.skew, self._skew_tolerance,
            )
        elif ok and not was_ok:
            log.warning("clock skew %.3f s is within %.3f s again", check.skew, self._skew_tolerance)
        await self._report_skew(check.skew, ok)
        return True

    async def _report_skew(self, skew: float | None, ok: bool = False) -> None:
        """Tell ``on_skew`` a verdict: a good one once, a bad one when it
        starts and again every check interval while it lasts. An
        inconclusive comparison (``skew`` None) is a bad verdict only once
        the guard refuses for want of a conclusive one and the comparisons
        stayed inconclusive for ``skew_grace``."""
        if self._on_skew is None:
            return
        if skew is None:
            refused = self._clock_refusal()
            if refused not in clockguard.UNDECIDED:
                return  # the last conclusive verdict still holds
            if not self._alarming(refused):
                return  # not a skew: hand-out waits, the grace is not over
            ok = False
        now = self._clock.monotonic()
        last = self._skew_reported
        if last is not None and last[0] == ok and (ok or now - last[1] < self._skew_check_interval):
            return
        try:
            await self._on_skew(skew, ok)
        except Exception as error:
            self.outages.failed("recording the clock-skew alert", error)
            return
        self._skew_reported = (ok, now)

