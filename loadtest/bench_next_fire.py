"""Benchmark: next-fire computations per second, Tickwheel vs plain croniter.

    .venv/bin/python loadtest/bench_next_fire.py [--jobs N] [--seed S] [--smoke]

Prints one JSON object. The workload is a realistic mix of job schedules
(every minute, every 15 minutes, hourly, daily in 20 zones, weekdays,
monthly, Jenkins ``H`` forms, and Quartz day terms such as ``L`` and ``FRI#3``), one distinct job id per job and one
distinct ``after`` instant per computation, so no answer can come from an
earlier one. Measured, single-threaded (one core), with the garbage collector
paused during each timed loop:

- ``tickwheel.warm_per_s``: compiled schedules already cached (the
  dispatcher's steady state);
- ``tickwheel.cold_per_s``: one pass starting from an empty cache (a server
  that just started: each distinct expression/zone, and each ``H`` job,
  compiles on first use);
- ``tickwheel.compile_each_per_s``: the cache cleared before every call;
- ``croniter.fresh_per_s``: a new ``croniter`` per computation (as a
  dispatcher without a cache would use it), and ``croniter.reused_per_s``:
  one ``croniter`` per job, moved with ``set_current``;
- ``agreement_without_h``: the fraction of croniter's computations, ``H``
  jobs left out (the two hash differently), where both give the same nominal
  instant; they differ around DST transitions, where croniter fires
  fixed-time jobs twice in a repeated hour; ``dst_edge_cases`` runs the
  first 8 fires of five expressions from 3 hours before every 2027-2028
  transition of the zones in the mix and counts where croniter differs.

``--smoke`` runs a tiny workload in about a second, so CI keeps the script
working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from tickwheel_server.schedule import Engine, Schedule, pin_tzdata, tzdata_version

UTC = timezone.utc

ZONES = [
    "UTC", "Europe/London", "Europe/Berlin", "Europe/Paris", "Europe/Moscow", "America/New_York",
    "America/Chicago", "America/Denver", "America/Los_Angeles", "America/Sao_Paulo", "America/Santiago",
    "Asia/Tokyo", "Asia/Shanghai", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Dubai", "Australia/Sydney",
    "Australia/Lord_Howe", "Pacific/Auckland", "Africa/Cairo",
]

# Quartz's day terms: croniter reads only some of them, so its share of the workload leaves them out.
QUARTZ = ["0 9 L * *", "0 18 LW * *", "0 9 * * FRI#3", "30 1 * * SUNL", "0 8 1W * *", "0 9 L,15 * 1"]

# (weight, expressions, zones): each job picks a row by weight, then an expression and a zone from it.
MIX = [
    (10, ["* * * * *"], ["UTC"]),
    (10, ["*/15 * * * *", "*/5 * * * *"], ["UTC", "Europe/London", "America/New_York"]),
    (15, ["0 * * * *", "@hourly", "30 * * * *"], ZONES),
    (20, ["0 9 * * *", "30 2 * * *", "0 0 * * *", "15 18 * * *"], ZONES),
    (15, ["0 9 * * 1-5", "30 8 * * MON-FRI"], ZONES),
    (10, ["0 0 1 * *", "0 6 15 * *", "@monthly"], ZONES),
    (15, ["H * * * *", "H H * * *", "H/15 * * * *", "H(0-29) 3 * * *"], ZONES),
    (5, QUARTZ, ZONES),
]


def build_workload(jobs: int, seed: int) -> list[tuple[Schedule, datetime]]:
    """``jobs`` schedules with distinct ids, each with its own ``after`` instant."""
    rnd = random.Random(seed)
    weights = [row[0] for row in MIX]
    start = datetime(2027, 1, 1, tzinfo=UTC)
    workload = []
    for i in range(jobs):
        _, expressions, zones = rnd.choices(MIX, weights)[0]
        schedule = Schedule.cron(rnd.choice(expressions), rnd.choice(zones), job_id=f"job_{seed}_{i:07d}")
        after = start + timedelta(seconds=rnd.randrange(0, 2 * 365 * 86400), microseconds=rnd.randrange(0, 10**6))
        workload.append((schedule, after))
    return workload


def _timed(loop) -> float:
    gc.collect()
    gc.disable()
    try:
        began = time.perf_counter()
        loop()
        return time.perf_counter() - began
    finally:
        gc.enable()


def bench_tickwheel(workload: list[tuple[Schedule, datetime]]) -> tuple[dict, list[datetime]]:
    engine = Engine()
    results: list[datetime] = []
    n = len(workload)

    def run_once() -> None:
        next_fire = engine.next_fire
        for schedule, after in workload:
            next_fire(schedule, after)

    def run_collect() -> None:
        next_fire = engine.next_fire
        results.clear()
        for schedule, after in workload:
            results.append(next_fire(schedule, after).nominal_at)

    def run_compile_each() -> None:
        next_fire, clear = engine.next_fire, engine.clear_cache
        for schedule, after in workload[: max(1, n // 10)]:
            clear()
            next_fire(schedule, after)

    for key in ZONES:  # zones load once per process, at start: not part of any pass
        engine.zones.get(key)
    engine.clear_cache()
    cold = _timed(run_once)
    warm_collect = _timed(run_collect)  # also warms
    warm = min(_timed(run_once) for _ in range(3))
    cached = engine.cache_len()
    compile_each = _timed(run_compile_each)
    figures = {
        "cold_per_s": round(n / cold),
        "warm_per_s": round(n / warm),
        "warm_first_pass_per_s": round(n / warm_collect),
        "compile_each_per_s": round(max(1, n // 10) / compile_each),
        "compiled_schedules_cached": cached,
    }
    return figures, results


def _uses_h(schedule: Schedule) -> bool:
    return "H" in schedule.expression


def bench_croniter(workload: list[tuple[Schedule, datetime]]) -> tuple[dict, list[datetime]]:
    from croniter import croniter

    zones = {key: ZoneInfo(key) for key in ZONES}
    results: list[datetime] = []
    # croniter hashes macros too when given a hash id (@hourly becomes H * * * *): pass one only for H.
    hash_ids = {s.job_id: (s.job_id if _uses_h(s) else None) for s, _ in workload}

    def fresh() -> None:
        results.clear()
        for schedule, after in workload:
            it = croniter(schedule.expression, after.astimezone(zones[schedule.zone]), hash_id=hash_ids[schedule.job_id])
            results.append(it.get_next(datetime).astimezone(UTC))

    iterators = {
        schedule.job_id: croniter(
            schedule.expression, datetime(2027, 1, 1, tzinfo=zones[schedule.zone]), hash_id=hash_ids[schedule.job_id]
        )
        for schedule, _ in workload
    }

    def reused() -> None:
        for schedule, after in workload:
            it = iterators[schedule.job_id]
            it.set_current(after.astimezone(zones[schedule.zone]), force=True)
            it.get_next(datetime)

    n = len(workload)
    return {"fresh_per_s": round(n / _timed(fresh)), "reused_per_s": round(n / _timed(reused))}, results


def dst_edge_cases() -> dict:
    """Fixed-time and wild jobs started just before every 2027-2028 transition of
    the DST zones in the mix: how often croniter's next fire differs (it fires
    fixed-time jobs twice in a repeated hour)."""
    from croniter import croniter

    from tickwheel_server.schedule.zones import default_registry

    engine = Engine()
    low, high = int(datetime(2027, 1, 1, tzinfo=UTC).timestamp()), int(datetime(2029, 1, 1, tzinfo=UTC).timestamp())
    cases = differ = 0
    examples: list[str] = []
    for key in ZONES:
        zone, zi = default_registry().get(key), ZoneInfo(key)
        for transition in [t for t in zone.table(high)[0] if low <= t < high]:
            for expression in ("30 1 * * *", "30 2 * * *", "0 0 * * *", "30 23 * * *", "*/30 * * * *"):
                after = datetime.fromtimestamp(transition, UTC) - timedelta(hours=3)
                schedule = Schedule.cron(expression, key, exact=True)
                ours = [f.nominal_at for f in _first(engine.iter_fires(schedule, after), 8)]
                it = croniter(expression, after.astimezone(zi))
                theirs = [it.get_next(datetime).astimezone(UTC) for _ in range(8)]
                cases += 1
                if ours != theirs:
                    differ += 1
                    if len(examples) < 3:
                        extra = sorted(set(theirs) - set(ours))[:1] or sorted(set(ours) - set(theirs))[:1]
                        examples.append(f"{expression} {key} near {extra[0].isoformat()}")
    return {"cases": cases, "croniter_differs": differ, "examples": examples}


def _first(iterator, count: int) -> list:
    out = []
    for item in iterator:
        out.append(item)
        if len(out) == count:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000, help="computations per timed pass (default 50 000)")
    parser.add_argument("--croniter-jobs", type=int, default=10_000, help="computations for croniter (default 10 000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI; figures are meaningless")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.croniter_jobs = 400, 200
    pin_tzdata()
    workload = build_workload(args.jobs, args.seed)
    tickwheel, ours = bench_tickwheel(workload)
    picked = [i for i, (schedule, _) in enumerate(workload) if schedule.expression not in QUARTZ][: args.croniter_jobs]
    cron_workload = [workload[i] for i in picked]
    croniter_figures, theirs = bench_croniter(cron_workload)
    # H picks different values in the two (different hashes), so compare the other jobs only.
    pairs = [(ours[i], b) for i, b in zip(picked, theirs) if not _uses_h(workload[i][0])]
    agree = sum(1 for a, b in pairs if a == b) / max(1, len(pairs))
    report = {
        "benchmark": "next_fire",
        "smoke": args.smoke,
        "computations": {"tickwheel": len(workload), "croniter": len(cron_workload)},
        "mix": [{"weight_percent": weight, "expressions": expressions, "zones": len(zones)} for weight, expressions, zones in MIX],
        "zones": len(ZONES),
        "tickwheel": tickwheel,
        "croniter": croniter_figures,
        "speedup_warm_vs_croniter_fresh": round(tickwheel["warm_per_s"] / croniter_figures["fresh_per_s"], 1),
        "speedup_cold_vs_croniter_fresh": round(tickwheel["cold_per_s"] / croniter_figures["fresh_per_s"], 1),
        "speedup_warm_vs_croniter_reused": round(tickwheel["warm_per_s"] / croniter_figures["reused_per_s"], 1),
        "agreement_without_h": round(agree, 4),
        "dst_edge_cases": dst_edge_cases(),
        "python": platform.python_version(),
        "tzdata": tzdata_version(),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
