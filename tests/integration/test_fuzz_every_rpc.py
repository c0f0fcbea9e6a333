"""Every SchedulerService and AdminService RPC not fuzzed in
test_bad_input_api.py, fuzzed against a real server on PostgreSQL + etcd.

Requests are drawn from each method's message descriptor: strings that are
hostile (NUL, a megabyte, bidi overrides, control characters, emoji),
another tenant's ids and names, page tokens (a megabyte, NUL, base64 of
garbage, a token of another method, a token of another tenant's listing),
numbers at the edges of their type, timestamps and durations with seconds
and nanos at and past their edges, enum values no enum has, field masks of
any path, lists of ten thousand items; and bytes that are no message. For
every call:

- the status is one of the named set for that method, never UNKNOWN or
  INTERNAL;
- INVALID_ARGUMENT names a field of the request (or ``""``: the request
  as a whole);
- a call that failed wrote nothing (the rows and versions of the tables the
  API writes are compared), a tenant's call answers nothing of another
  tenant's (a secret of the other's jobs appears in no answer);
- nothing is logged at ERROR, no traceback;

and the server still answers once the method is done. Admin methods run
with the admin token, one call in five with a tenant key
(PERMISSION_DENIED). One server serves the whole module; each test makes
its own tenant, jobs, calendar and execution.
"""

from __future__ import annotations

import base64
import itertools
from datetime import datetime, timedelta, timezone

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tickwheel import builders
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, calendar_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.support.postgres import _drop_database

from . import test_bad_input_api
from .test_bad_input_api import jobs, mutated, server_in_thread
from .test_server_api import bearer, cron_job, violations

pytestmark = [pytest.mark.postgres, pytest.mark.etcd]

no_errors_logged = test_bad_input_api.no_errors_logged
"""No record at ERROR or with a traceback (the fixture of test_bad_input_api.py)."""
FUZZ = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
"""25 examples a method: the module's ~40 methods in a few seconds each."""

C = grpc.StatusCode
SCHEDULER = scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"]
ADMIN = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]
FUZZED_ELSEWHERE = {
    "CreateJob", "BatchCreateJobs", "UpdateJob", "BatchUpdateJobs", "BatchDeleteJobs", "PreviewSchedule", "BackfillJob",
    "CreateCalendar", "UpdateCalendar",
}  # fmt: skip
"""test_bad_input_api.py and test_calendars_fuzz.py fuzz these (with strategies of their own)."""

READ = {C.OK, C.INVALID_ARGUMENT, C.NOT_FOUND}
LIST = {C.OK, C.INVALID_ARGUMENT}
WRITE = {C.OK, C.INVALID_ARGUMENT, C.NOT_FOUND, C.FAILED_PRECONDITION}
ALLOWED: dict[str, set[C]] = {
    # SchedulerService
    "GetJob": READ,
    "ListJobs": LIST,
    "ListJobRevisions": READ,
    "DeleteJob": WRITE,
    "PauseJob": WRITE,
    "BatchPauseJobs": {C.OK, C.INVALID_ARGUMENT},
    "ResumeJob": WRITE,
    "BatchResumeJobs": {C.OK, C.INVALID_ARGUMENT},
    "TriggerJob": WRITE | {C.RESOURCE_EXHAUSTED},
    "GetExecution": READ,
    "ListExecutions": READ,
    "CancelExecution": WRITE,
    "ListDeadLetters": READ,
    "ReplayDeadLetter": WRITE | {C.RESOURCE_EXHAUSTED},  # the manual-run quota
    "GetCalendar": READ,
    "ListCalendars": LIST,
    "DeleteCalendar": WRITE,
    # AdminService
    "ClusterStatus": LIST,
    "CreateTenant": {C.OK, C.INVALID_ARGUMENT, C.ALREADY_EXISTS},
    "GetTenant": READ,
    "ListTenants": LIST,
    "UpdateTenant": WRITE,
    "PauseTenant": WRITE,
    "ResumeTenant": WRITE,
    "IssueApiKey": WRITE | {C.RESOURCE_EXHAUSTED},
    "RotateApiKey": WRITE | {C.RESOURCE_EXHAUSTED},
    "RevokeApiKey": WRITE,
    "ListApiKeys": READ,
    "IssueWorkerCredential": WRITE | {C.RESOURCE_EXHAUSTED},
    "RevokeWorkerCredential": WRITE,
    "ListWorkerCredentials": LIST,
    "SearchJobs": LIST,
    "SearchExecutions": LIST,
    "DrainServer": WRITE,
    "ListAlerts": LIST,
    "WatchAlerts": {C.OK, C.INVALID_ARGUMENT},
    "RecomputeSchedules": {C.OK, C.INVALID_ARGUMENT, C.FAILED_PRECONDITION},
}
"""What each method may answer to anything (a tenant key on an admin method: PERMISSION_DENIED too)."""

