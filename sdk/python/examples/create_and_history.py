"""Create a one-off job a few seconds ahead, wait for it to run, print its history.

    python sdk/python/examples/create_and_history.py ADDRESS API_KEY [HANDLER]

Against `tickwheel dev` (its built-in worker serves `echo`):

    python sdk/python/examples/create_and_history.py \
        "$(jq -r .address .tickwheel/dev-credentials.json)" "$(jq -r .api_key .tickwheel/dev-credentials.json)"

Prints one JSON document: the job id and each execution with its attempts.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone

from tickwheel import Client, once_job
from tickwheel.v1 import job_pb2

ENDED = {job_pb2.EXECUTION_STATUS_SUCCEEDED, job_pb2.EXECUTION_STATUS_DEAD, job_pb2.EXECUTION_STATUS_CANCELED}


def main(address: str, api_key: str, handler: str = "echo") -> int:
    with Client(address, api_key=api_key) as client:
        at = datetime.now(timezone.utc) + timedelta(seconds=2)
        job = client.create_job(once_job(f"example-{uuid.uuid4().hex[:8]}", at, handler=handler, payload="{}")).job
        deadline = time.monotonic() + 30
        while True:
            executions = list(client.iter_executions(job.id))
            if executions and all(e.status in ENDED for e in executions):
                break
            if time.monotonic() > deadline:
                print(f"job {job.id} did not run within 30 s (is a worker serving {handler!r}?)", file=sys.stderr)
                return 1
            time.sleep(0.2)
        print(json.dumps({
            "job_id": job.id,
            "executions": [
                {
                    "id": e.id,
                    "status": job_pb2.ExecutionStatus.Name(e.status),
                    "attempts": [
                        {"attempt": a.attempt, "delivery": a.delivery, "worker": a.worker_id,
                         "lateness_ms": a.lateness.ToMilliseconds(), "error": a.error}
                        for a in e.attempts
                    ],
                }
                for e in executions
            ],
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
