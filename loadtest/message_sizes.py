"""Benchmark input: the serialized sizes of the Pull stream's real protobuf
messages per execution, for the capacity model (``docs/capacity.md``).

Builds each message the way the code on the path builds it (the gateway's
``add_assignment``, the worker's ``ExecutionResult``, its heartbeat entry,
the server's result ack) for a job like the benchmarks' (a ``job_<ULID>``
id, tenant ``bench``, handler ``echo``) and prints JSON: bytes per message
alone and per execution inside a batch, for the given payload sizes. Only
protobuf bytes: gRPC adds a 5-byte prefix per message, HTTP/2 a 9-byte frame
header per DATA frame (at most 16 KiB by default), TCP/IP and TLS their own.

    .venv/bin/python loadtest/message_sizes.py --payloads 2,1024 --batch 1000
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

from tickwheel.shared.ids import execution_id, new_job_id, set_timestamp_us, to_us
from tickwheel.v1 import job_pb2, worker_pb2
from tickwheel_server.gateway.assignments import add_assignment
from tickwheel_server.jobspec import JobDefinition
from tickwheel_server.store.executions import HandedOut

TENANT = "bench"
HANDLER = "echo"


def handed_out(now: datetime, payload: bytes) -> tuple[HandedOut, str]:
    """One hand-out of a fresh one-off job due at ``now``, as the store returns it."""
    job_id = new_job_id(now)
    job = job_pb2.Job(name="bench-0", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=HANDLER)),
                      payload=payload)
    definition = JobDefinition.parse(job_id, 1, job.SerializeToString())
    nominal_us = to_us(now)
    fields = dict.fromkeys(HandedOut._fields)
    fields.update(
        id=execution_id(job_id, now), job_id=job_id, tenant=TENANT, attempt=1, delivery=1, payload=payload,
        nominal_at_us=nominal_us, due_at_us=nominal_us, missed_count=1, origin="scheduled", definition=definition,
    )
    return HandedOut(**fields), job_id


def sizes(payload: bytes, batch: int) -> dict:
    now = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)
    handed, _ = handed_out(now, payload)
    now_us = to_us(now + timedelta(milliseconds=5))

    one = worker_pb2.PullResponse()
    add_assignment(one, handed, now_us)
    many = worker_pb2.PullResponse()
    for _ in range(batch):
        add_assignment(many, handed, now_us)

    def result() -> worker_pb2.ExecutionResult:
        r = worker_pb2.ExecutionResult(execution_id=handed.id, delivery=1, attempt=1,
                                       outcome=worker_pb2.RESULT_OUTCOME_SUCCEEDED, output=payload)
        set_timestamp_us(r.started_at, now_us + 1_234)
        set_timestamp_us(r.finished_at, now_us + 2_345)
        return r

    results_one = worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[result()]))
    results_many = worker_pb2.PullRequest(result=worker_pb2.WorkerResults(results=[result() for _ in range(batch)]))
    ack = worker_pb2.ResultAck(execution_id=handed.id, delivery=1, accepted=True)
    acks_one = worker_pb2.PullResponse(ack=worker_pb2.ResultAcks(acks=[ack]))
    acks_many = worker_pb2.PullResponse(ack=worker_pb2.ResultAcks(acks=[ack] * batch))
    entry = worker_pb2.ExecutionProgress(execution_id=handed.id, delivery=1)
    beat_many = worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat(executions=[entry] * batch))
    beat_empty = worker_pb2.PullRequest(heartbeat=worker_pb2.WorkerHeartbeat())
    server_beat = worker_pb2.PullResponse(heartbeat=worker_pb2.ServerHeartbeat())
    set_timestamp_us(server_beat.heartbeat.sent_at, now_us)
    credit = worker_pb2.PullRequest(credit=worker_pb2.WorkerCredit(credits=batch))

    def per(message, count: int) -> float:
        return round(message.ByteSize() / count, 1)

    return {
        "payload_bytes": len(payload),
        "execution_id_bytes": len(handed.id),
        "assignment": {"alone": one.ByteSize(), "per_execution_in_batch": per(many, batch)},
        "result": {"alone": results_one.ByteSize(), "per_execution_in_batch": per(results_many, batch)},
        "ack": {"alone": acks_one.ByteSize(), "per_execution_in_batch": per(acks_many, batch)},
        "heartbeat": {"empty": beat_empty.ByteSize(), "per_running_execution": per(beat_many, batch)},
        "server_heartbeat": server_beat.ByteSize(),
        "credit": credit.ByteSize(),
        "per_execution_batched": round(
            per(many, batch) + per(results_many, batch) + per(acks_many, batch) + credit.ByteSize() / batch, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payloads", default="2,1024", help="payload sizes in bytes, comma-separated (default 2,1024)")
    parser.add_argument("--batch", type=int, default=1000, help="executions per batched message (default 1000)")
    args = parser.parse_args()
    if args.batch < 1:
        parser.error("--batch must be >= 1")
    payloads = [int(p) for p in args.payloads.split(",")]
    out = {"benchmark": "message_sizes", "batch": args.batch,
           "sizes": [sizes(b"{}" if n == 2 else b"x" * n, args.batch) for n in payloads]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
