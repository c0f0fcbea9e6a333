"""A hostile worker's error text against the real server, on the embedded
stores and on PostgreSQL + etcd: a raw Pull stream ends its run with an
error of escape sequences, CR LF, a bidi override and a C1 byte. Every
reader then holds it escaped, not as control characters: the execution and
its attempt (ListExecutions), the job's last run (GetJob), the dead letter,
the dead letter's alert, and the CLI's printout."""

from __future__ import annotations

import asyncio

import grpc
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

from tests.integration.test_deadletters_api import cli
from tests.integration.test_hostile_worker import bearer, create_once, read, the_execution

HOSTILE = "\x1b]0;owned\x07\x1b[2J\r\n2026-12-07 INFO forged line \u202edenwo\x9b[31m"
"""Sets a terminal's title, clears it, forges a log line, reverses text, colours it (C1 CSI)."""
ESCAPED = r"\x1b]0;owned\x07\x1b[2J\r\n2026-12-07 INFO forged line \u202edenwo\x9b[31m"


async def test_a_workers_error_is_stored_escaped_and_read_so_everywhere(server) -> None:
    acme = await server.create_tenant("acme")
    credential = await server.issue_worker_credential(["acme"], handlers=["hostile"])
    async with grpc.aio.insecure_channel(server.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job_id = await create_once(scheduler, acme, "victim", "hostile")
        call = worker_pb2_grpc.WorkerServiceStub(channel).Pull(metadata=bearer(credential))
        await call.write(worker_pb2.PullRequest(hello=worker_pb2.WorkerHello(
            worker_id="h-worker", handlers=["hostile"], slots=1)))  # fmt: skip
        await read(call, "welcome")
        [assignment] = (await read(call, "assignment")).assignments
        message = worker_pb2.PullRequest()
        message.result.results.append(worker_pb2.ExecutionResult(
            execution_id=assignment.execution_id, delivery=assignment.delivery, attempt=assignment.attempt,
            outcome=worker_pb2.RESULT_OUTCOME_FAILED_PERMANENT, error=HOSTILE))  # fmt: skip
        await call.write(message)
        [ack] = (await read(call, "ack")).acks
        assert ack.accepted, ack.reason
        call.cancel()

        dead = await the_execution(scheduler, acme, job_id, job_pb2.EXECUTION_STATUS_DEAD)
        assert (dead.error, [a.error for a in dead.attempts]) == (ESCAPED, [ESCAPED])
        job = (await scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(acme))).job
        assert job.last_run.error == ESCAPED
        [letter] = (await scheduler.ListDeadLetters(scheduler_pb2.ListDeadLettersRequest(job_id=job_id),
                                                    metadata=bearer(acme))).executions  # fmt: skip
        assert (letter.error, [a.error for a in letter.attempts]) == (ESCAPED, [ESCAPED])
        alerts = await admin_pb2_grpc.AdminServiceStub(channel).ListAlerts(
            admin_pb2.ListAlertsRequest(tenant="acme", kinds=[admin_pb2.ALERT_KIND_DEAD_LETTER]),
            metadata=server.admin_metadata())  # fmt: skip
        [alert] = alerts.alerts
        assert alert.details["error"] == ESCAPED and alert.summary.isprintable()

    connect = ("--address", server.address, "--api-key", acme)
    for argv in (("job", "get", job_id), ("job", "history", job_id, "--attempts"), ("dlq", "list")):
        code, out = await asyncio.to_thread(cli, *connect, *argv)
        assert code == 0, out
        assert all(line.isprintable() for line in out.splitlines()), (argv, out)
        assert argv[0] == "dlq" or r"\x1b]0;owned" in out, (argv, out)  # the dead letters show the reason
    code, out = await asyncio.to_thread(cli, *connect, "--json", "job", "get", job_id)
    assert code == 0 and out.isascii() and "\x1b" not in out, out
