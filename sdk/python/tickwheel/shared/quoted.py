"""Text a peer sent (an HTTP target, an alert sink), quoted in an error or a log line: bounded and escaped.

What a target's status line, header or body says, or an exception that
quotes it (``http.client.BadStatusLine`` holds the whole line, up to 64
KiB), reaches stored errors, terminals, log pipelines and consoles. Quoted
through :func:`quoted` it is at most ``limit`` characters, and every
character that is not printable (C0 and C1 controls, DEL, line breaks,
bidi and other format characters) is escaped as Python writes it
(``\\x1b``, ``\\n``, ``\\u202e``), so none of it acts as a control sequence.
"""

from __future__ import annotations


def quoted(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, each that is not printable
    escaped, and ``…`` at the end when something was cut. NUL, which
    PostgreSQL's text cannot keep, becomes U+FFFD rather than ``\\x00``."""
    cut = len(text) > limit
    text = text[:limit].replace("\x00", "\ufffd")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    if cut or len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
