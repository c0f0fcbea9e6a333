"""PostgreSQL refusing work without going away (issue 21's hardening): real
`tickwheel server` processes (two) and workers on the test's PostgreSQL and
etcd, one-off jobs and a cron job due during the fault and after it, while
a client keeps creating jobs. The faults:

- read-only: ``ALTER DATABASE … SET default_transaction_read_only = on``
  and the sessions cut (as a failover to a replica not yet promoted does),
  writes refused with 25006, then reset;
- out of connections: ``ALTER ROLE … CONNECTION LIMIT 0`` and the sessions
  cut, every new connection refused with 53300, then lifted;
- a table locked: ``LOCK TABLE executions, jobs, job_cursors IN ACCESS
  EXCLUSIVE MODE`` held for 20 s by another session, then released (the
  servers' own ``lock_timeout`` refuses what waits on it);
- statement timeouts: ``ALTER ROLE … SET statement_timeout = '50ms'`` (the
  sessions cut, so that they take it) while the peak runs, then reset.

And the servers' own contention, which is no fault: a claim holding a
job's cursor row past two lock timeouts delays the job's UpdateJob, which
is answered OK.

The servers run as a role of their own (not a superuser: a role's limits
and settings bind it), owner of the test's database. For each fault: every
CreateJob the client made is answered OK or UNAVAILABLE with a message
(never DEADLINE_EXCEEDED, INTERNAL or UNKNOWN); every one answered OK is
in the store after; the servers live and log the outage in a line or two
per component, not one per call or retry; their event loops hold no pile
of tasks; and after the fault
the audit (tests/support/audit.py) finds every expected occurrence in
exactly one terminal state, none handed out or started before due, and an
alert for every execution that ended dead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import field_mask_pb2
from sqlalchemy.engine import make_url
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support import audit
from tests.support.faults import (
    HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, LOOPBACK, PARTITIONS, SESSION_TTL, RecordingTarget, Tenant, count,
    create_jobs, eventually, now, settle, spaced, start_worker, tenant, wait_connected,
)
from tests.support.server import ServerProcess, start_cluster_server
from tickwheel.shared.ids import to_us
from tickwheel_server.api.status import COMMIT_UNKNOWN
from tickwheel_server.store import create_store_engine, migrate

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

TASKS_BOUND = 400
"""Tasks on a server's event loop: a few dozen loops and streams, a few per
call in flight; a pile of waiting calls or retries would pass this."""


# --------------------------------------------------------------------------- the servers' role


@dataclass
class Database:
    admin: sa.Engine
    """A superuser's engine on the test's database: unbound by the role's limits and settings."""
    name: str
    role: str
    url: str
    """The servers' URL: the role's."""

    def run(self, sql: str) -> None:
        with self.admin.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(sql)

    def cut_sessions(self) -> None:
        """End every session of the role (what a failover or a restart of a pooler does)."""
        self.run(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.role}'")


