"""Reads a trace of ``sitecustomize.py`` (``PREFIX.<pid>``) and, optionally,
``bench_e2e.py``'s JSON of the same run; prints, over the claims' window
(from just before the first claim that inserted executions to the last
one's end): how many claim transactions were in flight at once, their time
in statements against their Python, each statement's mean as the client saw
it beside ``pg_stat_statements``' mean where its first 30 characters name
one shape (the difference: the round trip,
waiting for the interpreter's lock and for a CPU), and the event loop's lag.

    .venv/bin/python loadtest/tracehook/analyse.py /tmp/trace.<pid> [e2e.json]
"""

from __future__ import annotations

import collections
import json
import statistics
import sys


def read_events(path: str) -> list[tuple[str, str, str, float, float]]:
    """A trace's events: (kind, thread, what, start, end), in its order."""
    events = []
    with open(path) as trace:
        for line in trace:
            kind, thread, what, start, end = line.rstrip("\n").split("\t")
            events.append((kind, thread, what, float(start), float(end)))
    return events


def main(argv: list[str]) -> int:
    events = read_events(argv[0])
    inserts = [e for e in events if e[0] in ("sql", "queued") and e[2].startswith("INSERT INTO executions")]
    if not inserts:
        print("no claim inserted executions")
        return 1
    begin, end = min(e[3] for e in inserts) - 0.3, max(e[4] for e in inserts)
    window = end - begin
    claims = [e for e in events if e[0] == "tx" and "claim_due" in e[2] and e[4] > begin and e[3] < end + 0.01]
    edges = sorted([(c[3], 1) for c in claims] + [(c[4], -1) for c in claims])
    at_once, now, last = collections.Counter(), 0, begin
    for instant, step in edges:
        if instant > last:
            at_once[now] += min(instant, end) - last
        now += step
        last = max(last, instant)
    in_sql = sum(e[4] - e[3] for c in claims for e in events
                 if e[0] == "sql" and e[1] == c[1] and c[3] <= e[3] <= c[4])
    in_tx = sum(c[4] - c[3] for c in claims)
    print(f"claims' window {window:.3f} s, {len(claims)} claims; in flight at once (share of the window): "
          + ", ".join(f"{k}: {v / window:.2f}" for k, v in sorted(at_once.items())))
    print(f"claim transactions {in_tx:.2f} s: statements {in_sql:.2f} s, Python {in_tx - in_sql:.2f} s")
    # Waits a claim that inserted: each statement sent alone, each pipeline's Sync, the COMMIT
    # (psycopg's BEGIN rides in a transaction's first statement sent alone, a round trip of its own).
    waits = [[e[2] for e in events if e[0] == "sql" and e[1] == c[1] and c[3] <= e[3] <= c[4]] for c in claims]
    waits = [w for w in waits if any(t.startswith(("INSERT INTO executions", "PIPELINE")) and "INSERT" in t for t in w)]
    if waits:
        print(f"claims that inserted: {len(waits)}, mean transaction ms "
              f"{statistics.mean(c[4] - c[3] for c in claims) * 1000:.1f}; waits a claim "
              f"{collections.Counter(map(len, waits)).most_common()}: " + " | ".join(waits[len(waits) // 2]))
    server = None
    if len(argv) > 1:
        with open(argv[1]) as report:
            server = json.load(report)["server"]
    by_prefix = collections.defaultdict(list)
    for top in (server or {}).get("sql", {}).get("top", []):
        by_prefix[top["query"][:30]].append(top["mean_ms"])
    # pg_stat_statements writes constants as $n: a prefix two shapes share names neither
    pg_means = {prefix: means[0] if len(means) == 1 else "?" for prefix, means in by_prefix.items()}
    last_result = max((e[4] for e in events if e[0] == "tx" and "record_results" in e[2]), default=end)
    statements = collections.defaultdict(list)
    for e in events:
        if e[0] == "sql" and begin <= e[3] and e[4] <= last_result:
            statements[e[2]].append(e[4] - e[3])
    print("statement (first 60 characters) | calls | client's mean ms | PostgreSQL's mean ms")
    for text, times in sorted(statements.items(), key=lambda item: -sum(item[1]))[:12]:
        print(f"{text:60s} | {len(times):5d} | {statistics.mean(times) * 1000:8.2f} | {pg_means.get(text[:30], '-')}")
    lags = sorted(e[4] - e[3] - 0.002 for e in events if e[0] == "lag" and begin <= e[3] and e[4] <= last_result)
    if lags:
        p90 = lags[int(len(lags) * 0.9)]
        print(f"event loop lag ms: mean {statistics.mean(lags) * 1000:.2f}, p90 {p90 * 1000:.2f}, "
              f"max {lags[-1] * 1000:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
