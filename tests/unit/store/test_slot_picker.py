"""The max-jobs quota's slot picker (store/quota.py): a process keeps taking
from the slots it used before, so the reserve a dry slot was dealt is what
its next calls use; concurrent transactions of one tenant still get
different slots, and what it remembers is bounded."""

from __future__ import annotations

import random
from contextlib import ExitStack

from tickwheel_server.policy.quota import SLOTS
from tickwheel_server.store.quota import SlotPicker


def test_a_process_returns_to_the_slot_it_used() -> None:
    picker = SlotPicker(random.Random(7))
    with picker.slot("acme") as first:
        pass
    for _ in range(5):
        with picker.slot("acme") as again:
            assert again == first
    with picker.slot("globex") as other:  # another tenant picks on its own
        assert 0 <= other < SLOTS


def test_concurrent_transactions_get_different_slots_and_keep_them() -> None:
    picker = SlotPicker(random.Random(11))
    with ExitStack() as stack:
        held = [stack.enter_context(picker.slot("acme")) for _ in range(4)]
    assert len(set(held)) == 4
    # Four at once again: the same four slots, the most recent first.
    with ExitStack() as stack:
        again = [stack.enter_context(picker.slot("acme")) for _ in range(4)]
    assert again == list(reversed(held))


def test_with_every_slot_busy_one_is_shared_and_memory_is_bounded() -> None:
    picker = SlotPicker(random.Random(3), tenants=2)
    with ExitStack() as stack:
        taken = [stack.enter_context(picker.slot("acme")) for _ in range(SLOTS + 1)]
    assert sorted(set(taken)) == list(range(SLOTS))
    for tenant in ("a", "b", "c"):
        with picker.slot(tenant):
            pass
    assert set(picker._recent) == {"b", "c"}
