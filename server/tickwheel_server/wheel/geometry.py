"""The shape of a timer wheel: tick, slots per level, levels.

Time inside the wheel is counted in *ticks* of ``tick_us`` microseconds. Level
0 has one slot per tick; each slot of level ``L`` spans ``slots_per_level**L``
ticks, so ``levels`` levels together cover ``slots_per_level**levels`` ticks
(the *span*). ``levels`` is the fewest that make the span reach the horizon
(the dispatcher's look-ahead); an instant beyond the span goes to the
overflow list and is cascaded in when it comes within reach, so the horizon
is a sizing hint, never a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WheelGeometry:
    """Validated when built; every field is in integer microseconds or a count."""

    tick_us: int = 10_000
    """Resolution: one level-0 slot. A timer fires at the first tick boundary
    at or after its due instant, so it is late by less than one tick, never
    early. Default 10 ms."""

    slots_per_level: int = 256
    """Slots in each level; a power of two, at least 2. Default 256."""

    horizon_us: int = 60_000_000
    """How far ahead the wheel is expected to hold timers (the look-ahead,
    default 60 s): it decides ``levels``. Timers further out still work,
    through the overflow list."""

    slot_bits: int = field(init=False)
    """log2(slots_per_level)."""

    levels: int = field(init=False)
    """Number of levels: the fewest whose span covers ``horizon_us``."""

    def __post_init__(self) -> None:
        for name in ("tick_us", "slots_per_level", "horizon_us"):
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"WheelGeometry.{name} must be an int, not {type(value).__name__}")
        if self.tick_us < 1:
            raise ValueError("WheelGeometry.tick_us must be at least 1 microsecond")
        slots = self.slots_per_level
        if slots < 2 or slots & (slots - 1):
            raise ValueError("WheelGeometry.slots_per_level must be a power of two, at least 2")
        if self.horizon_us < self.tick_us:
            raise ValueError("WheelGeometry.horizon_us must be at least one tick")
        horizon_ticks = -(-self.horizon_us // self.tick_us)
        levels = 1
        while slots**levels < horizon_ticks:
            levels += 1
        object.__setattr__(self, "slot_bits", slots.bit_length() - 1)
        object.__setattr__(self, "levels", levels)

    @property
    def span_ticks(self) -> int:
        """Ticks the levels cover from the current tick; beyond is overflow."""
        return self.slots_per_level**self.levels

    @property
    def span_us(self) -> int:
        """``span_ticks`` in microseconds (at least ``horizon_us``)."""
        return self.span_ticks * self.tick_us
