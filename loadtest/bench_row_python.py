"""Benchmark: the server's Python a row on the claim's and the results'
paths, without a database: CPU microseconds a call (``time.thread_time``,
the best of ``--repeat`` rounds) of the per-row work the py-spy profile of
``bench_e2e.py`` finds costliest (loadtest/RESULTS.md), on rows shaped as
that benchmark's (a one-off for the ``echo`` handler, normalised by the
API, due at one instant).

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_row_python.py [--rows 500] [--repeat 7] [--smoke]

Prints one JSON object, ``us_per_row`` by part:

- ``definition_parse``: ``JobDefinition.parse`` of a one-off's stored
  definition, in full.
- ``claim_definition``: a one-off's definition as the claim reads it on
  a miss (every one-off misses the definition cache at its claim):
  ``DefinitionCache.parse``, through the cache's shapes where the tree
  has them (the shape learned once, as in a run).
- ``claim_definition_own_payloads``: the same, each job with a payload
  of its own (its definition's bytes after the schedule differ from
  every other's: where the tree reads a job through those bytes, every
  one misses), ``--rows`` × ``--batches`` jobs through one cache.
- ``definition_to_assignment``: a one-off's definition read as the claim
  reads it, then its ``add_assignment`` into a deal of ``--rows``: its
  life on the direct hand-out path, the target serialized as each tree
  does it (once per definition, or once per shape).
- ``one_off_following``: the claim's plan asking a claimed one-off's
  next fire after its instant (``next_fire``: none).
- ``assignment``: one hand-out's assignment in a deal's batch of
  ``--rows`` to one worker, as the tree's deal builds it
  (``PrebuiltBatches.build`` and one parse a batch where the tree has it;
  otherwise ``add_assignment`` in place, the deal's memo of encoded
  instants shared where the tree has one).
- ``plain_success``: recording a plain success in ``record_results``
  without its statements: from the locked row and the result to the
  success statement's parameters, per result of a batch of ``--rows``
  (``PlainSuccesses`` where the tree has it; otherwise the update dict,
  the attempt row, the check that it is plain and the arrays read back
  from them, as that tree's ``record_results`` does).
- ``result_ack``: one accepted result's ack in its worker's reply of
  ``--rows``, as the tree's intake builds it (``AckBatches``: bytes, one
  parse a reply, where the tree has it; otherwise added in place).
- ``direct_handout``: the claim's own hand-out of a batch of ``--rows``
  one-offs of one tenant to one group of workers, after its plan: the
  credit shared out (``share_out``), the chosen rows moved out of the
  claim's writes, stamped, and kept again once the INSERT said every one
  was inserted (``DirectHandOut.stamp`` then ``keep``, as
  ``claim_writes.write`` calls them).
- ``claim_parameters``: the claim's two writes of a batch of ``--rows``
  one-offs (the executions' INSERT handed out, the cursors' UPDATE), their
  parameters converted and dumped as psycopg's ``execute`` does before
  sending (``PostgresQuery.convert``, which dumps them, without a
  connection): psycopg's list dumper element by element, or the tree's
  columns packed whole (``store/binary_arrays.py``) where it has them.

Run it with another tree's ``PYTHONPATH`` to compare trees: each part
times what that tree does. ``--smoke`` runs tiny sizes so CI keeps the
script working; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from typing import Callable

from tickwheel.v1 import job_pb2, worker_pb2

from tickwheel.shared.ids import to_us
from tickwheel_server.api.validate import normalise_job
from tickwheel_server.gateway import assignments
from tickwheel_server.jobspec import DefinitionCache, JobDefinition
from tickwheel_server.schedule.engine import next_fire
from tickwheel_server.store import outcomes
from tickwheel_server.store.claim_handout import Candidate, DirectHandOut, HandOutOffer, share_out
from tickwheel_server.store.claim_writes import _ROW_COLUMNS, ClaimWrites
from tickwheel_server.store.executions import Capability, HandedOut, ResultAck, ResultIn, attempt_row
from tickwheel_server.store.fairshare import FairShare

TENANT = "bench"


def one_off_spec(due: datetime, index: int, payload: bytes = b"{}") -> bytes:
    """A one-off's stored definition, as ``_harness.insert_once_jobs`` stores it."""
    job = job_pb2.Job(name=f"e2e-{index:06d}", payload=payload,
                      target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
    job.schedule.once_at.FromDatetime(due)
    return normalise_job(job, due).SerializeToString()


def best(rounds: int, rows: int, run: Callable[[], None]) -> float:
    """CPU µs a row: the best of ``rounds`` calls of ``run`` (which handles ``rows``)."""
    times = []
    for _ in range(rounds):
        began = time.thread_time()
        run()
        times.append((time.thread_time() - began) / rows * 1e6)
    return round(min(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500, help="rows a batch (a deal, a batch of results)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds of each part; the best is kept")
    parser.add_argument("--batches", type=int, default=20, help="batches a round")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.repeat, args.batches = 5, 1, 1
    rows, batches = args.rows, args.batches
    due = datetime(2026, 12, 7, 0, 0, tzinfo=timezone.utc)
    due_us = to_us(due)
    job_ids = [f"01KC{index:022d}" for index in range(rows)]
    specs = [one_off_spec(due, index) for index in range(rows)]

    def parse() -> None:
        for _ in range(batches):
            for job_id, spec in zip(job_ids, specs):
                JobDefinition.parse(job_id, 1, spec)

    cache = DefinitionCache()

    def claim_parse() -> None:
        for _ in range(batches):
            for job_id, spec in zip(job_ids, specs):
                cache.parse(job_id, 1, spec)

    own_ids = [f"01KD{index:022d}" for index in range(rows * batches)]
    own_payloads = [one_off_spec(due, index, b'{"n": %d}' % index) for index in range(rows * batches)]

    def claim_parse_own_payloads() -> None:
        own_cache = DefinitionCache()  # a round's jobs new to it, as a run's one-offs are (one shape learned)
        for job_id, spec in zip(own_ids, own_payloads):
            own_cache.parse(job_id, 1, spec)

    definitions = [JobDefinition.parse(job_id, 1, spec) for job_id, spec in zip(job_ids, specs)]

    def following() -> None:
        for _ in range(batches):
            for definition in definitions:
                next_fire(definition.schedule, definition.schedule.at, runs_so_far=0)

    handed = [
        HandedOut(f"{job_id}:2026-12-07T00:00:00Z", job_id, TENANT, index % 256, "scheduled", due_us, due_us, due_us,
                  1, 1, b"{}", 0, definition, due_us + 1_000, "")
        for index, (job_id, definition) in enumerate(zip(job_ids, definitions))
    ]  # fmt: skip
    shares_stamps = "timestamp_field" in vars(assignments)
    writes_bytes = hasattr(getattr(assignments, "PrebuiltBatches", None), "build")

    def deal_items(items) -> None:
        """One deal of ``items`` to one worker, as the tree's ``RoundRunner.prepare`` deals them."""
        batch = worker_pb2.PullResponse()
        if writes_bytes:
            dealt = assignments.PrebuiltBatches(due_us + 2_000)
            for item in items:
                dealt.build("worker", item, item.trace_context)
            dealt.merge_into("worker", batch)
        elif shares_stamps:
            stamps: dict = {}
            for item in items:
                assignments.add_assignment(batch, item, due_us + 2_000, stamps)
        else:
            for item in items:
                assignments.add_assignment(batch, item, due_us + 2_000)

    def deal() -> None:
        for _ in range(batches):
            deal_items(handed)

    def parse_and_deal() -> None:
        for _ in range(batches):
            deal_items([
                HandedOut(f"{job_id}:2026-12-07T00:00:00Z", job_id, TENANT, index % 256, "scheduled", due_us,
                          due_us, due_us, 1, 1, b"{}", 0, cache.parse(job_id, 1, spec), due_us + 1_000, "")
                for index, (job_id, spec) in enumerate(zip(job_ids, specs))
            ])  # fmt: skip

    now_us = due_us + 50_000
    result_rows = [
        outcomes._ResultRow(item.id, item.job_id, TENANT, item.partition, "running", 1, 1, due_us, due_us,
                            due_us + 1_000, None, None, None, None, "echo", None, None)
        for item in handed
    ]  # fmt: skip
    results = [ResultIn(row.id, 1, 1, outcomes._SUCCEEDED, "", "worker-0", (TENANT,), None, due_us + 3_000)
               for row in result_rows]
    columns = getattr(outcomes, "PlainSuccesses", None)

    def record_by_column() -> None:
        for _ in range(batches):
            successes, acks, ended, finished = columns(), [], [], []
            for result, row in zip(results, result_rows):
                ended.append(row)
                successes.add(row, result.worker_id, result.worker_started_at_us, result.output, now_us)
                finished.append(row.job_id)
                acks.append(ResultAck(result.execution_id, result.delivery, True))
            successes.parameters(now_us)

    def record_by_dicts() -> None:  # the tree before PlainSuccesses: record_results' own steps
        for _ in range(batches):
            updates, plain, acks, ended, finished = [], [], [], [], []
            for result, row in zip(results, result_rows):
                update = outcomes._succeeded(row, now_us)
                updates.append(update)
                record = attempt_row(row, "succeeded", result.worker_id, result.error, now_us,
                                     result.worker_started_at_us, result.output)
                plain.append(record if outcomes._plain_success(update, row, now_us) else None)
                ended.append(row)
                if update["b_status"] in outcomes.TERMINAL:
                    finished.append(row.job_id)
                acks.append(ResultAck(result.execution_id, result.delivery, True, retry=None))
            successes = [record for record in plain if record is not None]
            arrays = {name: [record[key] for record in successes] for name, _, _, key in outcomes._SUCCESS_ARRAYS}
            arrays["outputs"] = [None if out is None else "\\x" + out.hex() for out in arrays["outputs"]]

    try:
        from tickwheel_server.gateway.acks import AckBatches
    except ImportError:  # a tree that adds each ack to its message in place
        AckBatches = None
    accepted = [ResultAck(result.execution_id, result.delivery, True) for result in results]

    def acknowledge() -> None:
        for _ in range(batches):
            if AckBatches is not None:
                replies = AckBatches()
                for ack in accepted:
                    replies.add("worker", ack.execution_id, ack.delivery, ack.accepted, ack.reason)
                replies.messages()
            else:
                reply = worker_pb2.PullResponse()
                for ack in accepted:
                    reply.ack.acks.add(execution_id=ack.execution_id, delivery=ack.delivery, accepted=ack.accepted,
                                       reason=ack.reason)

    capability = Capability((TENANT,), ("echo",), False)

    def direct_handout() -> None:
        for _ in range(batches):
            offer = HandOutOffer("server", ((capability, rows),), FairShare(), lambda: None, lambda at_us: at_us + 1)
            direct = DirectHandOut(offer, due_us)
            writes = ClaimWrites()
            for index, (item, definition) in enumerate(zip(handed, definitions)):
                for column, value in zip(_ROW_COLUMNS, (item.id, item.job_id, TENANT, item.partition, due_us, due_us,
                                                        "echo", 0, b"{}")):
                    getattr(writes, column).append(value)
                direct._specs[item.job_id] = definition
                direct.candidates.append(Candidate(index, item.id, item.job_id, TENANT, "echo", due_us, False))
            direct.chosen = share_out(offer, direct.candidates, {TENANT: 1}, offer.fair.begin())
            taken = writes.take(sorted(c.index for group in direct.chosen for c in group))
            direct.stamp(taken, due_us)
            direct.keep(taken, set(taken.ids))

    from psycopg._queries import PostgresQuery
    from psycopg.adapt import Transformer

    def claim_parameters() -> None:
        for _ in range(batches):
            writes = ClaimWrites()
            for item in handed:
                for column, value in zip(_ROW_COLUMNS, (item.id, item.job_id, TENANT, item.partition, due_us, due_us,
                                                        "echo", 0, b"{}")):
                    getattr(writes, column).append(value)
                writes.cursor_ids.append(item.job_id)
                writes.next_run_ats.append(None)
                writes.next_due_ats.append(None)
                writes.run_counts.append(1)
                writes.states.append("completed")
            cursors = writes.array_statements(due_us)[-1]
            taken = writes.take(list(range(rows)))
            for sql, parameters in (taken.handed_out_statement(due_us, "server", due_us + 1), cursors):
                PostgresQuery(Transformer()).convert(sql, parameters)

    per_call = rows * batches
    figures = {
        "definition_parse": best(args.repeat, per_call, parse),
        "claim_definition": best(args.repeat, per_call, claim_parse),
        "claim_definition_own_payloads": best(args.repeat, per_call, claim_parse_own_payloads),
        "definition_to_assignment": best(args.repeat, per_call, parse_and_deal),
        "one_off_following": best(args.repeat, per_call, following),
        "assignment": best(args.repeat, per_call, deal),
        "plain_success": best(args.repeat, per_call, record_by_column if columns is not None else record_by_dicts),
        "result_ack": best(args.repeat, per_call, acknowledge),
        "direct_handout": best(args.repeat, per_call, direct_handout),
        "claim_parameters": best(args.repeat, per_call, claim_parameters),
    }
    print(json.dumps({
        "benchmark": "row_python",
        "smoke": args.smoke,
        "rows": rows,
        "us_per_row": figures,
        "tree": {"shares_stamps": shares_stamps, "assignments_as_bytes": writes_bytes,
                 "acks_as_bytes": AckBatches is not None, "definition_shapes": hasattr(cache, "_shapes"),
                 "plain_successes_by_column": columns is not None,
                 "claim_columns_packed": "tickwheel_server.store.binary_arrays" in sys.modules,
                 "server": os.path.dirname(os.path.dirname(outcomes.__file__))},
        "loadavg": open("/proc/loadavg").read().split()[:3],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }, indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
