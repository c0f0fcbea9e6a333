"""Refusals of clients' requests in the log: one line a key a minute.

A client that is refused (bytes that are no message, a hello past a stream
cap or past its credential's budget) may try again at once, forever: a
line a refusal would let it fill the log and bury the lines an operator
needs. :class:`RefusalLog` says when a refusal is to be logged at its
level (WARNING, mostly) rather than DEBUG: the first of its key (a
service, a credential id: what the refusal is about), then the first once
``interval`` seconds have passed since that key's last such line; the ones
in between are counted, and the next line says how many there were. The
caller writes the line (its own logger, its own words) and any DEBUG line
for the rest; what is counted in a metric is counted there, whether or not
it is logged.

The keys remembered are bounded (``max_keys``): a client rotating
credentials, tenants or worker ids cannot grow the map. Past the bound the
key refused least recently is forgotten (its count since its last line
with it), so a key refused again and again stays remembered, and stays
quiet, through a flood of others; a forgotten key's next refusal is said
again, which costs a line, never memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

LOG_INTERVAL = 60.0
"""Seconds between two lines about the refusals of one key (the rest DEBUG)."""
MAX_KEYS = 10_000
"""Keys a :class:`RefusalLog` remembers at most."""


class RefusalLog:
    """When to log a refusal at its level, not DEBUG, per key: see the module docstring.
    ``now`` is a monotonic clock (seconds)."""

    def __init__(
        self, *, interval: float = LOG_INTERVAL, max_keys: int = MAX_KEYS, now: Callable[[], float] = time.monotonic
    ) -> None:
        if interval < 0 or max_keys < 1:
            raise ValueError("need interval >= 0 and max_keys >= 1")
        self._interval = interval
        self._max_keys = max_keys
        self._now = now
        self._keys: OrderedDict[Hashable, list] = OrderedDict()
        """Key -> [monotonic instant its next line is due, refusals since its last], least recently refused first."""

    def __len__(self) -> int:
        return len(self._keys)

    def refused(self, key: Hashable) -> int:
        """Count one refusal of ``key``. Returns how many refusals of the
        key its line is to say (this one included, and those since its
        last line) when this one is to be logged at its level; 0 when it
        is not (the caller says it at DEBUG, or not at all)."""
        at = self._now()
        entry = self._keys.get(key)
        if entry is None:
            entry = self._keys[key] = [float("-inf"), 0]
            while len(self._keys) > self._max_keys:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(key)
        entry[1] += 1
        if at < entry[0]:
            return 0
        count, entry[0], entry[1] = entry[1], at + self._interval, 0
        return count
