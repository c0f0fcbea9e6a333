"""The progress line of the commands that work through a large file
(``job import``, ``apply``): one self-rewriting line on stderr, shown only
when stderr is a terminal and never beside ``--json``, so piped or scripted
output stays the result alone."""

from __future__ import annotations

from typing import Any, TextIO

__all__ = ["ProgressLine", "live_stream"]

BAR_WIDTH = 30


def live_stream(ctx: Any) -> TextIO | None:
    """``ctx.stderr`` when a progress line belongs there, else None."""
    stream = ctx.stderr
    return stream if not ctx.json and hasattr(stream, "isatty") and stream.isatty() else None


class ProgressLine:
    """``label: [####    ]  42.0% text`` rewritten in place on ``stream``
    (None: shows nothing)."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.shown = False

    def show(self, label: str, text: str, fraction: float | None = None) -> None:
        if self.stream is None:
            return
        if fraction is not None:
            fraction = min(max(fraction, 0.0), 1.0)
            text = f"[{'#' * int(fraction * BAR_WIDTH):<{BAR_WIDTH}}] {fraction * 100:5.1f}% {text}"
        self.stream.write(f"\r{label}: {text}\x1b[K")
        self.stream.flush()
        self.shown = True

    def end(self) -> None:
        """Ends the line (when one was shown)."""
        if self.stream is not None and self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
