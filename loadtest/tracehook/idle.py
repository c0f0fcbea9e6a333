"""Reads traces of ``sitecustomize.py`` (``PREFIX.<pid>``, one a server) and
prints, as JSON, how long the server's transactions sat idle inside
themselves: per transaction attempt, the longest wait between the end of
one statement's round trip and the start of the next (its Python between
statements, and its wait for the interpreter's lock and a CPU), from its
first statement (which carries the BEGIN) to its COMMIT. That is what the
database's ``idle_in_transaction_session_timeout`` counts, overstated: the
statements a pipeline queues are counted as idle until its Sync. Per
transaction function: attempts, the longest wait, its 99th percentile; and
the longest of all. What the server's idle limit (the session TTL) must
stay well above (docs/architecture.md, "Data").

    .venv/bin/python loadtest/tracehook/idle.py /tmp/trace.<pid> [/tmp/trace.<pid> …]
"""

from __future__ import annotations

import bisect
import collections
import json
import sys

from analyse import read_events
from windows import quantile


def longest_waits(events: list[tuple[str, str, str, float, float]]) -> dict[str, list[float]]:
    """Per transaction function, each attempt's longest wait between two of its statements."""
    statements: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for kind, thread, _what, start, end in events:
        if kind == "sql":
            statements[thread].append((start, end))
    for spans in statements.values():
        spans.sort()
    waits: dict[str, list[float]] = collections.defaultdict(list)
    for kind, thread, what, start, end in events:
        if kind != "tx":
            continue
        spans = statements[thread]
        first = bisect.bisect_left(spans, (start, start))
        inside = [span for span in spans[first:bisect.bisect_right(spans, (end, end))] if span[1] <= end]
        gaps = [later[0] - earlier[1] for earlier, later in zip(inside, inside[1:])]
        waits[what].append(max(gaps, default=0.0))
    return waits


def main(argv: list[str]) -> int:
    waits: dict[str, list[float]] = collections.defaultdict(list)
    for path in argv:
        for what, found in longest_waits(read_events(path)).items():
            waits[what].extend(found)
    if not waits:
        print("no transactions in the traces")
        return 1
    report = {
        what: {"attempts": len(found), "longest_wait_s": round(max(found), 4),
               "p99_wait_s": round(quantile(sorted(found), 0.99), 4)}
        for what, found in sorted(waits.items(), key=lambda item: -max(item[1]))
    }
    worst = next(iter(report))
    print(json.dumps({"longest_wait_s": report[worst]["longest_wait_s"], "in": worst,
                      "attempts": sum(r["attempts"] for r in report.values()), "by_transaction": report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