@contextmanager
def servers_role(postgres_url: str) -> Iterator[Database]:
    admin = create_store_engine(postgres_url)
    url = make_url(postgres_url)
    role = f"tw_app_{uuid.uuid4().hex[:12]}"
    database = Database(admin, url.database, role, url.set(username=role, password=None).render_as_string(False))
    database.run(f'CREATE ROLE "{role}" LOGIN')
    database.run(f'ALTER DATABASE "{database.name}" OWNER TO "{role}"')
    database.run(f'GRANT CREATE ON SCHEMA public TO "{role}"')
    try:
        migrate(engine := create_store_engine(database.url))
        engine.dispose()
        yield database
    finally:
        database.run(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
        database.run(f'ALTER ROLE "{role}" RESET ALL')
        database.run(f'ALTER DATABASE "{database.name}" RESET ALL')
        database.cut_sessions()
        database.run(f'ALTER DATABASE "{database.name}" OWNER TO CURRENT_USER')
        database.run(f'REASSIGN OWNED BY "{role}" TO CURRENT_USER')
        database.run(f'DROP OWNED BY "{role}"')
        database.run(f'DROP ROLE "{role}"')
        admin.dispose()


# --------------------------------------------------------------------------- the cluster


def start_server(stack: ExitStack, tmp_path: Path, store: str, etcd: str, server_id: str) -> ServerProcess:
    config = tmp_path / f"{server_id}.toml"
    config.write_text(f"heartbeat_interval = {HEARTBEAT_INTERVAL}\nheartbeat_timeout = {HEARTBEAT_TIMEOUT}\n")
    return start_cluster_server(
        stack, tmp_path, store, etcd, server_id, "--partition-count", str(PARTITIONS), "--config", str(config),
        "--allow-target-network", LOOPBACK, "--http-listen", "127.0.0.1:0", session_ttl=SESSION_TTL,
    )  # fmt: skip


def metric(server: ServerProcess, name: str) -> float:
    """One unlabelled gauge of the server's ``/metrics``."""
    base = re.search(r"HTTP endpoints on (\S+)", server.log()).group(1).rstrip("/")
    request = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {server.admin_token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def cron_job(address: str, owner: Tenant, url: str, name: str) -> str:
    """A cron job every minute (cron's resolution): audited when a minute falls in the window."""
    meta = (("authorization", f"Bearer {owner.api_key}"),)
    with grpc.insecure_channel(address) as channel:
        job = job_pb2.Job(name=name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
        job.schedule.cron.expression = "* * * * *"
        job.schedule.cron.time_zone = "UTC"
        return scheduler_pb2_grpc.SchedulerServiceStub(channel).CreateJob(
            scheduler_pb2.CreateJobRequest(job=job, request_id=name), metadata=meta, timeout=10
        ).job.id


@dataclass
class Client:
    """Creates a one-off job every ``every`` seconds until stopped,
    remembering what each call was answered (``answers``: code → messages)
    and the request ids answered OK."""

    address: str
    owner: Tenant
    url: str
    deadline: float = 10.0
    every: float = 0.2
    answers: dict[grpc.StatusCode, list[str]] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        meta = (("authorization", f"Bearer {self.owner.api_key}"),)
        with grpc.insecure_channel(self.address) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            index = 0
            while not self._stop.is_set():
                name = f"client-{index}"
                index += 1
                job = job_pb2.Job(name=name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=self.url)))
                job.schedule.once_at.FromDatetime(now() + timedelta(seconds=1))
                try:
                    stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id=name), metadata=meta,
                                   timeout=self.deadline)
                except grpc.RpcError as error:
                    self.answers.setdefault(error.code(), []).append(error.details() or "")
                else:
                    self.answers.setdefault(grpc.StatusCode.OK, []).append("")
                    self.created.append(name)
                self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def codes(self) -> Counter:
        return Counter({code: len(messages) for code, messages in self.answers.items()})


@dataclass
class Fault:
    name: str
    begin: Callable[[Database], None]
    end: Callable[[Database], None]
    lasts: float
    refused: str | None
    """What an UNAVAILABLE's message says while the fault lasts (None: no call need be refused)."""


def read_only_begin(db: Database) -> None:
    db.run(f'ALTER DATABASE "{db.name}" SET default_transaction_read_only = on')
    db.cut_sessions()


def read_only_end(db: Database) -> None:
    db.run(f'ALTER DATABASE "{db.name}" RESET default_transaction_read_only')  # sessions are not cut: see the store


def no_connections_begin(db: Database) -> None:
    db.run(f'ALTER ROLE "{db.role}" CONNECTION LIMIT 0')
    db.cut_sessions()


def no_connections_end(db: Database) -> None:
    db.run(f'ALTER ROLE "{db.role}" CONNECTION LIMIT -1')


def timeout_begin(timeout: str) -> Callable[[Database], None]:
    def begin(db: Database) -> None:
        db.run(f"ALTER ROLE \"{db.role}\" SET statement_timeout = '{timeout}'")
        db.cut_sessions()

    return begin


def timeout_end(db: Database) -> None:
    db.run(f'ALTER ROLE "{db.role}" RESET statement_timeout')
    db.cut_sessions()


