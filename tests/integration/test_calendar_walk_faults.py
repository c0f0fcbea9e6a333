"""A calendar change whose server is SIGKILLed in the middle of its walk:
real `tickwheel server` processes on one real PostgreSQL and one real etcd
(docs/architecture.md, "A calendar change is a walk of bounded
transactions").

Server b stores the change and starts walking the jobs naming the calendar
(each with a created run the change moves), a page of jobs per transaction;
it is SIGKILLed as soon as the new definition has committed, its walk
unfinished. Server a, the reaper's leader once b's session is gone, finishes
the walk from b's last page: every run ends moved exactly to the new
calendar's instant, still scheduled, and the one ``calendar_runs_changed``
alert of the version counts every run once.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2
from tickwheel.v1 import calendar_pb2, job_pb2

from tickwheel.shared.ids import execution_id, to_us
from tests.conformance.test_calendar_claims import SATURDAY, TUESDAY, uk_calendar, weekly_job
from tests.support.faults import eventually
from tests.support.jobrows import insert_jobs
from tickwheel_server.store.tables import executions

from .test_dispatch_faults import (  # noqa: F401 (engine is a fixture)
    engine, scheduler, start_server, tenant_and_credential,
)

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

JOBS = 20_000
"""Twenty pages of jobs: seconds of walking, so the kill lands in the middle of it."""


def seed(store: sa.Engine, count: int) -> list[str]:
    """``count`` weekly Saturday jobs of ``acme`` naming ``uk`` (rule ``next``),
    each with its created run moved to Tuesday; their run ids."""
    spec = weekly_job(job_pb2.CALENDAR_RULE_NEXT).SerializeToString()
    at = to_us(SATURDAY - timedelta(days=2))
    ids = [f"job_walk{i:08d}" for i in range(count)]
    with store.begin() as conn:
        for start in range(0, count, 5000):
            part = ids[start:start + 5000]
            insert_jobs(conn, [dict(
                id=ident, tenant="acme", partition=0, name="weekly", state="active", spec=spec,
                time_zone="Europe/London", next_run_at=to_us(SATURDAY + timedelta(days=7)), next_due_at=None,
                run_count=1, tzdata_version="x", pause_reason="", paused_at=None, version=1, created_at=at,
                updated_at=at, calendar="uk") for ident in part])  # fmt: skip
            conn.execute(executions.insert(), [dict(
                id=execution_id(ident, SATURDAY), job_id=ident, tenant="acme", partition=0, origin="scheduled",
                nominal_at=to_us(SATURDAY), due_at=to_us(TUESDAY), ready_at=to_us(TUESDAY), attempt=1, delivery=0,
                status="scheduled", handler="echo", missed_count=1, reap_count=0, payload=b"", error="",
                dead_reason="", created_at=at) for ident in part])  # fmt: skip
    return [execution_id(ident, SATURDAY) for ident in ids]


def test_a_walk_whose_server_is_killed_is_finished_by_the_duty_each_run_once(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str, engine: sa.Engine
) -> None:
    ids = {name: f"walk-{name}-{os.getpid()}" for name in "ab"}
    with ExitStack() as stack:
        a = start_server(stack, tmp_path, postgres_url, etcd_endpoint, ids["a"])
        b = start_server(stack, tmp_path, postgres_url, etcd_endpoint, ids["b"])
        api_key, _ = tenant_and_credential(a)
        meta = (("authorization", f"Bearer {api_key}"),)
        calendar = uk_calendar()
        calendar.name = "uk"
        with scheduler(b.address) as stub:
            stub.CreateCalendar(calendar_pb2.CreateCalendarRequest(calendar=calendar, request_id="cal-1"),
                                metadata=meta, timeout=10)  # fmt: skip
        runs = seed(engine, JOBS)
        wednesday = to_us(TUESDAY + timedelta(days=1))
        change = calendar_pb2.UpdateCalendarRequest(
            calendar=calendar_pb2.Calendar(name="uk", version=1, holidays=["2027-03-26", "2027-03-29", "2027-03-30"]),
            update_mask=field_mask_pb2.FieldMask(paths=["holidays"]),
        )
        answered: list[object] = []

        def update() -> None:
            with scheduler(b.address) as stub:
                try:
                    answered.append(stub.UpdateCalendar(change, metadata=meta, timeout=120))
                except grpc.RpcError as error:
                    answered.append(error)

        caller = threading.Thread(target=update, daemon=True)
        caller.start()

        def version() -> int:
            with engine.connect() as conn:
                return conn.execute(sa.text("SELECT version FROM calendars WHERE name = 'uk'")).scalar_one()

        eventually(lambda: version() == 2, 60, "the change commits")
        os.kill(b.process.pid, signal.SIGKILL)
        b.process.wait(10)
        caller.join(30)
        assert answered and isinstance(answered[0], grpc.RpcError), "b died before answering"
        with engine.connect() as conn:
            walk = conn.execute(sa.text("SELECT version, after_job, changed_count FROM calendar_walks")).one()
        assert walk.version == 2 and walk.changed_count < JOBS, "killed in the middle of its walk"

        def walked() -> bool:
            with engine.connect() as conn:
                return conn.execute(sa.text("SELECT count(*) FROM calendar_walks")).scalar_one() == 0

        eventually(walked, 120, "server a's reaper duty finishes the walk")
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT status, due_at, ready_at, delivery, count(*) AS n FROM executions WHERE tenant = 'acme' "
                "GROUP BY status, due_at, ready_at, delivery"
            )).all()  # fmt: skip
            alerts = conn.execute(sa.text(
                "SELECT dedup_key, details FROM alerts WHERE kind = 'calendar_runs_changed'"
            )).all()  # fmt: skip
        assert [tuple(row) for row in rows] == [("scheduled", wednesday, wednesday, 0, len(runs))]
        assert [(key, json.loads(details)["changed"]) for key, details in alerts] == [
            ("calendar_runs_changed:acme/uk@2", str(JOBS))
        ], "one alert, every run counted once"
