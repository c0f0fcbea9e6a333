"""Reads a trace of ``sitecustomize.py`` (``PREFIX.<pid>``) of a burst
(``bench_burst.py``) and prints what the server did between its hand-out
batches: one line a batch, by hand-out instant (its stamp, relative to the
first), when its start or claim transaction ran and when its send queued
it, and what else held the store's threads, the event loop or the whole
interpreter meanwhile (results written, claims, arming, the loop's lag over
20 ms, the garbage collector's passes); then how many batches were started
before the first send (the burst's instant) and how long no start was under
way between the first and the last; then the longest gap between two
consecutive instants and what overlapped it.

    .venv/bin/python loadtest/tracehook/burst.py /tmp/trace.<pid>
"""

from __future__ import annotations

import collections
import sys

from analyse import read_events

LAG_SHOWN = 0.02
"""Seconds of the loop's lag worth a mention."""


def main(argv: list[str]) -> int:
    events = read_events(argv[0])
    batches: dict[int, dict] = collections.defaultdict(dict)
    for kind, _thread, what, start, end in events:
        if kind in ("started", "committed"):
            _name, at_us, rows = what.rsplit(" ", 2)
            batches[int(at_us)].update(kind=kind, done=end, rows=int(rows))
        elif kind == "sent":
            at_us, rows = what.split()
            batches[int(at_us)].setdefault("sent", start)
    batches = {at: b for at, b in batches.items() if "done" in b}
    if len(batches) < 2:
        print("fewer than two hand-out batches in the trace")
        return 1
    instants = sorted(batches)
    first = instants[0]
    origin = batches[first]["done"]
    print("instant_s  rows  kind       done_s   sent_s   (seconds from the first batch's commit)")
    for at in instants:
        batch = batches[at]
        sent = batch.get("sent")
        print(f"{(at - first) / 1e6:9.3f} {batch['rows']:5d}  {batch['kind']:9s} {batch['done'] - origin:7.3f}  "
              + (f"{sent - origin:7.3f}" if sent is not None else "   none"))
    starts = sorted((start, end) for kind, _t, what, start, end in events if kind == "tx" and "ArmStore.start" in what)
    first_sent = min((b["sent"] for b in batches.values() if "sent" in b), default=None)
    if starts and first_sent is not None:
        # What decides a burst's mode: are all its starts done before the
        # instant (its first send)? The store's idle time between starts
        # is the time no start transaction was under way.
        ahead = sum(1 for b in batches.values() if b["kind"] == "started" and b["done"] <= first_sent)
        idle, reach = 0.0, starts[0][1]
        for start, end in starts[1:]:
            idle += max(0.0, start - reach)
            reach = max(reach, end)
        print(f"\nstarts: {len(starts)}, the first began {first_sent - starts[0][0]:.3f} s before the first send; "
              f"{ahead} of {len(batches)} batches started before it; no start under way for {idle * 1000:.0f} ms "
              f"between the first start and the last")
    gap, before, after = max((b - a, a, b) for a, b in zip(instants, instants[1:]))
    # The stamps are wall-clock µs, the events monotonic: the gap's window is
    # placed from the earlier batch's commit, which follows its stamp.
    begin = batches[before]["done"]
    end = begin + gap / 1e6
    print(f"\nlongest gap: {gap / 1000:.1f} ms, between the batches at {(before - first) / 1e6:.3f} s "
          f"and {(after - first) / 1e6:.3f} s; what ran in it:")
    for kind, thread, what, start, stop in sorted(events, key=lambda e: e[3]):
        if stop < begin or start > end:
            continue
        if kind == "tx" and stop - start > 0.005 or kind == "gc" or kind == "lag" and stop - start > LAG_SHOWN:
            print(f"  {kind:4s} {thread:12s} {what[:50]:50s} {start - origin:7.3f} .. {stop - origin:7.3f}"
                  f"  ({(stop - start) * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
