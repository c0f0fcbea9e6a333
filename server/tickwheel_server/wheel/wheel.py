"""The hierarchical timer wheel: a pure data structure on integer time.

Instants are integer microseconds since the Unix epoch, UTC (the store's
representation, ``tickwheel.shared.ids.to_us``); the wheel never reads a
clock, the caller passes ``now_us`` in.

How it works (Varghese & Lauck's hierarchical wheel, as the Linux kernel's
cascading timer wheel did it, plus occupancy bitmaps):

- A timer due at ``due_us`` belongs to tick ``t = ceil(due_us / tick_us)``:
  placement rounds **up**, so the tick's boundary ``t * tick_us`` is never
  before the due instant.
- ``current`` is the first tick not yet processed. A timer with
  ``d = t - current`` below ``S`` (slots per level) goes to level 0, slot
  ``t % S``; below ``S**(L+1)`` to level ``L``, slot ``(t >> L*bits) % S``;
  beyond the top level to the overflow list; a timer whose tick was already
  processed (``t < current``) to the overdue list, handed out by the next
  ``pop_due`` whose ``now_us`` has reached it.
- Processing tick ``x`` re-places the overflow list (at its earliest
  timer's tick), then cascades, top level first, every level whose
  slot boundary ``x`` is, re-placing those timers relative to ``x`` (each
  lands strictly lower), then hands out level 0's slot ``x``.
- Per-level bitmaps of non-empty slots find the next tick where anything
  happens in a few integer operations, so ``pop_due`` jumps over empty
  stretches instead of walking them tick by tick. Each upper-level slot
  also keeps the earliest tick put in it (a lower bound once a timer is
  cancelled), so ``next_fire_us`` names the tick the earliest timer fires
  at, not the boundary where its slot cascades: a driver sleeps through
  cascades, which ``pop_due`` catches up on in order.

Storage: an index ``key -> timer`` (the ``(key, due_us, payload)`` tuple
handed back when due) and a plain list of timers per slot. Insert appends
to a slot's list and writes the index; cancel and move only change the
index, leaving a dead timer in its slot, recognised later by identity (the
index no longer points at that tuple) and skipped. Dead timers are dropped
when their slot cascades or is handed out, or all at once when they
outnumber the live ones, so memory stays within about twice the live set
and the bitmaps are at worst a little early. That is one hash-table write
per insert instead of two and no allocation when handing out; and tuples
of strings and ints are untracked by the garbage collector, which matters
with millions of timers.

Costs: insert, cancel and move are O(1) (amortised, counting the occasional
compaction); each timer is cascaded at most ``levels - 1`` times, so
handing out ``n`` timers costs O(n) plus sorting each level-0 slot (one
tick's timers) by due instant. The overflow list is re-scanned whole at its
earliest timer's tick, which pulls in everything within a span of it, so
re-scans are at least a span apart (655 s by default); it stays empty while
every timer is within the horizon.

Guarantees (what the tests hold it to):

- **Never early.** ``pop_due(now_us)`` returns a timer only when
  ``due_us <= now_us``; by construction a timer on level 0 slot ``t`` is
  handed out only once ``now_us >= t * tick_us >= due_us``, and each one is
  checked again as it leaves.
- **Never lost, never twice.** Every inserted timer not cancelled, moved or
  dropped is returned by exactly one ``pop_due``: the first whose
  ``now_us // tick_us >= ceil(due_us / tick_us)`` (with ``now_us`` never
  decreasing), so it is late by less than one tick.
- **Due order.** One ``pop_due`` returns its timers sorted by ``due_us``
  (equal instants in no particular order); timers held together come out in
  due order across calls too (a timer inserted already overdue comes out
  with the next call, ahead of that call's other timers).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from operator import itemgetter
from typing import Any

from .bits import first_set_from
from .geometry import WheelGeometry
from .timer import Timer

_FAR = 1 << 200  # "no timer": later than any instant or tick
_COMPACT_AT = 1024  # dead timers tolerated regardless of the live count
_key_of = itemgetter(0)
_due_of = itemgetter(1)
_consume = deque(maxlen=0).extend  # runs an iterator to its end in C


class TimerWheel:
    """Keyed timers on a hierarchical wheel; see the module docstring.

    ``now_us`` is where the wheel's time starts: ticks before
    ``now_us // tick_us`` count as processed, so a timer inserted with an
    earlier due instant is overdue and handed out by the next ``pop_due``.
    Not thread-safe; in Tickwheel one event loop owns it.
    """

    __slots__ = (
        "geometry", "_tick", "_tick_less_1", "_size", "_bits", "_mask", "_levels", "_overflow",
        "_overdue", "_slots", "_occupied", "_slot_min_tick", "_where", "_dead", "_current",
        "_overflow_min_tick", "_overdue_min_us",
    )

    def __init__(
        self,
        now_us: int,
        *,
        tick_us: int = 10_000,
        slots_per_level: int = 256,
        horizon_us: int = 60_000_000,
    ) -> None:
        geometry = WheelGeometry(tick_us=tick_us, slots_per_level=slots_per_level, horizon_us=horizon_us)
        self.geometry = geometry
        self._tick = geometry.tick_us
        self._tick_less_1 = geometry.tick_us - 1  # ceil(due / tick) as (due + tick - 1) // tick
        self._size = geometry.slots_per_level
        self._bits = geometry.slot_bits
        self._mask = geometry.slots_per_level - 1
        self._levels = geometry.levels
        # Slots are numbered in one flat space: level L's slot i is L*S + i,
        # then the overflow list, then the overdue list.
        self._overflow = geometry.levels * geometry.slots_per_level
        self._overdue = self._overflow + 1
        self._current = now_us // self._tick
        self._where: dict[Hashable, Timer] = {}
        self._empty_slots()

    def _empty_slots(self) -> None:
        self._slots: list[list[Timer]] = [[] for _ in range(self._overdue + 1)]
        self._occupied = [0] * self._levels  # bit i of level L: slot L*S + i's list is not empty
        self._slot_min_tick = [_FAR] * self._overflow  # earliest tick put in a slot (levels >= 1)
        self._overflow_min_tick = _FAR  # lower bounds, exact after each re-scan or pop
        self._overdue_min_us = _FAR
        self._dead = 0  # dead timers left in slot lists

    # ----------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def get(self, key: Hashable) -> Timer | None:
        """The timer held under ``key``, or None."""
        return self._where.get(key)

    def items(self) -> list[Timer]:
        """Every timer held, in no particular order (O(n): for checks and debugging)."""
        return list(self._where.values())

    @property
    def current_tick(self) -> int:
        """The first tick not yet processed."""
        return self._current

    def next_due_us(self) -> int | None:
        """A lower bound on the earliest held timer's ``due_us``; None when empty.

        Cheap (a few bitmap operations per level) and never later than the
        real earliest due instant, though it may be earlier: it is the lower
        edge of the tick ``next_fire_us`` names.
        """
        if not self._where:
            return None
        low = min((self._next_fire_tick() - 1) * self._tick + 1, self._overdue_min_us)
        return None if low >= _FAR else low

    def next_fire_us(self) -> int | None:
        """When ``pop_due`` can next hand something out; None when empty.

        The boundary of the tick the earliest timer fires at (or an overdue
        timer's due instant): a driver sleeps until then. Never later than
        that timer can be handed out, and ``pop_due`` before it returns
        nothing. Exact, except that a cancelled or moved timer can leave it
        earlier than needed until its slot is reached (at most one wasted
        wake-up per such timer). Cheap: a few bitmap operations per level.
        """
        if not self._where:
            return None
        fire = min(self._next_fire_tick() * self._tick, self._overdue_min_us)
        return None if fire >= _FAR else fire

    # ----------------------------------------------------------------- changes

    def insert(self, key: Hashable, due_us: int, payload: Any = None) -> None:
        """Hold ``key`` until ``due_us``; an existing ``key`` moves (its old
        instant and payload are forgotten). O(1) amortised."""
        timer = (key, due_us, payload)
        where = self._where
        moved = key in where
        where[key] = timer
        # Levels 0 and 1 inline (the whole default look-ahead): _place_all's
        # set-up costs a fifth of an insert. Same rules as _place_all.
        tick = (due_us + self._tick_less_1) // self._tick
        distance = tick - self._current
        if 0 <= distance < self._size:
            index = tick & self._mask
            slot = self._slots[index]
            if not slot:
                self._occupied[0] |= 1 << index
            slot.append(timer)
        elif distance > 0 and distance >> self._bits < self._size and self._levels > 1:
            index = (tick >> self._bits) & self._mask
            number = self._size | index
            slot = self._slots[number]
            if not slot:
                self._occupied[1] |= 1 << index
                self._slot_min_tick[number] = tick
            elif tick < self._slot_min_tick[number]:
                self._slot_min_tick[number] = tick
            slot.append(timer)
        else:
            self._place_all((timer,))
        if moved:  # the old tuple is dead in its slot
            self._dead += 1
            if self._dead > _COMPACT_AT and self._dead > len(where):
                self._compact()

    def cancel(self, key: Hashable) -> bool:
        """Forget ``key``; False if it was not held (already handed out, never
        inserted, or cancelled). O(1) amortised."""
        if self._where.pop(key, None) is None:
            return False
        self._dead += 1
        if self._dead > _COMPACT_AT and self._dead > len(self._where):
            self._compact()
        return True

    def drop(self, predicate: Callable[[Hashable, int, Any], bool]) -> int:
        """Cancel every timer for which ``predicate(key, due_us, payload)`` is
        true (the timers of a partition this server lost); returns how many. O(n)."""
        doomed = [key for key, due_us, payload in self._where.values() if predicate(key, due_us, payload)]
        for key in doomed:
            self.cancel(key)
        return len(doomed)

    def rebuild(self, timers: Iterable[tuple[Hashable, int, Any]], now_us: int | None = None) -> None:
        """Replace the contents with ``timers`` ((key, due_us, payload) triples;
        a repeated key keeps its last). The store is the authority: this is
        how the wheel is refilled on start and after an ownership change.

        ``now_us``, when given and later than the wheel's time, moves the
        wheel's time there first (ticks before it count as processed).
        """
        if now_us is not None and now_us // self._tick > self._current:
            self._current = now_us // self._tick
        self._where = {key: (key, due_us, payload) for key, due_us, payload in timers}
        self._empty_slots()
        self._place_all(self._where.values())

    def pop_due(self, now_us: int) -> list[Timer]:
        """Remove and return the timers due by ``now_us``, sorted by ``due_us``.

        Processes every tick up to ``now_us // tick_us`` (jumping over empty
        ones) and the overdue list; a ``now_us`` earlier than a previous call's
        processes no tick and returns only overdue timers it has reached.
        """
        out: list[Timer] = []
        if self._slots[self._overdue]:
            self._pop_overdue(now_us, out)
        now_tick = now_us // self._tick
        next_event_tick = self._next_event_tick
        while True:
            tick = next_event_tick()
            if tick > now_tick:
                break
            self._process(tick, now_us, out)
        if now_tick >= self._current:
            self._current = now_tick + 1
        return out

    # ----------------------------------------------------------------- inside

    def _place_all(self, timers: Iterable[Timer]) -> None:
        """Append each timer to the slot it belongs in relative to ``_current``.

        The one placement routine (insert, cascade, re-scan, rebuild), with
        everything it reads held in locals: it is the wheel's inner loop.
        """
        tick_less_1, tick_us, current = self._tick_less_1, self._tick, self._current
        size, bits, mask, levels = self._size, self._bits, self._mask, self._levels
        slots, occupied, slot_min_tick = self._slots, self._occupied, self._slot_min_tick
        for timer in timers:
            tick = (timer[1] + tick_less_1) // tick_us
            distance = tick - current
            if 0 <= distance < size:
                slot = slots[tick & mask]
                if not slot:
                    occupied[0] |= 1 << (tick & mask)
            elif distance >= 0:
                level = (distance.bit_length() - 1) // bits
                if level < levels:
                    index = (tick >> (level * bits)) & mask
                    number = (level << bits) | index
                    slot = slots[number]
                    if not slot:
                        occupied[level] |= 1 << index
                        slot_min_tick[number] = tick
                    elif tick < slot_min_tick[number]:
                        slot_min_tick[number] = tick
                else:
                    slot = slots[self._overflow]
                    if tick < self._overflow_min_tick:
                        self._overflow_min_tick = tick
            else:
                slot = slots[self._overdue]
                if timer[1] < self._overdue_min_us:
                    self._overdue_min_us = timer[1]
            slot.append(timer)

    def _take(self, number: int) -> list[Timer]:
        """Empty slot ``number`` and return its list (dead timers included)."""
        timers = self._slots[number]
        self._slots[number] = []
        if number < self._overflow:
            self._occupied[number >> self._bits] &= ~(1 << (number & self._mask))
        return timers

    def _claim(self, timers: list[Timer]) -> list[Timer]:
        """The live timers of ``timers``, taken out of the index; the dead
        ones (cancelled, or moved: the index holds another tuple) are forgotten."""
        where = self._where
        if not self._dead:  # nothing cancelled or moved: all live, unindex them in C
            _consume(map(where.__delitem__, map(_key_of, timers)))
            return timers
        live = []
        for timer in timers:
            held = where.pop(timer[0], None)
            if held is timer:
                live.append(timer)
            elif held is not None:  # moved: the key lives on in another slot
                where[timer[0]] = held
        self._dead -= len(timers) - len(live)
        return live

    def _sweep(self, timers: list[Timer]) -> list[Timer]:
        """``timers`` without the dead ones, so a cascade does not carry them
        down (free when nothing was cancelled or moved)."""
        if not self._dead:
            return timers
        where = self._where
        live = [timer for timer in timers if where.get(timer[0]) is timer]
        self._dead -= len(timers) - len(live)
        return live

    def _compact(self) -> None:
        """Drop every dead timer: re-place the live ones from the index. O(n)."""
        self._empty_slots()
        self._place_all(self._where.values())

    def _next_event_tick(self) -> int:
        """The first tick at or after ``_current`` where a non-empty slot is
        handed out or cascaded, or the overflow list is re-scanned; ``_FAR``
        if the levels and the overflow list are empty.

        Level 0's slot ``i`` is handed out at the next tick ``x`` with
        ``x % S == i``; level L's slot ``j`` cascades at the next multiple
        ``x`` of ``S**L`` with ``(x >> L*bits) % S == j`` (placement only ever
        puts a timer in a slot whose next such boundary is where it must go).
        """
        current = self._current
        size, bits, mask = self._size, self._bits, self._mask
        occupied = self._occupied
        # Re-scan the overflow list at its earliest timer's tick: as late as
        # is correct, so each re-scan brings in everything within a span.
        best = max(current, self._overflow_min_tick) if self._slots[self._overflow] else _FAR
        if occupied[0]:
            tick = current + first_set_from(occupied[0], current & mask, size)
            if tick < best:
                best = tick
        for level in range(1, self._levels):
            if occupied[level]:
                shift = level * bits
                block = -(-current >> shift)  # the first level-L boundary at or after current
                block += first_set_from(occupied[level], block & mask, size)
                tick = block << shift
                if tick < best:
                    best = tick
        return best

    def _next_fire_tick(self) -> int:
        """A lower bound on the tick the earliest held timer (overdue ones
        aside) fires at, exact unless dead timers linger; ``_FAR`` if none.

        Level 0's next non-empty slot holds timers of exactly its tick. On an
        upper level the first non-empty slot in rotation order holds the
        earliest timers of that level (its block comes first and blocks do
        not overlap), so its recorded minimum is the level's.
        """
        current = self._current
        size, bits, mask = self._size, self._bits, self._mask
        occupied = self._occupied
        best = self._overflow_min_tick if self._slots[self._overflow] else _FAR
        if occupied[0]:
            tick = current + first_set_from(occupied[0], current & mask, size)
            if tick < best:
                best = tick
        for level in range(1, self._levels):
            if occupied[level]:
                shift = level * bits
                block = -(-current >> shift)
                block += first_set_from(occupied[level], block & mask, size)
                tick = self._slot_min_tick[(level << bits) | (block & mask)]
                if tick < best:
                    best = tick
        return best

    def _process(self, tick: int, now_us: int, out: list[Timer]) -> None:
        """Do everything tick ``tick`` holds, top down: re-scan the overflow
        list if due, cascade each level ``tick`` is a boundary of, hand out
        level 0's slot into ``out``; then move ``_current`` past it."""
        self._current = tick
        bits, mask = self._bits, self._mask
        if self._slots[self._overflow] and tick >= self._overflow_min_tick:
            self._overflow_min_tick = _FAR
            self._place_all(self._sweep(self._take(self._overflow)))
        for level in range(self._levels - 1, 0, -1):
            shift = level * bits
            if tick & ((1 << shift) - 1) == 0:
                index = (tick >> shift) & mask
                if self._occupied[level] >> index & 1:
                    self._place_all(self._sweep(self._take((level << bits) | index)))
        index = tick & mask
        if self._occupied[0] >> index & 1:
            due = self._claim(self._take(index))
            if len(due) > 1:
                due.sort(key=_due_of)
            if due and due[-1][1] > now_us:  # cannot happen (tick * tick_us <= now_us); never hand out early
                due = self._keep_early(due, now_us)
            out.extend(due)
        self._current = tick + 1

    def _keep_early(self, due: list[Timer], now_us: int) -> list[Timer]:
        """Put the timers of ``due`` not due by ``now_us`` back, on the overdue
        list (the next ``pop_due`` that reaches them hands them out); return the rest."""
        for timer in due:
            if timer[1] > now_us:
                self._where[timer[0]] = timer
                self._slots[self._overdue].append(timer)
                self._overdue_min_us = min(self._overdue_min_us, timer[1])
        return [timer for timer in due if timer[1] <= now_us]

    def _pop_overdue(self, now_us: int, out: list[Timer]) -> None:
        """Hand out the overdue timers due by ``now_us`` (all of them unless
        ``now_us`` went backwards) and make ``_overdue_min_us`` exact."""
        timers = self._claim(self._take(self._overdue))
        timers.sort(key=_due_of)
        self._overdue_min_us = _FAR
        for position, timer in enumerate(timers):
            if timer[1] > now_us:
                kept = timers[position:]
                for held in kept:
                    self._where[held[0]] = held
                self._slots[self._overdue] = kept
                self._overdue_min_us = timer[1]
                timers = timers[:position]
                break
        out.extend(timers)
