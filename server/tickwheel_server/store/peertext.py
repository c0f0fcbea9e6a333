"""Text a peer wrote (a worker, an HTTP target, a tenant), as the store keeps and reads it: escaped.

Two kinds, each with one escape that the write path, migration 0036 (rows
written raw by earlier releases) and the read path share:

- A worker's error (what an HTTP target answered included):
  :func:`stored_error`, every character that is not printable escaped as
  Python writes it (``\\x1b``, ``\\n``, ``\\u202e``), at most
  :data:`ERROR_KEPT_CHARS` characters. ``store/outcomes.py`` applies it to
  each applied result.
- Free text (reasons, descriptions, alert text): :func:`escaped_text`,
  only what the API refuses in free text escaped (``api/text.py``: C0 and
  C1 controls, line and paragraph separators, invisible format characters
  but ZWNJ and ZWJ), so every text the API accepts is kept as it is. The
  API refuses such text at the write (since its "bad input" release), and
  the store's writes escape it whoever calls them: reasons (a cancel's, a
  pause's, the cancel reason a run ends with, copied from its row),
  descriptions, alerts (``store/alerts.py``).

Both leave a backslash as it is: an escape is not told apart from a
backslash the peer wrote (``\\x1b`` reads the same either way). That is
what makes them idempotent: escaped text holds only characters each keeps,
so escaping it again changes nothing, and a row written escaped by the
previous release, whose backslashes cannot be told apart, is never escaped
twice. Escaping the backslash too would make the form unambiguous, and
double every backslash of every row stored since that release.

:func:`readable_error` and :func:`escaped_text` are the read path's guard,
for a row written raw that migration 0036 has not reached (a rolling
upgrade: servers of the earlier release write raw errors until they stop):
the text itself when it is printable, which every escaped row is, so a
read pays one ``str.isprintable`` (C code) a field.
"""

from __future__ import annotations

import unicodedata

from tickwheel.shared.quoted import quoted

ERROR_KEPT_CHARS = 4096
"""At most this many characters of a worker's error are kept, ``…`` where cut."""

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""What ``api/text.py``'s ``refused_character`` refuses in free text (a unit test checks that they agree)."""
_JOINERS = frozenset("\u200c\u200d")


def stored_error(error: str) -> str:
    """A worker's error as it is stored, and from there read by every API,
    alert and console: each character that is not printable (ESC, CR, LF,
    C1, bidi overrides) escaped as Python writes it (``\\x1b``, ``\\n``,
    ``\\u202e``), at most :data:`ERROR_KEPT_CHARS` characters, ``…`` where cut."""
    return quoted(error, ERROR_KEPT_CHARS)


def escaped_text(text: str) -> str:
    """Free text with each character the API refuses in it escaped as
    Python writes it; text the API accepts comes back as it is. NUL, which
    PostgreSQL's text cannot keep, is never there to escape."""
    if text.isprintable():
        return text
    return "".join(
        ascii(c)[1:-1] if unicodedata.category(c) in _ESCAPED_CATEGORIES and c not in _JOINERS else c for c in text
    )


def readable_error(error: str) -> str:
    """A stored error as it is read: itself, or :func:`stored_error` of a raw one."""
    return error if error.isprintable() else stored_error(error)
