"""Which characters a request's text may hold: pure checks, one per kind of text.

Free text (names, label values, descriptions, reasons) is one line a person
reads: any printable character, but no C0 or C1 control (NUL, CR, LF, TAB,
ESC, DEL ...), no line or paragraph separator, and no invisible format
character (Unicode category Cf: bidirectional overrides and isolates
U+202A-U+202E and U+2066-U+2069, marks, zero-width space, BOM, tag
characters), which could hide or reorder what a reader sees. ZERO WIDTH
NON-JOINER and ZERO WIDTH JOINER (U+200C, U+200D) stay allowed: scripts such
as Persian and emoji sequences need them.

HTTP header names are RFC 9110 tokens; header values are printable ASCII
with spaces and tabs (no CR, LF or NUL, no obs-text, which the worker's HTTP
client cannot send).
"""

from __future__ import annotations

import re
import unicodedata

_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_JOINERS = frozenset({"\u200c", "\u200d"})
HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]*\Z")


def refused_character(value: str) -> tuple[int, str] | None:
    """The first character free text may not hold, as (index, its code point
    written ``U+`` and four or more hex digits, e.g. ``U+202E``), or None."""
    if value.isascii():
        found = _ASCII_CONTROL.search(value)
        return None if found is None else (found.start(), f"U+{ord(found.group()):04X}")
    for index, char in enumerate(value):
        if unicodedata.category(char) in _REFUSED_CATEGORIES and char not in _JOINERS:
            return index, f"U+{ord(char):04X}"
    return None


def text_problem(value: str, max_chars: int, *, required: bool = False) -> str | None:
    """Why ``value`` is not acceptable free text of at most ``max_chars``
    characters (``required``: at least one), or None when it is."""
    if required and not value:
        return f"required, at most {max_chars} characters"
    if len(value) > max_chars:
        return f"at most {max_chars} characters"
    refused = refused_character(value)
    if refused is not None:
        index, code = refused
        return (
            f"may not contain control characters, line separators or invisible format characters "
            f"(bidirectional overrides, zero-width characters): {code} at index {index}"
        )
    return None


def shown(value: str, limit: int = 64) -> str:
    """``value`` as safe to echo in a field path: itself when it is short
    printable ASCII, otherwise an ASCII-escaped, shortened form."""
    if len(value) <= limit and value.isascii() and value.isprintable():
        return value
    escaped = ascii(value[: limit + 1])[1:-1]
    return escaped[:limit] + "..." if len(escaped) > limit else escaped
