"""Benchmark: what reading a worker's result costs by the text of its error,
without a database: CPU nanoseconds a result (``time.thread_time``, the best
of ``--repeat`` rounds) of ``read_result`` (every result passes it, on the
event loop, as a worker's batch arrives), by error shape:

- ``none``: a success, no error;
- ``line``: one printable line (``HTTP 500 Internal Server Error: ...``);
- ``lines``: a handler's message of a few lines;
- ``hostile_4k``: 4 KiB of what a hostile target's body says (escape
  sequences, CR LF, C1 bytes), as the server keeps at most.

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_result_text.py [--results 2000] [--repeat 7] [--smoke]

Prints one JSON object, ``ns_per_result`` by shape, and
``ns_per_held_result_at_write``: what escaping costs where the store writes
a held result (the ``isprintable`` test, then ``store.outcomes.stored_error``
when it fails), in the store's thread, once a delivery; null in a tree
without it. Run it with another tree's ``PYTHONPATH`` to compare trees (each
times that tree's code); ``--smoke`` runs tiny sizes so CI keeps the script alive.
"""

from __future__ import annotations

import argparse
import json
import time

from tickwheel.v1 import worker_pb2

from tickwheel_server.gateway.result_check import read_result

try:
    from tickwheel_server.store.outcomes import stored_error
except ImportError:  # a tree that stores a worker's error unescaped
    stored_error = None

NOW_US = 1_796_000_000_000_000
ERRORS = {
    "none": "",
    "line": "HTTP 500 Internal Server Error: the database exploded while charging the card",
    "lines": "ValueError: the amount must be positive\n  while charging order 1234\n  for customer 42\n",
    "hostile_4k": ("\x1b]0;owned\x07\x1b[2J\r\n2026-12-07 INFO forged line \x9b" * 100)[:4096],
}


def _results(error: str, count: int) -> list[worker_pb2.ExecutionResult]:
    outcome = worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE if error else worker_pb2.RESULT_OUTCOME_SUCCEEDED
    return [worker_pb2.ExecutionResult(execution_id=f"job_{i}:2027-01-01T00:00:00Z", delivery=1, attempt=1,
                                       outcome=outcome, error=error) for i in range(count)]  # fmt: skip


def _best_ns(results: list[worker_pb2.ExecutionResult], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.thread_time()
        for result in results:
            read_result(result, NOW_US, "w1", ("acme",))
        best = min(best, time.thread_time() - began)
    return best / len(results) * 1e9


def _best_write_ns(error: str, count: int, repeat: int) -> float:
    """As the store's loop does for each held result (``outcomes.record_results``)."""
    errors = [error] * count
    best = float("inf")
    for _ in range(repeat):
        began = time.thread_time()
        for text in errors:
            if not text.isprintable():
                stored_error(text)
        best = min(best, time.thread_time() - began)
    return best / count * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: only that it runs")
    args = parser.parse_args()
    count, repeat = (20, 1) if args.smoke else (args.results, args.repeat)
    report = {
        "benchmark": "result_text",
        "smoke": args.smoke,
        "results": count,
        "repeat": repeat,
        "ns_per_result": {shape: round(_best_ns(_results(error, count), repeat)) for shape, error in ERRORS.items()},
        "ns_per_held_result_at_write": None if stored_error is None else {
            shape: round(_best_write_ns(error, count, repeat)) for shape, error in ERRORS.items()
        },
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
