"""The timer wheel: the due instants of the executions this server claimed,
in memory, for the next look-ahead (default 60 s) of its partitions.

Instants are integer microseconds since the Unix epoch, UTC, as the store
keeps them (``tickwheel.shared.ids.to_us``/``from_us``). The store stays the
authority: the wheel only decides *when* to wake the gateway, and is rebuilt
from the store on start and when a partition is acquired.

Public API:

- :class:`TimerWheel`: the pure structure. ``insert(key, due_us, payload)``
  (O(1); an existing key moves), ``cancel(key) -> bool`` (O(1)),
  ``pop_due(now_us) -> list[Timer]`` (in due order, never early),
  ``next_due_us()`` (a cheap lower bound), ``next_fire_us()`` (when to wake),
  ``rebuild(timers, now_us)``, ``drop(predicate(key, due_us, payload)) -> int``,
  ``get``, ``items``, ``len``, ``in``.
- :class:`WheelRunner`: the asyncio driver on a ``Clock``; sleeps until the
  next tick that has timers (at most ``max_sleep``, 1 s), wakes early for an
  earlier insert, and awaits ``on_due(batch)``.
- ``Timer``: a plain ``(key, due_us, payload)`` tuple; :class:`WheelGeometry`:
  tick (default 10 ms), slots per level (256), horizon (60 s) -> levels.

Files: ``geometry.py`` (shape, validated), ``bits.py`` (slot bitmaps),
``timer.py`` (Timer), ``wheel.py`` (the structure), ``runner.py`` (the
driver).
"""

from .geometry import WheelGeometry
from .runner import OnDue, WheelRunner
from .timer import Timer
from .wheel import TimerWheel

__all__ = ["OnDue", "Timer", "TimerWheel", "WheelGeometry", "WheelRunner"]
