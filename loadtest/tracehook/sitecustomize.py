"""Times a ``tickwheel server``'s store transactions and statements from
inside the process, for finding what the pipeline waits on (issue 17).

Loaded by Python at start when this folder is first on ``PYTHONPATH``; it
does nothing unless ``TICKWHEEL_TRACE=PREFIX`` is set and the process is a
``tickwheel server``. Then it records, in memory, each transaction attempt
(its function's name, the store thread, start and end), each statement's
``execute`` and each ``COMMIT`` as the client sees them (sending, PostgreSQL's
work, the reply, and the wait for the interpreter's lock and a CPU after
it; a statement queued in psycopg's pipeline mode is recorded as queued,
the round trip as the pipeline's ``PIPELINE …`` at its Sync), the event
loop's lag (a 2 ms sleep's overshoot) and each pass of the garbage
collector (``gc``, its generation and what it freed), and writes them to
``PREFIX.<pid>`` (tab-separated) when the server exits. At most
``MAX_EVENTS`` are kept. ``loadtest/tracehook/analyse.py`` reads the file
beside ``bench_e2e.py``'s JSON (``pg_stat_statements``' times of the same
statements). For experiments only: the benchmarks never load it.

    PYTHONPATH=loadtest/tracehook:$PYTHONPATH TICKWHEEL_TRACE=/tmp/trace \\
        .venv/bin/python loadtest/bench_e2e.py --jobs 30000 --no-peer --timeline > e2e.json
    .venv/bin/python loadtest/tracehook/analyse.py /tmp/trace.<pid> e2e.json
"""

from __future__ import annotations

import os
import sys

MAX_EVENTS = 2_000_000


def _install(prefix: str) -> None:
    import asyncio
    import atexit
    import collections
    import threading
    import time

    import psycopg

    from tickwheel_server.store import transactions

    events: list[tuple[str, str, str, float, float]] = []
    clock = time.monotonic

    def record(kind: str, what: str, start: float) -> None:
        if len(events) < MAX_EVENTS:
            events.append((kind, threading.current_thread().name, what, start, clock()))

    def dump() -> None:
        with open(f"{prefix}.{os.getpid()}", "w") as out:
            out.writelines("\t".join(map(str, event)) + "\n" for event in events)

    atexit.register(dump)

    attempt_run = transactions._Attempt.run

    def run(self):  # noqa: ANN001, ANN202
        start = clock()
        try:
            return attempt_run(self)
        finally:
            record("tx", getattr(self._fn, "__qualname__", "?"), start)

    transactions._Attempt.run = run

    # The window between a hand-out's COMMIT and its send (rows running
    # under this session that no worker holds yet): each round's and each
    # claim's hand-out instant (unique per transaction) when its
    # transaction returned, committed, and when a send queued its batch
    # on a worker's stream ("committed"/"sent": what is "INSTANT ROWS");
    # an armed batch's start is "started", sent at its instant by design.
    from tickwheel_server.gateway import rounds as gateway_rounds
    from tickwheel_server.store.executions import HandOutRound

    def handed_of(result):  # noqa: ANN001, ANN202
        if isinstance(result, HandOutRound):
            return list(result)
        first = result[0] if isinstance(result, tuple) and result else None
        groups = getattr(first, "handed_out", None) or []
        return [item for group in groups for item in group]

    from tickwheel_server.store.arming import StartRound

    def run_noting_handouts(self):  # noqa: ANN001, ANN202
        result = run(self)
        if isinstance(result, StartRound) and result.started:  # an armed batch's start ("started"): its instant
            record("started", f"{getattr(self._fn, '__qualname__', '?')} {result.at_us} {len(result.started)}",
                   clock())
            return result
        handed = handed_of(result)
        if handed:
            instants = collections.Counter(item.handed_out_at_us for item in handed)
            end = clock()
            for at_us, rows in instants.items():
                record("committed", f"{getattr(self._fn, '__qualname__', '?')} {at_us} {rows}", end)
        return result

    transactions._Attempt.run = run_noting_handouts
    send = gateway_rounds.Rounds.send

    async def timed_send(self, prepared):  # noqa: ANN001, ANN202
        start = clock()
        try:
            return await send(self, prepared)
        finally:
            instants = collections.Counter(item.handed_out_at_us for batch in prepared.batches.values()
                                           for item in batch.items)
            for at_us, rows in instants.items():
                record("sent", f"{at_us} {rows}", start)

    gateway_rounds.Rounds.send = timed_send

    execute = psycopg.Cursor.execute
    queued = threading.local()

    def timed_execute(self, query, params=None, **kwargs):  # noqa: ANN001, ANN202
        start = clock()
        pipelined = self.connection._pipeline is not None
        try:
            return execute(self, query, params, **kwargs)
        finally:
            text = " ".join((query if isinstance(query, str) else str(query)).split())
            if pipelined:  # queued: its wait is the pipeline's Sync (below)
                record("queued", text[:60], start)
                queued.texts = getattr(queued, "texts", []) + [" ".join(text.split()[:3])]
            else:
                record("sql", text[:60], start)

    psycopg.Cursor.execute = timed_execute

    pipeline_exit = psycopg.Pipeline.__exit__

    def timed_pipeline_exit(self, *exc):  # noqa: ANN001, ANN202
        start = clock()
        try:
            return pipeline_exit(self, *exc)
        finally:
            texts, queued.texts = getattr(queued, "texts", []), []
            record("sql", ("PIPELINE " + " + ".join(texts))[:60], start)

    psycopg.Pipeline.__exit__ = timed_pipeline_exit

    commit = psycopg.Connection.commit

    def timed_commit(self):  # noqa: ANN001, ANN202
        if self.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return commit(self)  # nothing to send: committed already (in a pipeline)
        start = clock()
        try:
            return commit(self)
        finally:
            record("sql", "COMMIT", start)

    psycopg.Connection.commit = timed_commit

    import gc

    collecting: dict[int, float] = {}

    def collection(phase: str, info: dict) -> None:
        # Each of the collector's passes, by generation ("gc" events): a
        # pause of the whole interpreter, which the loop's lag shows too.
        if phase == "start":
            collecting[info["generation"]] = clock()
        elif (start := collecting.pop(info["generation"], None)) is not None:
            record("gc", f"gen{info['generation']} {info['collected']}", start)

    gc.callbacks.append(collection)

    async def lag() -> None:
        while True:
            start = clock()
            await asyncio.sleep(0.002)
            record("lag", "", start)

    run_forever = asyncio.BaseEventLoop.run_forever

    def traced_run_forever(self):  # noqa: ANN001, ANN202
        self.call_soon(lambda: self.create_task(lag()))
        return run_forever(self)

    asyncio.BaseEventLoop.run_forever = traced_run_forever


if os.environ.get("TICKWHEEL_TRACE") and "server" in sys.argv[1:2]:
    _install(os.environ["TICKWHEEL_TRACE"])