SECRET = "beta-secret"
"""In the other tenant's job names, labels and payloads: never in an answer to acme's calls."""


def test_every_rpc_of_the_contract_is_fuzzed_somewhere() -> None:
    """A new RPC in proto/ fails this test until it is fuzzed."""
    methods = {m.name for service in (SCHEDULER, ADMIN) for m in service.methods}
    assert methods == set(ALLOWED) | FUZZED_ELSEWHERE


# --- the server, its data, and what the API wrote ----------------------------------------


@pytest.fixture(scope="module")
def live(postgres_instance, _etcd_service):
    if hasattr(_etcd_service, "start"):  # ours: running (a test before may have stopped it)
        _etcd_service.start()
    name = postgres_instance.create_migrated_database()
    url = postgres_instance.url(name)
    try:
        with server_in_thread(url, _etcd_service.endpoint) as running:
            running.engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
            try:
                yield running
            finally:
                running.engine.dispose()
    finally:
        postgres_instance.ensure_running()
        _drop_database(postgres_instance.conninfo(), name)


@pytest.fixture(scope="module")
def channel(live):
    with grpc.insecure_channel(live.address, options=[("grpc.max_send_message_length", 16 << 20)]) as opened:
        yield opened


class World:
    """One test's tenant (``key``, its jobs, calendar, executions) and the
    other tenant's, with real page tokens of both."""

    def __init__(self, live, channel, tenant: str) -> None:
        self.tenant = tenant
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.admin_md = live.admin_metadata()
        quotas = admin_pb2.TenantQuotas(requests_per_second=1_000_000)
        self.key = admin.CreateTenant(
            admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=tenant, quotas=quotas)), metadata=self.admin_md
        ).api_key.secret
        other = f"{tenant}-beta"
        reply = admin.CreateTenant(
            admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=other, quotas=quotas)), metadata=self.admin_md
        )
        self.other, self.other_key = other, reply.api_key.secret
        self.bystander_key = admin.CreateTenant(
            admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=f"{tenant}-c")), metadata=self.admin_md
        ).api_key.secret
        """A tenant key no request names (its tenant, its key): an admin method called with it is PERMISSION_DENIED."""
        self.key_ids = [admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant=t), metadata=self.admin_md).api_keys[0].id
                        for t in (tenant, other)]  # fmt: skip
        self.credential_id = admin.IssueWorkerCredential(
            admin_pb2.IssueWorkerCredentialRequest(tenants=[other], handlers=["echo"]), metadata=self.admin_md
        ).credential.id
        self.mine = self._populate(channel, self.key, "mine")
        self.theirs = self._populate(channel, self.other_key, SECRET)
        self.tokens = self._tokens(channel)

    @staticmethod
    def _populate(channel, key: str, marker: str) -> dict[str, list[str]]:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        jobs = []
        for n in range(3):
            job = cron_job("0 3 29 2 *", "UTC")
            job.name, job.labels["note"], job.payload = f"{marker}-{n}", marker, marker.encode()
            jobs.append(scheduler.CreateJob(
                scheduler_pb2.CreateJobRequest(job=job, request_id=f"{marker}-{n}"), metadata=bearer(key)
            ).job.id)  # fmt: skip
        later = builders.once_job(f"{marker}-once", datetime.now(timezone.utc) + timedelta(days=3650), handler="echo")
        jobs.append(scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=later, request_id=f"{marker}-o"),
                                        metadata=bearer(key)).job.id)  # fmt: skip
        executions = [scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=jobs[0], request_id=f"{marker}-t{n}"),
                                           metadata=bearer(key)).execution.id for n in range(2)]  # fmt: skip
        calendar = calendar_pb2.Calendar(name="cal", time_zone="UTC", holidays=["2099-12-25"])
        scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(calendar=calendar, request_id=f"{marker}-c"),
                                 metadata=bearer(key))  # fmt: skip
        return {"jobs": jobs, "executions": executions}

    def _tokens(self, channel) -> list[str]:
        """Next-page tokens of listings of both tenants and of the admin's."""
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        tokens = []
        for key, ids in ((self.key, self.mine), (self.other_key, self.theirs)):
            tokens.append(scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=1), metadata=bearer(key)).next_page_token)
            tokens.append(scheduler.ListExecutions(
                scheduler_pb2.ListExecutionsRequest(job_id=ids["jobs"][0], page_size=1), metadata=bearer(key)
            ).next_page_token)  # fmt: skip
        tokens.append(admin.SearchJobs(admin_pb2.SearchJobsRequest(page_size=1), metadata=self.admin_md).next_page_token)
        tokens.append(admin.ListTenants(admin_pb2.ListTenantsRequest(page_size=1), metadata=self.admin_md).next_page_token)
        assert all(tokens), tokens
        return tokens

    def ids(self) -> list[str]:
        """Ids and names a request may carry: both tenants', and near misses."""
        both = [*self.mine["jobs"], *self.mine["executions"], *self.theirs["jobs"], *self.theirs["executions"]]
        return [*both, self.tenant, self.other, "cal", *self.key_ids, self.credential_id,
                both[0][:-1], both[0].upper(), "job_", "exe_"]  # fmt: skip


