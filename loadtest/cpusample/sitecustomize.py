"""Times each BatchCreateJobs call of a ``tickwheel server`` step by step,
from inside the process, for finding where a batched job's time goes
(issue 21).

Loaded by Python at start when this folder is first on ``PYTHONPATH``; it
does nothing unless ``TICKWHEEL_CPUSAMPLE=PREFIX`` is set and the process
is a ``tickwheel server``. Then, once the API's modules are imported, it
wraps the steps of a call and records, per call, each step's wall time
and the CPU its thread spent in it (``time.thread_time``):

- ``validate``: the servicer's ``_new_jobs`` (event loop);
- ``store``: ``JobStore.create_batch`` as the loop awaits it (the store's
  thread, PostgreSQL and the hand-offs);
- ``tx``: the transaction body in the store's thread (``create_jobs``),
  and in it each statement sent by ``store/driver.py`` (``sql``: wall
  time, the round trip and PostgreSQL's work) and the rest (its Python);
- ``answer``: ``batch_create_response`` (event loop).

With ``TICKWHEEL_CPUSAMPLE_PROFILE=validate,tx,answer`` (any of the
steps) those steps also run under cProfile (its overhead inflates small
functions: read it for shares and call counts). SIGUSR1 writes the sums and per-call means (JSON) to
``PREFIX.<pid>.<label>`` (the text of ``PREFIX.<pid>.label`` if there is
one, else the dump's number) and starts again from zero, so a benchmark
can cut one phase out of a run (``_harness.profiled`` does, for each phase
it profiles, when ``TICKWHEEL_CPUSAMPLE`` is set). For experiments only:
the benchmarks never load it.

    PYTHONPATH=loadtest/cpusample:$PYTHONPATH TICKWHEEL_CPUSAMPLE=/tmp/calls \\
        .venv/bin/python loadtest/bench_create.py …
    cat /tmp/calls.<pid>.batch
"""

from __future__ import annotations

import os
import sys


def _install(prefix: str) -> None:
    import collections
    import contextlib
    import cProfile
    import functools
    import io
    import pstats
    import json
    import signal
    import threading
    import time

    sums: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    written = [0]

    def add(step: str, wall: float, cpu: float) -> None:
        with lock:
            sums[step + ".wall_s"] += wall
            sums[step + ".cpu_s"] += cpu
            sums[step + ".n"] += 1

    profiling = os.environ.get("TICKWHEEL_CPUSAMPLE_PROFILE", "").split(",")
    profiles: dict[str, cProfile.Profile] = {}

    def profiler(step: str):
        if step not in profiling:
            return contextlib.nullcontext()
        return profiles.setdefault(step, cProfile.Profile())

    def timed_async(step: str, fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                with profiler(step):
                    return await fn(*args, **kwargs)
            finally:
                add(step, time.perf_counter() - began, time.thread_time() - cpu)
        return wrapper

    def timed(step: str, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                with profiler(step):
                    return fn(*args, **kwargs)
            finally:
                add(step, time.perf_counter() - began, time.thread_time() - cpu)
        return wrapper

    def patch() -> None:
        from tickwheel_server.api import scheduler
        from tickwheel_server.store import driver, jobcreate, jobs

        scheduler.SchedulerServicer._new_jobs = timed_async("validate", scheduler.SchedulerServicer._new_jobs)
        scheduler.batch_create_response = timed("answer", scheduler.batch_create_response)
        jobs.JobStore.create_batch = timed_async("store", jobs.JobStore.create_batch)
        jobs.create_jobs = jobcreate.create_jobs = timed("tx", jobcreate.create_jobs)
        driver._run = timed("sql", driver._run)

    def dump(_signum, _frame) -> None:
        with lock:
            snapshot = dict(sums)
            sums.clear()
        written[0] += 1
        label = str(written[0])
        try:  # a name the benchmark left for this dump (_harness.profiled)
            with open(f"{prefix}.{os.getpid()}.label") as f:
                label = f.read().strip() or label
        except OSError:
            pass
        calls = snapshot.get("answer.n") or 1
        means = {k.replace("_s", "_ms_per_call"): round(v * 1000 / calls, 3)
                 for k, v in snapshot.items() if not k.endswith(".n")}  # fmt: skip
        with open(f"{prefix}.{os.getpid()}.{label}", "w") as out:
            json.dump({"calls": snapshot.get("answer.n", 0), "sums": snapshot, "per_call": means}, out, indent=1)
            for step, profile in list(profiles.items()):
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(35)
                out.write(f"\n\n== {step} (cProfile, by own time)\n" + text.getvalue())
            profiles.clear()

    def wait_for_api() -> None:
        while "tickwheel_server.api.scheduler" not in sys.modules or "tickwheel_server.store.jobs" not in sys.modules:
            time.sleep(0.05)
        time.sleep(0.2)
        patch()

    signal.signal(signal.SIGUSR1, dump)
    threading.Thread(target=wait_for_api, name="calltimes", daemon=True).start()


def _is_server() -> bool:
    argv = sys.argv
    return bool(argv) and os.path.basename(argv[0]) == "tickwheel" and argv[1:2] == ["server"]


_prefix = os.environ.get("TICKWHEEL_CPUSAMPLE")
if _prefix and _is_server():
    _install(_prefix)
