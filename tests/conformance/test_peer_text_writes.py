"""Every store write of a peer's or a tenant's free text stores it escaped
(``store/peertext.py``'s :func:`escaped_text`), whoever calls the store: the
API refuses such text, but a cancel reason written raw by an earlier release
(or by one during a rolling upgrade) reaches the outcome writer as it is, and
the store does not rely on its callers. On SQLite and PostgreSQL.

Each test reads the stored column itself, not a record (whose reader would
escape a raw row anyway)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from tickwheel.v1 import worker_pb2

from tickwheel_server.store.credentials import WorkerCredentialStore
from tickwheel_server.store.history import HistoryStore
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.jobs import JobStore
from tickwheel_server.store.tables import api_keys, executions, jobs, worker_credentials
from tickwheel_server.store.tables import tenants as tenant_rows

from . import test_isolation
from .test_isolation import Server, occurrences, row_of, spec

HOSTILE = "\x1b]0;owned\x07 \u202eforged\r\nline\x9b"
ESCAPED = r"\x1b]0;owned\x07 \u202eforged\r\nline\x9b"


tenant_store = test_isolation.tenants
"""The fixture: acme and globex."""


def column(engine, table: sa.Table, key, value, name: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(table.c[name]).where(key == value)).scalar_one()


@pytest.mark.parametrize("outcome", [worker_pb2.RESULT_OUTCOME_CANCELED, worker_pb2.RESULT_OUTCOME_FAILED_RETRYABLE])
async def test_a_raw_cancel_reason_ends_its_run_escaped(migrated_engine, clock, tenant_store, outcome) -> None:
    [ident] = occurrences(migrated_engine, clock, "job_raw", 1, job=spec())
    server = Server(migrated_engine, clock, "s1")
    [running] = await server.claim()
    with migrated_engine.begin() as conn:  # as a server of an earlier release wrote it
        conn.execute(executions.update().where(executions.c.id == ident).values(
            cancel_requested_at=1, cancel_reason=f"canceled: {HOSTILE}"))  # fmt: skip
    await server.finish([running], outcome)
    row = row_of(migrated_engine, ident)
    assert (row.status, row.dead_reason) == ("canceled", f"canceled: {ESCAPED}")


async def test_a_cancel_reason_is_stored_escaped_on_a_run_not_started_and_a_running_one(
    migrated_engine, clock, tenant_store
) -> None:
    waiting, running_id = occurrences(migrated_engine, clock, "job_c", 2, job=spec(), every=0.001)
    server = Server(migrated_engine, clock, "s1")
    history = HistoryStore(migrated_engine, clock)
    [running] = await server.claim(limit=1)
    assert running.id == waiting  # the first is running, the second not started
    await history.cancel_execution("acme", running_id, HOSTILE)
    assert row_of(migrated_engine, running_id).dead_reason == f"canceled: {ESCAPED}"
    await history.cancel_execution("acme", waiting, HOSTILE)
    assert row_of(migrated_engine, waiting).cancel_reason == f"canceled: {ESCAPED}"
    [request] = await server.store.requeues.cancel_requests("s1")
    assert request.reason == f"canceled: {ESCAPED}"


async def test_pause_reasons_and_descriptions_are_stored_escaped(migrated_engine, clock, tenant_store) -> None:
    job_store = JobStore(migrated_engine, clock, partition_count=4)
    job = spec()
    job.schedule.cron.expression = "0 0 * * *"
    record, _ = await job_store.create(NewJob(
        id="job_p", tenant="acme", name="j", spec=job.SerializeToString(), time_zone="UTC", next_run_at=None,
        next_due_at=None, tzdata_version="x", payload_size=0), "r1")
    paused, _ = await job_store.pause("acme", record.id, HOSTILE)
    assert paused.pause_reason == ESCAPED
    assert column(migrated_engine, jobs, jobs.c.id, record.id, "pause_reason") == ESCAPED

    await tenant_store.pause("acme", HOSTILE)
    assert column(migrated_engine, tenant_rows, tenant_rows.c.name, "acme", "pause_reason") == ESCAPED
    await tenant_store.update("globex", state="paused", pause_reason=HOSTILE)
    assert column(migrated_engine, tenant_rows, tenant_rows.c.name, "globex", "pause_reason") == ESCAPED

    issued = await tenant_store.issue_key("acme", HOSTILE)
    assert issued.key.description == ESCAPED
    assert column(migrated_engine, api_keys, api_keys.c.id, issued.key.id, "description") == ESCAPED
    credential = (await WorkerCredentialStore(migrated_engine, clock).issue(["acme"], ["echo"], False, HOSTILE)).credential
    assert credential.description == ESCAPED
    assert column(migrated_engine, worker_credentials, worker_credentials.c.id, credential.id, "description") == ESCAPED

    # Text the API accepts is kept as it is: ZWJ, an ideographic space, a backslash.
    accepted = "on call\u200d\u3000\\n"
    assert (await tenant_store.issue_key("acme", accepted)).key.description == accepted