_tenants = itertools.count()


@pytest.fixture
def world(live, channel) -> World:
    return World(live, channel, f"fz{next(_tenants)}")


SNAPSHOT = [
    "SELECT name, state, version, weight, max_jobs, requests_per_second FROM tenants ORDER BY name",
    "SELECT id, tenant, expires_at FROM api_keys ORDER BY id",
    "SELECT id, revoked_at FROM worker_credentials ORDER BY id",
    "SELECT id, state, version, name, pause_reason, calendar FROM jobs ORDER BY id",
    "SELECT job_id, version FROM job_revisions ORDER BY job_id, version",
    "SELECT tenant, kind, request_id FROM request_ids ORDER BY tenant, kind, request_id",
    "SELECT id, cancel_requested_at, origin FROM executions ORDER BY id",
    "SELECT tenant, name, version FROM calendars ORDER BY tenant, name",
]
"""What the API writes (columns the dispatcher and the reaper do not touch)."""


def snapshot(live) -> list:
    with live.engine.connect() as conn:
        return [conn.execute(sa.text(query)).all() for query in SNAPSHOT]


# --- strategies ----------------------------------------------------------------------------

MEGABYTE = "A" * (1 << 20)
HOSTILE_TEXT = st.one_of(
    st.sampled_from([
        "", " ", "\0", "a\0b", "\u202egpj.exe", "\u2066x", "\x1b[2J", "a\r\nb", "\t", "\x7f", "😀" * 20, "é",
        "x" * 257, "x" * 5000, "../../etc/passwd", "%00", "' OR 1=1 --", "\\", "*", "UTC", "Europe/London",
        "2099-12-25", "name", "job.name", "items[0]",
    ]),
    st.text(max_size=24),
    st.just(MEGABYTE),
)  # fmt: skip
TOKENS_GARBAGE = [
    MEGABYTE, "\0", "a\0b", base64.urlsafe_b64encode(b"\xff\x00garbage\x01" * 3).decode(),
    base64.urlsafe_b64encode(b"job_zzzzzzzzzzzzzzzzzzzzzzzzzz").decode(), base64.b64encode(b"{}").decode(), "====", "%",
]  # fmt: skip
INT_EDGES = {
    FieldDescriptor.TYPE_INT32: [-(2**31), -1, 0, 1, 2, 99, 100, 1000, 1001, 10**6, 2**31 - 1],
    FieldDescriptor.TYPE_INT64: [-(2**63), -(2**31), -1, 0, 1, 1000, 1001, 2**31, 2**53, 2**63 - 1],
    FieldDescriptor.TYPE_UINT32: [0, 1, 1000, 2**32 - 1],
    FieldDescriptor.TYPE_UINT64: [0, 1, 1000, 2**64 - 1],
}
SECONDS_EDGES = [-(2**63), -62_135_596_801, -62_135_596_800, -1, 0, 1_700_000_000, 253_402_300_799, 253_402_300_800,
                 2**62, 2**63 - 1]  # fmt: skip
