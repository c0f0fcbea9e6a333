"""Refusal windows: a caller refused with a retry delay that calls again
inside it is refused again at the edge, before anything else.

When the authenticator refuses a call RESOURCE_EXHAUSTED with a retry
delay (its tenant over its request rate, its peer over its failed
authentications, or the server over its own), a window opens for the
call's caller key (:func:`caller_key`: its bearer secret; its peer when it
sent none) until that delay ends. Each call with that key inside the window
is refused at once with the same status, built once a window: before its
request is decoded, its credential checked, a bucket touched or the store
read (``api/decoding.py`` asks :meth:`RefusalWindows.inside` first).

A caller that heeds RetryInfo never calls inside its window. One that
does not is escalated: past :data:`SLACK` calls inside one window (room
for a burst that was in flight and for a few processes sharing a key),
every further ``SLACK`` calls double the window, up to
:data:`MAX_WINDOW_SECONDS`, and each such call is held until the window
ends (at most :data:`HOLD_SECONDS`, while fewer than :data:`MAX_HELD` are
held on this server) before it is refused: a client calling in a loop then
makes a few calls a second per call it keeps in flight, not thousands,
and one past its connection's stream limit is reset by gRPC's core, which
costs no Python (``transport.py``). The escalation is remembered for
:data:`DECAY_SECONDS` after a window ends, so a refusal soon after opens
the escalated window again.

Keyed by credential, not by peer: a tenant behind the same NAT as the
flood has a key of its own and never meets its window. A caller that sends
a new random secret each time has a new key each time, so a peer refused
for its failed authentications (:mod:`.failures`) also opens a window
under its peer's key (:func:`peer_window_key`), which every call from it
meets whose secret did not verify on this server lately (:attr:`RefusalWindows.trusted`),
or that sent none. The trade: a credential first used from that address
while its window lasts (up to :data:`MAX_WINDOW_SECONDS` once escalated,
where the failure limit alone would hold it back while the flood spends
the peer's failures) waits for it to end; one that verified here within
the hour does not. A call's peer is read only while some peer window is
kept.

Bounded: at most :data:`MAX_KEYS` windows (least recently refused
dropped first). Time is the injected clock's, so tests decide every
window's end.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from tickwheel.shared.clock import Clock

from ..errors import TickwheelError
from . import failures, tokens

SLACK = 16
MAX_WINDOW_SECONDS = 10.0
HOLD_SECONDS = 1.0
MAX_HELD = 2000
DECAY_SECONDS = 60.0
MAX_KEYS = 10_000
PEER_KEY = "peer "
"""Prefix of the caller key of a call without a bearer secret (a secret
holds no space, so the two never meet)."""


def escalated(delay: float, strikes: int, slack: int = SLACK, cap: float = MAX_WINDOW_SECONDS) -> float:
    """The window after ``strikes`` calls inside it, of a refusal whose
    retry delay was ``delay`` (pure): ``delay`` up to ``slack`` strikes,
    then doubled every ``slack`` more, at most ``cap`` (and never less than
    ``delay``)."""
    if strikes <= slack:
        return delay
    return max(delay, min(cap, delay * 2.0 ** min(64, (strikes - slack) // slack + 1)))


def caller_key(context) -> str:
    """The key a call's refusal windows are kept under: its bearer secret
    as sent (``authorization: Bearer <secret>``), or ``"peer <peer>"``
    when it sent none (:func:`peer_window_key`)."""
    _, secret = tokens.call_bearer(context)
    return secret_key(secret, context)


def secret_key(secret: str | None, context) -> str:
    """:func:`caller_key` of a call whose bearer secret (or None) was
    already read from its metadata: a call's edge reads it once."""
    return secret if secret is not None else peer_window_key(context)


def peer_window_key(context) -> str:
    """``"peer <peer>"``: the key of the window of a call's peer
    (:func:`.failures.peer_key`; ``unknown`` when the context cannot say)."""
    peer = getattr(context, "peer", None)
    try:
        text = peer() if callable(peer) else ""
    except Exception:  # a context without a transport (a test's, a closed call's)
        text = ""
    return PEER_KEY + failures.peer_key(text if isinstance(text, str) else "")


Answer = tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]
"""(code, message, trailing metadata) of a refused call."""


@dataclass(slots=True)
class Window:
    """One caller's refusal: until when, why, and the answer built for it."""

    until: float
    delay: float
    """The refusal's retry delay as it was given."""
    length: float
    """The window's length now (:func:`escalated`)."""
    strikes: int
    """Calls inside the window (carried into the next one within :data:`DECAY_SECONDS`)."""
    error: TickwheelError
    answer: Answer | None = None
    """(code, message, trailing metadata) of a call refused inside it; built once a window length."""