class Locker:
    """A session holding ACCESS EXCLUSIVE locks on the hot tables until released."""

    def __init__(self) -> None:
        self.locked, self.release = threading.Event(), threading.Event()

    def begin(self, db: Database) -> None:
        # One Locker serves its fault's every run (the parameters are built once per module): a run
        # repeated in one session (--keep-duplicates, a rerun) found release already set and held nothing.
        self.locked.clear()
        self.release.clear()

        def hold() -> None:
            with db.admin.connect() as conn, conn.begin():
                conn.exec_driver_sql("LOCK TABLE executions, jobs, job_cursors IN ACCESS EXCLUSIVE MODE")
                self.locked.set()
                self.release.wait(60)

        self.thread = threading.Thread(target=hold, daemon=True)
        self.thread.start()
        assert self.locked.wait(20), "the operator's session did not get its locks"

    def end(self, db: Database) -> None:
        self.release.set()
        self.thread.join(20)


def faults() -> list[Fault]:
    locker = Locker()
    return [
        Fault("read-only", read_only_begin, read_only_end, 6, "refusing writes (read-only)"),
        Fault("no-connections", no_connections_begin, no_connections_end, 6, "the store is unavailable"),
        # The servers' own lock_timeout (1 s, tried twice) refuses what waits on the lock.
        Fault("table-locked", locker.begin, locker.end, 20, "refusing locks (lock timeout)"),
        # Bites as the peak and the machine's load have it (none of the store's statements is slow alone):
        # tests/conformance/test_store_refusals.py cancels statements for certain.
        Fault("statement-timeout", timeout_begin("50ms"), timeout_end, 6, None),
    ]


def lateness_after(snapshot: audit.Snapshot, ended_us: int) -> dict:
    """How late the runs due before the fault's end (``ended_us``) and not
    handed out before it were handed out after it: seconds from the later of
    their due instant and the end to their first hand-out (printed with
    ``-s``; loadtest/RESULTS.md)."""
    first: dict[str, int] = {}
    for row in snapshot.attempts:
        first[row.execution_id] = min(first.get(row.execution_id, row.started_at), row.started_at)
    late = [
        (first[row.id] - max(row.due_at, ended_us)) / 1e6 for row in snapshot.executions
        if row.id in first and row.due_at < ended_us <= first[row.id]
    ]  # fmt: skip
    return {"runs_due_in_fault": len(late), "most_late_after_end_s": round(max(late, default=0.0), 3)}


