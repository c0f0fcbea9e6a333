"""How Tickwheel's own processes (server, ``tickwheel dev``, ``tickwheel
worker``) set Python's cyclic garbage collector.

CPython's default collects the youngest generation every 700 container
allocations. A hand-out batch builds thousands of rows, candidates and
messages that live for the batch: each is scanned by several young
collections, promoted, and scanned again in the older generations, and a
full collection walks the whole heap (what that cost, and what a young
generation of 50 000 saves: loadtest/RESULTS.md). Garbage in reference
cycles waits that much longer to be freed: at most a few megabytes.

The objects alive once the process has imported its modules (modules,
classes, functions, the gRPC and SQLAlchemy machinery) live as long as the
process: :func:`tune_collector` moves them out of the collector's view
(``gc.freeze``) so that full collections do not walk them again and again.

Only the entry points call this: the worker SDK embedded in someone else's
process leaves that process's collector alone.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
"""Container allocations (net of frees) between two young collections."""
OLDER_THRESHOLDS = (20, 10)
"""Young collections per middle one, middle ones per full one (CPython also
waits for the long-lived objects to grow by a quarter before a full one)."""


def tune_collector() -> None:
    """Freeze what is alive now and set the thresholds above."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
