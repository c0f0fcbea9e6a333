"""Reads a trace of ``sitecustomize.py`` (``PREFIX.<pid>``) and prints how
long the rows of each round's and each claim's hand-out were ``running``
under the server's session before a send queued them on a worker's
stream: from the hand-out's COMMIT (its transaction returned) to the end
of the send of its batch, per row (a round's rows go out in one send, a
claim's in one a group of workers). These are the rows a server's death
in that window strands for the reaper's grace, since their worker is not
recorded (docs/architecture.md, Workers and failures).

    .venv/bin/python loadtest/tracehook/windows.py /tmp/trace.<pid>
"""

from __future__ import annotations

import collections
import json
import sys


def quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv: list[str]) -> int:
    committed: dict[int, tuple[str, float, int]] = {}
    sent: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
    with open(argv[0]) as trace:
        for line in trace:
            kind, _thread, what, start, end = line.rstrip("\n").split("\t")
            if kind == "committed":
                name, at_us, rows = what.rsplit(" ", 2)
                kind_of = "claim" if "claim_due" in name else "round" if "hand_out_ready" in name else name
                committed[int(at_us)] = (kind_of, float(end), int(rows))
            elif kind == "sent":
                at_us, rows = what.split(" ")
                sent[int(at_us)].append((float(end), int(rows)))
    windows: dict[str, list[float]] = collections.defaultdict(list)
    transactions = collections.Counter()
    unsent = collections.Counter()
    for at_us, (kind, at, rows) in committed.items():
        transactions[kind] += 1
        out = sent.get(at_us, [])
        for end, count in out:
            windows[kind] += [end - at] * count
        unsent[kind] += rows - sum(count for _, count in out)
    report = {}
    for kind, values in sorted(windows.items()):
        values.sort()
        report[kind] = {
            "transactions": transactions[kind], "rows_sent": len(values), "rows_not_sent": unsent[kind],
            "ms_p50": round(1000 * quantile(values, 0.5), 2), "ms_p90": round(1000 * quantile(values, 0.9), 2),
            "ms_p99": round(1000 * quantile(values, 0.99), 2), "ms_max": round(1000 * values[-1], 2),
            "ms_mean": round(1000 * sum(values) / len(values), 2),
            "row_seconds": round(sum(values), 3),
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
