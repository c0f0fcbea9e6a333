"""Slots: taken at once while free, then handed to waiters in order; an abandoned wait gives its slot back."""

from __future__ import annotations

from tickwheel_worker.slots import Slots


async def test_free_slots_are_taken_at_once_then_waiters_are_served_in_order() -> None:
    slots = Slots(2)
    assert slots.take() and slots.take()
    assert not slots.take() and slots.locked()
    first, second = slots.wait(), slots.wait()

    slots.release()
    assert first.done() and not second.done() and slots.free == 0
    slots.release()
    assert second.done() and slots.free == 0
    slots.release()
    slots.release()
    assert slots.free == 2 and not slots.locked()


async def test_an_abandoned_wait_is_skipped_and_a_slot_handed_to_it_goes_back() -> None:
    slots = Slots(1)
    assert slots.take()
    gone, handed, after = slots.wait(), slots.wait(), slots.wait()

    slots.abandon(gone)  # still waiting: cancelled, skipped when its turn comes
    slots.release()
    assert gone.cancelled() and handed.done() and not after.done()

    slots.abandon(handed)  # a slot was handed to it: it passes to the next waiter
    assert after.done() and slots.free == 0
    slots.release()
    assert slots.free == 1 and slots.take()
