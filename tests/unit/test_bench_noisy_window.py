"""The noisy-neighbour benchmark's hand-out window (``loadtest/
bench_noisy_neighbour.py``: ``hand_out_window``), from each execution's
first start: its length to the microsecond, the hand-outs in it and a rate
that is None only for a window of no time. Pure: no store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from bench_noisy_neighbour import FLOOD, QUIET, hand_out_window  # noqa: E402

DUE = 1_800_000_000_000_000
"""A due instant, microseconds."""


def test_an_armed_batch_stamped_microseconds_after_the_instant_has_a_window_and_a_rate() -> None:
    """Issue of session 20: a last quiet start 300 µs after the instant made a
    window that printed as 0.0 s with a rate of millions a second."""
    starts = [(QUIET, DUE), (FLOOD, DUE + 1), (FLOOD, DUE + 2), (QUIET, DUE + 300), (FLOOD, DUE + 301)]
    window = hand_out_window(starts, DUE)
    assert window == {"window_s": 0.0003, "hand_outs": 4, "hand_outs_per_s": round(4 / 0.0003, 1),
                      "quiet_part": 0.5}


def test_every_quiet_start_at_the_instant_itself_is_a_window_of_no_time_and_no_rate() -> None:
    starts = [(QUIET, DUE)] * 3 + [(FLOOD, DUE)] * 5 + [(FLOOD, DUE + 10)]
    assert hand_out_window(starts, DUE) == {"window_s": 0.0, "hand_outs": 8, "hand_outs_per_s": None,
                                            "quiet_part": 0.375}


def test_a_window_of_seconds_counts_only_the_starts_inside_it() -> None:
    second = 1_000_000
    starts = [(FLOOD, DUE - 5), (QUIET, DUE + second // 2), (FLOOD, DUE + second), (QUIET, DUE + 2 * second),
              (FLOOD, DUE + 3 * second)]
    assert hand_out_window(starts, DUE) == {"window_s": 2.0, "hand_outs": 3, "hand_outs_per_s": 1.5,
                                            "quiet_part": 0.667}


@pytest.mark.parametrize("starts", [[], [(QUIET, DUE)], [(FLOOD, DUE)]], ids=["none", "quiet-only", "flood-only"])
def test_without_both_tenants_there_is_no_window(starts: list[tuple[str, int]]) -> None:
    assert hand_out_window(starts, DUE) is None
