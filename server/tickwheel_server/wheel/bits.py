"""Occupancy bitmaps: one bit per slot of a level, set while the slot holds a timer.

They let the wheel find its next non-empty slot in a few integer operations
instead of visiting empty slots one tick at a time, so a wheel that sleeps
through a quiet stretch (or a clock that jumps) costs nothing per empty tick.
"""

from __future__ import annotations


def first_set_from(bits: int, start: int, width: int) -> int:
    """Distance from slot ``start`` to the first set bit, going up and wrapping.

    ``bits`` is a non-zero bitmap of ``width`` slots; the answer is ``k`` in
    ``[0, width)`` such that bit ``(start + k) % width`` is the first set one.
    """
    rotated = ((bits >> start) | (bits << (width - start))) & ((1 << width) - 1)
    return (rotated & -rotated).bit_length() - 1
