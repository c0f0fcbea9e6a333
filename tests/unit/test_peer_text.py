"""store.peertext: the escapes the write path, migration 0036 and the read path share."""

from __future__ import annotations

import pytest

from tickwheel_server.api.text import refused_character
from tickwheel_server.store.peertext import escaped_text, readable_error, stored_error

SAMPLES = ["plain", "Café \u3000 👩\u200d💻", "\x1b[2J\r\n\u202e\x85\x9b\x7f\u2028\ufeff\U000e0041", "C:\\new\\x1b"]


@pytest.mark.parametrize("text", SAMPLES)
def test_each_escape_is_idempotent_and_leaves_a_backslash_as_it_is(text: str) -> None:
    for escape in (stored_error, escaped_text, readable_error):
        once = escape(text)
        assert escape(once) == once
        assert once.count("\\") >= text.count("\\")
    assert escaped_text("a\\b") == stored_error("a\\b") == "a\\b"


def test_free_text_escape_changes_exactly_what_the_api_refuses() -> None:
    for code in [*range(0, 0x3100), *range(0xFE00, 0x10000), *range(0xE0000, 0xE0080)]:
        char = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        assert (escaped_text(char) != char) == (refused_character(char) is not None), hex(code)


def test_a_stored_error_is_printable_and_bounded() -> None:
    text = stored_error("\x1b" * 5000)
    assert text.isprintable() and len(text) == 4096 and text.endswith("…")
    assert readable_error("\x1b]0;owned\x07") == "\\x1b]0;owned\\x07"