NANOS_EDGES = [-(2**31), -1_000_000_000, -1, 0, 999_999_999, 1_000_000_000, 2**31 - 1]


def seconds_and_nanos(message_class) -> st.SearchStrategy:
    return st.builds(
        message_class,
        seconds=st.one_of(st.sampled_from(SECONDS_EDGES), st.integers(-(2**63), 2**63 - 1)),
        nanos=st.one_of(st.sampled_from(NANOS_EDGES), st.integers(-(2**31), 2**31 - 1)),
    )


def scalar(field: FieldDescriptor, world: World) -> st.SearchStrategy:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        if field.name.endswith("page_token"):
            return st.sampled_from(world.tokens + TOKENS_GARBAGE)
        return st.one_of(st.sampled_from(world.ids()), HOSTILE_TEXT)
    if kind in INT_EDGES:
        edges = INT_EDGES[kind]
        return st.one_of(st.sampled_from(edges), st.integers(min(edges), max(edges)))
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.one_of(st.integers(-1, 12), st.sampled_from([-(2**31), 2**31 - 1]))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=32), st.just(b"\0" * 100_000))
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32 if kind == FieldDescriptor.TYPE_FLOAT else 64)
    raise AssertionError(f"no strategy for {field.full_name}")


def message_of(descriptor, world: World, depth: int = 0) -> st.SearchStrategy:
    """A message of ``descriptor`` whose fields are each set or not, to hostile values."""
    name = descriptor.full_name
    if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return seconds_and_nanos(timestamp_pb2.Timestamp if name.endswith("Timestamp") else duration_pb2.Duration)
    if name == "google.protobuf.FieldMask":
        paths = st.one_of(st.sampled_from(["name", "holidays", "time_zone", "business_days", "version", "tenant",
                                           "quotas", "weight", "max_concurrency", "half_days", ""]), HOSTILE_TEXT)  # fmt: skip
        return st.builds(field_mask_pb2.FieldMask, paths=st.lists(paths, max_size=4))
    if name == "tickwheel.v1.Job":
        return jobs()
    cls = GetMessageClass(descriptor)

    @st.composite
    def build(draw):
        message = cls()
        for field in descriptor.fields:
            if not draw(st.booleans()):
                continue
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                key_field, value_field = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
                entries = draw(st.dictionaries(scalar(key_field, world), scalar(value_field, world), max_size=3))
                for key, value in entries.items():
                    getattr(message, field.name)[key] = value
                continue
            if field.message_type is not None:
                if depth >= 3:
                    continue
                item = message_of(field.message_type, world, depth + 1)
                if field.is_repeated:
                    many = draw(st.sampled_from([1, 1, 2, 3, 2000]))
                    empty = GetMessageClass(field.message_type)()  # a long list of small items, not of megabytes
                    values = [empty] * many if many == 2000 else [draw(item) for _ in range(many)]
                    getattr(message, field.name).extend(values)
                else:
                    getattr(message, field.name).CopyFrom(draw(item))
                continue
            item = scalar(field, world)
            if field.is_repeated:
                many = draw(st.sampled_from([0, 1, 2, 3, 10_000]))
                value = draw(st.sampled_from(["a", "\0", "job_", "UTC"])) if field.type == FieldDescriptor.TYPE_STRING else 1
                values = [value] * many if many == 10_000 else [draw(item) for _ in range(many)]
                getattr(message, field.name).extend(values)
            else:
                setattr(message, field.name, draw(item))
        return message

    return build()


