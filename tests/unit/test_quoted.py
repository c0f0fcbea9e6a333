"""tickwheel.shared.quoted: what a peer sent, bounded and escaped for an error or a log line."""

from __future__ import annotations

import pytest

from tickwheel.shared.quoted import quoted


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("plain text", 64, "plain text"),
        ("\x1b]0;owned\x07\x1b[2J\r\nforged", 64, "\\x1b]0;owned\\x07\\x1b[2J\\r\\nforged"),
        ("rtl \u202e fdp.exe \x85\x9b\x7f", 64, "rtl \\u202e fdp.exe \\x85\\x9b\\x7f"),
        ("nul\x00", 64, "nul\ufffd"),
        ("x" * 100, 10, "x" * 9 + "…"),
        ("\x1b" * 100, 10, "\\x1b\\x1b\\…"),  # escaping never lengthens past the limit
        ("emoji \U0001f600 and é", 64, "emoji \U0001f600 and é"),
    ],
)
def test_quoted_bounds_and_escapes_what_a_peer_sent(text: str, limit: int, expected: str) -> None:
    assert quoted(text, limit) == expected
    assert len(quoted(text, limit)) <= limit
