"""The skip tally's wrapper: what it counts, and the names it keeps."""

from __future__ import annotations

from collections import Counter

from tickwheel_server.store.skiptally import counted, tallied


def test_a_tallied_function_keeps_its_names_and_counts_each_attempt_afresh() -> None:
    def claim_due_fn(occurrences: int) -> int:
        counted("misfire", occurrences)
        return occurrences

    tally: Counter[str] = Counter()
    attempt = tallied(claim_due_fn, tally)
    # Logs and the trace hook name a transaction by its function.
    assert (attempt.__name__, attempt.__qualname__) == (claim_due_fn.__name__, claim_due_fn.__qualname__)
    assert attempt(3) == 3 and tally == Counter(misfire=3)
    assert attempt(2) == 2 and tally == Counter(misfire=2), "a retried attempt starts over"