MAX_REQUEST = 4 << 20
"""gRPC's default receive limit: a larger request is refused before any of our code (RESOURCE_EXHAUSTED)."""


def requests(method, world: World) -> st.SearchStrategy[bytes]:
    structured = message_of(method.input_type, world).map(lambda m: m.SerializeToString()).filter(
        lambda raw: len(raw) < MAX_REQUEST
    )
    return st.one_of(structured, structured, structured, structured.flatmap(mutated), st.binary(max_size=128))


# --- one call --------------------------------------------------------------------------------


def answer(channel, service, method, raw: bytes, metadata) -> tuple[C, bytes | None, grpc.RpcError | None]:
    path = f"/{service.full_name}/{method.name}"
    try:
        if method.server_streaming:
            stream = channel.unary_stream(path)(raw, metadata=metadata, timeout=0.5)
            try:
                first = next(stream, b"")
            finally:
                stream.cancel()
            return C.OK, first, None
        return C.OK, channel.unary_unary(path)(raw, metadata=metadata, timeout=30), None
    except grpc.RpcError as error:
        if method.server_streaming and error.code() in (C.DEADLINE_EXCEEDED, C.CANCELLED):
            return C.OK, b"", None  # the stream was taken: nothing to send yet
        return error.code(), None, error


def fields_named(error: grpc.RpcError, descriptor) -> list[str]:
    """The violations' fields that are not ``""`` or a path under a field of ``descriptor``."""
    top = {f.name for f in descriptor.fields}
    found = violations(error)
    assert found, f"INVALID_ARGUMENT without a field: {error.details()}"
    return [f for f in found if f and f.split(".")[0].split("[")[0] not in top]


def fuzz(live, channel, world: World, service, name: str) -> None:
    method = service.methods_by_name[name]
    allowed = ALLOWED[name]

    @FUZZ
    @given(data=st.data())
    def run(data) -> None:
        raw = data.draw(requests(method, world), label="request")
        if service is ADMIN:
            tenant_key = data.draw(st.integers(0, 4), label="tenant key") == 0
            metadata = bearer(world.bystander_key) if tenant_key else world.admin_md
        else:
            tenant_key, metadata = False, bearer(world.key)
        before = snapshot(live)
        code, reply, error = answer(channel, service, method, raw, metadata)
        try:
            decoded = GetMessageClass(method.input_type).FromString(raw)
        except Exception:  # noqa: BLE001 - bytes that are no message: the refusal names the request
            decoded = None
        if tenant_key:
            # Bytes that are no message (or hold a NUL) are refused before anyone is authenticated.
            refused_first = decoded is None or b"\0" in raw
            assert code == C.PERMISSION_DENIED or (refused_first and code == C.INVALID_ARGUMENT), (name, code)
            assert snapshot(live) == before, f"{name} refused to a tenant key wrote"
            return
        assert code in allowed, (name, code, error and error.details())
        if code == C.INVALID_ARGUMENT:
            stray = fields_named(error, method.input_type) if decoded is not None else []
            assert not stray, (name, stray, error.details())
        if code != C.OK:
            assert snapshot(live) == before, f"a failed {name} ({code}) wrote"
        elif service is SCHEDULER:
            # An id the request carried may come back in its item's NOT_FOUND (another tenant's
            # trigger execution id holds its request id, the marker): the caller's own bytes.
            for ident in world.ids():
                if SECRET in ident and ident.encode() in raw:
                    reply = reply.replace(ident.encode(), b"")
            assert SECRET.encode() not in reply, f"{name} answered with the other tenant's data"

    run()
    assert_answers(channel, world, service)


