"""Backfill of a window larger than one BackfillJob call may take.

The server caps one call at 10 000 occurrences and answers INVALID_ARGUMENT
``to_at`` beyond it. How many occurrences a window holds is not knowable
before asking (it depends on the schedule, its zone and the DST rules), so
the CLI asks for the whole window and halves the chunk width each time the
server says it is too large, then walks the rest of the window at the width
that worked. Chunks are contiguous and half-open, ``[from, to)``, so every
occurrence falls in exactly one; the server's derived execution ids make a
repeated chunk harmless anyway.

Each call pays for the fires the server computed from the tenant's request
rate, so a large window soon leaves the tenant owing: a chunk refused over
the rate is asked again once the server's retry delay has passed
(:func:`~tickwheel_server.cli.ratewait.paced`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

import grpc

from tickwheel import TickwheelError
from tickwheel.v1 import scheduler_pb2

from .ratewait import paced

__all__ = ["backfill_in_chunks", "is_window_too_large"]

_CAP_WORDS = ("10000", "10 000", "10,000", "too many", "too large", "occurrences", "at most", "exceed")


def is_window_too_large(error: TickwheelError) -> bool:
    """True when ``error`` is the server refusing a window for holding too
    many occurrences: INVALID_ARGUMENT about ``to_at`` (or with no field)
    whose text speaks of the cap, and not of ``to_at`` being in the future or
    before ``from_at``."""
    if error.code != grpc.StatusCode.INVALID_ARGUMENT:
        return False
    fields = {v.field for v in error.field_violations}
    if fields and not any(f == "to_at" or f.endswith(".to_at") for f in fields):
        return False
    text = " ".join([error.message, *(v.description for v in error.field_violations)]).lower()
    if "future" in text or "after from" in text or "before from" in text:
        return False
    return any(word in text for word in _CAP_WORDS)


Progress = Callable[[int, datetime, scheduler_pb2.BackfillJobResponse], None]


def backfill_in_chunks(
    call: Callable[[datetime, datetime], scheduler_pb2.BackfillJobResponse],
    start: datetime,
    end: datetime,
    *,
    progress: Progress | None = None,
    min_width: timedelta = timedelta(seconds=1),
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[scheduler_pb2.BackfillJobResponse, int]:
    """Backfills ``[start, end)`` through ``call(from, to)``, splitting as the
    server requires. Returns the merged response (occurrences in order,
    counts summed) and the number of calls that succeeded.

    ``progress(chunks_done, covered_until, merged_so_far)`` is called after
    every chunk of a window that needed more than one. A refusal over the
    tenant's request rate is waited out (``sleep``,
    :func:`.ratewait.paced`). Any other error, or a window still too large at ``min_width``, propagates;
    the chunks before it have been applied (and are harmless to apply again).
    """
    if not start < end:
        raise ValueError("the window's start must be before its end")
    merged = scheduler_pb2.BackfillJobResponse()
    cursor, width, chunks = start, end - start, 0
    while cursor < end:
        stop = min(cursor + width, end)
        try:
            response = paced(lambda: call(cursor, stop), sleep=sleep)
        except TickwheelError as error:
            if not is_window_too_large(error) or stop - cursor <= min_width:
                raise
            half = timedelta(seconds=int((stop - cursor).total_seconds() // 2))
            width = max(half, min_width)
            continue
        merged.occurrences.extend(response.occurrences)
        merged.created_count += response.created_count
        merged.existing_count += response.existing_count
        chunks += 1
        cursor = stop
        if progress is not None and (chunks > 1 or cursor < end):
            progress(chunks, cursor, merged)
    return merged, chunks