@pytest.mark.parametrize("fault", faults(), ids=lambda f: f.name)
def test_postgres_refusing_work_loses_hastens_and_doubles_nothing(
    fault: Fault, tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    target = RecordingTarget(hold=0.3)
    with servers_role(postgres_url) as db, ExitStack() as stack:
        stack.callback(target.close)
        one = start_server(stack, tmp_path, db.url, etcd_endpoint, f"pgf-a-{os.getpid()}")
        two = start_server(stack, tmp_path, db.url, etcd_endpoint, f"pgf-b-{os.getpid()}")
        acme, globex = tenant(one, "acme"), tenant(one, "globex")
        start_worker(stack, tmp_path, one.address, acme.credential, "acme-w")
        start_worker(stack, tmp_path, two.address, globex.credential, "globex-w")
        wait_connected(one, "acme-w")
        wait_connected(two, "globex-w")
        first = now() + timedelta(seconds=1)
        span = fault.lasts + 3
        step = max(0.25, span / 36)  # at most 36 a tenant: under its API rate quota
        steps = int(span / step)
        create_jobs(one.address, acme, target.url("/ok"), spaced(first, steps, step), "acme")
        create_jobs(two.address, globex, target.url("/hold"), spaced(first + timedelta(seconds=0.1), steps, step),
                    "globex")
        create_jobs(one.address, acme, target.url("/fail"), spaced(first + timedelta(seconds=1.5), 3, 1.0), "dead",
                    retries=2)
        cron_job(two.address, globex, target.url("/ok"), "every-minute")
        client = Client(one.address, acme, target.url("/ok"))
        stack.callback(client.stop)
        eventually(lambda: count(db.admin, "SELECT count(*) FROM executions WHERE status = 'succeeded'") >= 2, 15,
                   "the run is under way")

        fault.begin(db)
        began = time.monotonic()
        most_tasks = 0
        while time.monotonic() < began + fault.lasts:
            for server in (one, two):
                most_tasks = max(most_tasks, metric(server, "tickwheel_asyncio_tasks"))
            time.sleep(0.5)  # sampling other processes' gauges while the fault lasts
        during = client.codes()
        fault.end(db)
        ended = now()
        time.sleep(1)  # calls after the fault, on the other side of it
        client.stop()  # each job it made is due within a second of its call

        until = max(first + timedelta(seconds=span), now() + timedelta(seconds=1.5))
        # 35 s from the latest due instant: the cron run of a minute inside the window is due up to its
        # jitter (a minute) after it; waiting from now took it for a run late after the fault.
        left = settle(db.admin, ["acme", "globex"], until, timeout=35)
        for server in (one, two):
            assert server.process.poll() is None, f"a server exited in the fault:\n{server.log()}"
        snapshot = audit.load(db.admin, ["acme", "globex"])
        # The cron job's next occurrence, made ahead and not yet due, lies past the window: not audited.
        ahead = [row for row in snapshot.executions if row.nominal_at >= to_us(until) and row.status == "scheduled"]
        snapshot = dataclasses.replace(snapshot, executions=[row for row in snapshot.executions if row not in ahead])
        expected = audit.expected_occurrences(snapshot.jobs, until)
        found = audit.problems(expected, snapshot, deliveries=target.deliveries)
        assert not found, f"{len(expected)} occurrences, {len(found)} problem(s):\n" + "\n".join(found[:24])
        assert not left
        print(json.dumps({"fault": fault.name, **lateness_after(snapshot, to_us(ended))}))  # a figure, not a bound

        # The API: OK or UNAVAILABLE with a message, never DEADLINE_EXCEEDED, INTERNAL or UNKNOWN; nothing
        # answered OK is missing.
        codes = client.codes()
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, (fault.name, codes, client.answers)
        if fault.refused is not None:
            assert during[grpc.StatusCode.UNAVAILABLE] >= 1, (fault.name, during)
            messages = client.answers[grpc.StatusCode.UNAVAILABLE]
            assert any(fault.refused in m for m in messages), messages
            # A session cut during a COMMIT leaves its outcome unknown, which the API says as such (Data,
            # "an ambiguous commit"); whichever it was, the audit above checked the job, if made.
            assert all(m.startswith(("the store is unavailable", COMMIT_UNKNOWN)) for m in messages), messages
        names = {job_pb2.Job.FromString(job.spec).name for job in snapshot.jobs}
        assert not [name for name in client.created if name not in names], "a CreateJob answered OK was lost"
        assert codes[grpc.StatusCode.OK] >= 1

        # Bounded: no pile of tasks on either server's loop in the fault, nothing left running after it.
        assert most_tasks < TASKS_BOUND, most_tasks
        for server in (one, two):
            eventually(lambda: metric(server, "tickwheel_store_attempts_running") <= 2, 15,
                       "the store attempts drain after the fault")

        # Dead executions each raised their alert.
        dead = {row.id for row in snapshot.executions if row.status == "dead"}
        with db.admin.connect() as conn:
            alerted = {r[0] for r in conn.exec_driver_sql("SELECT execution_id FROM alerts WHERE kind = 'dead_letter'")}
        assert dead and dead <= alerted, (dead, alerted)

        # The log: the outage in a line or two per component, not a line per call or retry, and no traceback.
        for server in (one, two):
            text = server.log()
            assert "Traceback" not in text, text
            create_lines = [line for line in text.splitlines() if "CreateJob" in line and "unavailable" in line]
            assert len(create_lines) <= 3, create_lines


def create_once(address: str, owner: Tenant, url: str, name: str, deadline: float) -> job_pb2.Job:
    """One CreateJob of a one-off job due a second from now, ``name`` its request id."""
    meta = (("authorization", f"Bearer {owner.api_key}"),)
    with grpc.insecure_channel(address) as channel:
        job = job_pb2.Job(name=name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
        job.schedule.once_at.FromDatetime(now() + timedelta(seconds=1))
        return scheduler_pb2_grpc.SchedulerServiceStub(channel).CreateJob(
            scheduler_pb2.CreateJobRequest(job=job, request_id=name), metadata=meta, timeout=deadline
        ).job


def test_a_table_locked_is_refused_unavailable_by_the_servers_own_lock_timeout(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    """No lock_timeout for the role or in the URL: the server's own (1 s by
    default, tried twice) answers a call made while an operator holds the
    hot tables UNAVAILABLE "refusing locks (lock timeout)", long before the
    client's deadline and while the lock still holds (it is released only
    after the answer); nothing of the call is written, the same request
    made after the lock is stored once, and the audit is clean."""
    target = RecordingTarget(hold=0.1)
    locker = Locker()
    with servers_role(postgres_url) as db, ExitStack() as stack:
        stack.callback(target.close)
        one = start_server(stack, tmp_path, db.url, etcd_endpoint, f"pgl-{os.getpid()}")
        acme = tenant(one, "acme")
        start_worker(stack, tmp_path, one.address, acme.credential, "acme-w")
        wait_connected(one, "acme-w")
        first = now() + timedelta(seconds=2)
        create_jobs(one.address, acme, target.url("/ok"), spaced(first, 8, 0.5), "acme")

        locker.begin(db)
        stack.callback(locker.end, db)  # released however the test ends
        called = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            create_once(one.address, acme, target.url("/ok"), "locked", deadline=60)
        answered = time.monotonic() - called
        assert locker.thread.is_alive(), "the lock went before the call was answered"
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE, (refused.value.code(), refused.value.details())
        assert refused.value.details() == (
            "the store is unavailable (refusing locks (lock timeout)); nothing was written; retry later"
        ), refused.value.details()
        locker.end(db)
        print(json.dumps({"table_locked_call_answered_s": round(answered, 3)}))  # a figure, not a bound

        again = create_once(one.address, acme, target.url("/ok"), "locked", deadline=30)
        assert create_once(one.address, acme, target.url("/ok"), "locked", deadline=30).id == again.id
        until = max(first + timedelta(seconds=4), now() + timedelta(seconds=1.5))
        left = settle(db.admin, ["acme"], until, timeout=60)
        snapshot = audit.load(db.admin, ["acme"])
        names = Counter(job_pb2.Job.FromString(job.spec).name for job in snapshot.jobs)
        assert names["locked"] == 1, names  # the refused call wrote nothing; its retry once
        expected = audit.expected_occurrences(snapshot.jobs, until)
        found = audit.problems(expected, snapshot, deliveries=target.deliveries)
        assert not found, f"{len(expected)} occurrences, {len(found)} problem(s):\n" + "\n".join(found[:24])
        assert not left
        assert one.process.poll() is None, one.log()
        text = one.log()
        assert "Traceback" not in text, text
        assert "refusing locks (lock timeout)" in text  # the loops logged the outage as one


SLOW_CLAIM_KEY = 7_420_001
"""The advisory lock a test's session holds while the claim it slows waits on it."""


@contextmanager
def claims_held(db: Database) -> Iterator[Callable[[], None]]:
    """The dispatcher's claims held open: a trigger on ``executions`` makes
    each claim's insert wait (its own ``lock_timeout`` 0, so the claim is
    never refused for it) on an advisory lock this session holds, while the
    claim holds its cursors' row locks (``FOR UPDATE OF c SKIP LOCKED``) as
    a claim of 1 000 jobs on a loaded database holds them. The callable
    yielded lets the claims go; the trigger goes at the end."""
    holder = db.admin.connect()
    holder.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
        f"SELECT pg_advisory_lock({SLOW_CLAIM_KEY})")
    db.run(
        "CREATE FUNCTION tw_test_slow_claim() RETURNS trigger LANGUAGE plpgsql SET lock_timeout = 0 AS $$ "
        f"BEGIN PERFORM pg_advisory_xact_lock_shared({SLOW_CLAIM_KEY}); RETURN NEW; END $$"
    )
    db.run("CREATE TRIGGER tw_test_slow_claim BEFORE INSERT ON executions FOR EACH ROW "
           "EXECUTE FUNCTION tw_test_slow_claim()")

    def release() -> None:
        if not holder.closed:
            holder.exec_driver_sql(f"SELECT pg_advisory_unlock({SLOW_CLAIM_KEY})")
            holder.close()

    try:
        yield release
    finally:
        release()
        db.run("DROP TRIGGER IF EXISTS tw_test_slow_claim ON executions")
        db.run("DROP FUNCTION IF EXISTS tw_test_slow_claim()")


def row_lock_waits(db: Database) -> set[str]:
    """The transactions of the servers' role waiting on another's row lock
    (a transaction id): one per attempt of a call that waits."""
    with db.admin.connect() as conn:
        return {str(row[0]) for row in conn.execute(sa.text(
            "SELECT xact_start FROM pg_stat_activity WHERE usename = :role AND wait_event_type = 'Lock' "
            "AND wait_event IN ('transactionid', 'tuple')"
        ), {"role": db.role})}


def test_an_update_racing_a_claim_held_past_two_lock_timeouts_is_answered_ok(
    tmp_path: Path, postgres_url: str, etcd_endpoint: str
) -> None:
    """The server's own contention is no outage: the dispatcher's claim of a
    job holds its cursor's row (the claim's insert kept waiting by a test
    trigger) while the job's owner updates it; the UpdateJob waits on that
    row past two of the server's 1 s lock timeouts (the claim is let go only
    once a third attempt of the update waits, or once it was answered) and
    is answered OK, not UNAVAILABLE "refusing locks"; the job was claimed
    once and carries the update."""
    with servers_role(postgres_url) as db, ExitStack() as stack, claims_held(db) as release:
        one = start_server(stack, tmp_path, db.url, etcd_endpoint, f"pgc-{os.getpid()}")
        acme = tenant(one, "acme")
        meta = (("authorization", f"Bearer {acme.api_key}"),)
        channel = stack.enter_context(grpc.insecure_channel(one.address))
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = job_pb2.Job(name="claimed", target=job_pb2.Target(http=job_pb2.HttpTarget(url="http://127.0.0.1:9/")))
        job.schedule.once_at.FromDatetime(now() + timedelta(seconds=30))  # inside the claim's look-ahead
        job = stub.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="claimed"), metadata=meta,
                             timeout=30).job

        def claim_waits() -> bool:
            with db.admin.connect() as conn:
                return bool(conn.execute(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = :role AND wait_event = 'advisory'"
                ), {"role": db.role}).scalar())

        eventually(claim_waits, 60, "the dispatcher's claim of the job waiting in its insert")
        answers: list[object] = []
        patch = job_pb2.Job(id=job.id, version=job.version, name="renamed")

        def update() -> None:
            called = time.monotonic()
            try:
                answers.append(stub.UpdateJob(scheduler_pb2.UpdateJobRequest(
                    job=patch, update_mask=field_mask_pb2.FieldMask(paths=["name"])), metadata=meta, timeout=30))
            except grpc.RpcError as error:
                answers.append(error)
            answered.append(time.monotonic() - called)

        answered: list[float] = []
        caller = threading.Thread(target=update, daemon=True)
        caller.start()
        attempts: set[str] = set()

        def third_attempt_or_answered() -> bool:
            attempts.update(row_lock_waits(db))
            return len(attempts) > 2 or bool(answers)

        eventually(third_attempt_or_answered, 60, "a third attempt of the update waiting, or its answer", interval=0.02)
        release()
        caller.join(60)
        assert answers, "the update was not answered"
        answer = answers[0]
        assert not isinstance(answer, grpc.RpcError), (answer.code(), answer.details())
        assert len(attempts) > 2, attempts  # it waited past two lock timeouts, not answered before
        print(json.dumps({"update_behind_a_held_claim_answered_s": round(answered[0], 3),
                          "attempts_seen_waiting": len(attempts)}))  # figures, not bounds
        assert answer.job.name == "renamed"
        with db.admin.connect() as conn:
            claimed = conn.execute(sa.text("SELECT count(*) FROM executions WHERE job_id = :id"), {"id": job.id})
            assert claimed.scalar() == 1
        text = one.log()
        assert "refusing locks" not in text, text
        assert "Traceback" not in text, text