def assert_answers(channel, world: World, service) -> None:
    """The server still serves. After admin methods, with the admin token
    (the fuzz may have paused the test's tenants or revoked their keys)."""
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    admin.ClusterStatus(admin_pb2.ClusterStatusRequest(), metadata=world.admin_md, timeout=30)
    admin.SearchJobs(admin_pb2.SearchJobsRequest(page_size=10), metadata=world.admin_md, timeout=30)
    if service is SCHEDULER:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        scheduler.ListJobs(scheduler_pb2.ListJobsRequest(page_size=10), metadata=bearer(world.key), timeout=30)
        created = scheduler.CreateJob(
            scheduler_pb2.CreateJobRequest(job=cron_job(), request_id="after-fuzz"), metadata=bearer(world.key),
            timeout=30,
        )
        assert created.job.id


@pytest.mark.usefixtures("no_errors_logged")
@pytest.mark.parametrize("name", sorted(m for m in ALLOWED if m in SCHEDULER.methods_by_name))
def test_fuzzed_scheduler_rpc(live, channel, world, name) -> None:
    fuzz(live, channel, world, SCHEDULER, name)


@pytest.mark.usefixtures("no_errors_logged")
@pytest.mark.parametrize("name", sorted(m for m in ALLOWED if m in ADMIN.methods_by_name))
def test_fuzzed_admin_rpc(live, channel, world, name) -> None:
    fuzz(live, channel, world, ADMIN, name)




# --- defects the fuzz found, one by one ---------------------------------------------------


@pytest.mark.parametrize(
    "method, request_, field",
    [
        ("ListApiKeys", admin_pb2.ListApiKeysRequest(tenant=MEGABYTE), "tenant"),
        ("RevokeApiKey", admin_pb2.RevokeApiKeyRequest(id=MEGABYTE), "id"),
        ("RotateApiKey", admin_pb2.RotateApiKeyRequest(id=MEGABYTE), "id"),
        ("RevokeWorkerCredential", admin_pb2.RevokeWorkerCredentialRequest(id=MEGABYTE), "id"),
        ("GetTenant", admin_pb2.GetTenantRequest(name="x" * 300), "name"),
        ("IssueApiKey", admin_pb2.IssueApiKeyRequest(tenant="a b"), "tenant"),
    ],
)
def test_an_id_no_key_or_tenant_could_have_is_invalid_argument_naming_it(live, channel, method, request_, field) -> None:
    """A megabyte id was looked up and echoed whole in NOT_FOUND: a status
    larger than the trailers a client accepts, which it saw as
    RESOURCE_EXHAUSTED "Stream removed". Now INVALID_ARGUMENT naming the
    field, and nothing written."""
    before = snapshot(live)
    with pytest.raises(grpc.RpcError) as refused:
        channel.unary_unary(f"/{ADMIN.full_name}/{method}")(
            request_.SerializeToString(), metadata=live.admin_metadata(), timeout=30
        )
    assert refused.value.code() == C.INVALID_ARGUMENT, refused.value.details()
    assert field in violations(refused.value)
    assert len(refused.value.details()) < 1_000
    assert snapshot(live) == before


def test_a_server_id_of_any_printable_text_is_looked_for_not_refused(live, channel) -> None:
    """A server may be started with a non-ASCII id (``--server-id``): DrainServer
    looks such an id up (NOT_FOUND here), it is not refused as no id; a
    megabyte one is INVALID_ARGUMENT naming ``server_id``."""
    drain = channel.unary_unary(f"/{ADMIN.full_name}/DrainServer")
    for server_id, code in (("nœud-1", C.NOT_FOUND), ("x" * (1 << 20), C.INVALID_ARGUMENT)):
        with pytest.raises(grpc.RpcError) as refused:
            drain(admin_pb2.DrainServerRequest(server_id=server_id).SerializeToString(),
                  metadata=live.admin_metadata(), timeout=30)  # fmt: skip
        assert refused.value.code() == code, refused.value.details()
        assert len(refused.value.details()) < 1_000