class RefusalWindows:
    """The windows of callers refused with a retry delay (see the module docstring)."""

    def __init__(
        self, clock: Clock, *, slack: int = SLACK, max_window: float = MAX_WINDOW_SECONDS, hold: float = HOLD_SECONDS,
        max_held: int = MAX_HELD, max_keys: int = MAX_KEYS,
    ) -> None:
        if slack < 1 or max_keys < 1 or max_held < 0 or hold < 0 or max_window <= 0:
            raise ValueError("slack and max_keys must be >= 1, max_window > 0, hold and max_held >= 0")
        self._clock = clock
        self.slack, self.max_window, self.hold, self.max_held, self.max_keys = slack, max_window, hold, max_held, max_keys
        self._windows: OrderedDict[str, Window] = OrderedDict()
        self._peers = 0
        """Windows kept under a peer's key (none: a call's peer is never read)."""
        self.trusted: Callable[[str], bool] = lambda secret: False
        """Whether a secret verified on this server lately (the authenticator
        sets it): such a call never meets its peer's window."""
        self.held = 0
        """Calls held now."""
        self.refused = 0
        """Calls refused inside a window."""

    def __len__(self) -> int:
        return len(self._windows)

    def opened(self, key: str, error: TickwheelError, delay: float) -> float:
        """``key``'s call was refused with ``error``, to be retried after
        ``delay`` seconds: calls with ``key`` until then are refused at the
        edge (for longer when it was escalated within :data:`DECAY_SECONDS`).
        A refusal while ``key``'s window is open counts as a call inside it
        (calls sent together pass the edge before the first is refused).
        The window's length: the delay to tell the call."""
        now = self._clock.monotonic()
        window = self._windows.pop(key, None)
        self._peers += key.startswith(PEER_KEY) - (window is not None and key.startswith(PEER_KEY))
        strikes = window.strikes if window is not None and now < window.until + DECAY_SECONDS else 0
        if window is not None and now < window.until:
            strikes += 1  # refused inside its window: a call that passed the edge with others before it opened
        length = escalated(delay, strikes, self.slack, self.max_window)
        self._windows[key] = Window(now + length, delay, length, strikes, error)
        while len(self._windows) > self.max_keys:
            self._peers -= self._windows.popitem(last=False)[0].startswith(PEER_KEY)
        return length

    def refusing(self, context, key: str | None = None) -> Window | None:
        """The window a call falls in (:meth:`inside`): its caller key's
        (``key`` when the caller read it, :func:`secret_key`; else read
        here); or, for a call whose secret is not :attr:`trusted`, its
        peer's (a peer over its failed authentications sending a new
        secret each call)."""
        key = caller_key(context) if key is None else key
        window = self.inside(key)
        if window is not None or not self._peers or key.startswith(PEER_KEY) or self.trusted(key):
            return window
        return self.inside(peer_window_key(context))

    def window(self, key: str) -> Window | None:
        """``key``'s last window, ended or not (nothing counted)."""
        return self._windows.get(key)

    def inside(self, key: str) -> Window | None:
        """The window ``key``'s call falls in (counted as a strike, which
        may lengthen it), or None when it falls in none."""
        window = self._windows.get(key)
        if window is None:
            return None
        now = self._clock.monotonic()
        if now >= window.until:
            return None
        window.strikes += 1
        length = escalated(window.delay, window.strikes, self.slack, self.max_window)
        if length > window.length:  # a step: the window starts again, this long, with its own answer
            window.until, window.length, window.answer = now + length, length, None
        return window

    def holding(self, window: Window) -> float:
        """Seconds to hold a call that fell in ``window`` before refusing
        it: none within the slack or while :data:`MAX_HELD` are held."""
        if window.strikes <= self.slack or self.held >= self.max_held:
            return 0.0
        return max(0.0, min(self.hold, window.until - self._clock.monotonic()))

    async def refuse(self, window: Window, abort, build: Callable[[TickwheelError, float], Answer]) -> None:
        """Hold the call (:meth:`holding`), then refuse it with ``window``'s
        answer through ``abort(code, message, trailing_metadata=...)``
        (``context.abort``, which raises); ``build(error, retry_after)``
        makes the answer when the window has none yet (the API's statuses,
        which this room does not import)."""
        self.refused += 1
        hold = self.holding(window)
        if hold > 0:
            self.held += 1
            try:
                await self._clock.sleep(hold)
            finally:
                self.held -= 1
        if window.answer is None:
            window.answer = build(window.error, max(0.001, window.until - self._clock.monotonic()))
        code, message, trailing = window.answer
        await abort(code, message, trailing_metadata=trailing)
