"""Request decoding at the edge (api/decoding.py): never raises, drops
unknown fields, names strings holding NUL, logs refusals at a bounded rate."""

from __future__ import annotations

import logging

import pytest
from tickwheel.v1 import admin_pb2, job_pb2, scheduler_pb2

from tickwheel_server.api.decoding import NUL_SEARCHED, STARTED, UNSEARCHED, Refused, decoder, nul_fields


def create(**job_fields) -> scheduler_pb2.CreateJobRequest:
    return scheduler_pb2.CreateJobRequest(job=job_pb2.Job(**job_fields), request_id="r")


def test_bytes_that_do_not_parse_are_refused_not_raised() -> None:
    decode = decoder(scheduler_pb2.CreateJobRequest, refuse_nul=True)
    valid = create(name="zz").SerializeToString()
    for raw in (valid.replace(b"zz", b"\xff\xfe"), b"\xff\xff\xff\xff", b"\x0a\x05\x01", b"\x0a" * 200_000):
        refused = decode(raw)
        assert type(refused) is Refused and refused.undecodable
        (violation,) = refused.error.violations
        assert violation.field == ""
        assert violation.description.startswith("the request is not a valid tickwheel.v1.CreateJobRequest: ")
    assert decode(b"\x12\x02\xff\xfe").error.violations[0].description.endswith("String field had bad UTF-8")


def test_unknown_fields_are_dropped_at_any_depth() -> None:
    job = job_pb2.Job(name="x").SerializeToString() + b"\xd2\x3e\x03abc"  # field 1002, 3 bytes
    raw = b"\x0a" + bytes([len(job)]) + job + b"\xfa\x3e\x01z"
    decoded = decoder(scheduler_pb2.CreateJobRequest, refuse_nul=True)(raw)
    assert decoded.SerializeToString() == scheduler_pb2.CreateJobRequest(job=job_pb2.Job(name="x")).SerializeToString()
    kept = decoder(scheduler_pb2.CreateJobRequest, refuse_nul=True, discard_unknown=False)(raw)
    assert len(kept.SerializeToString()) == len(raw)


def test_strings_with_nul_are_named() -> None:
    request = create(
        name="a\0", labels={"env": "x\0"}, concurrency_keys=[job_pb2.ConcurrencyKey(key="ok"), job_pb2.ConcurrencyKey(key="\0")],
        target=job_pb2.Target(http=job_pb2.HttpTarget(url="https://x", headers={"\0": "v"})),
        payload=b"\0\0",
    )
    assert nul_fields(request) == ["job.name", "job.target.http.headers", "job.concurrency_keys[1].key", "job.labels"]
    refused = decoder(scheduler_pb2.CreateJobRequest, refuse_nul=True)(request.SerializeToString())
    assert type(refused) is Refused and not refused.undecodable
    assert {v.field for v in refused.error.violations} == set(nul_fields(request))
    assert nul_fields(create(payload=b"\0", name="ok")) == []
    search = admin_pb2.SearchJobsRequest(tenant="a\0b")
    assert decoder(admin_pb2.SearchJobsRequest, refuse_nul=True)(search.SerializeToString()).error.violations[0].field == "tenant"
    assert decoder(admin_pb2.SearchJobsRequest, refuse_nul=False)(search.SerializeToString()).tenant == "a\0b"


def test_a_request_listing_more_than_is_searched_for_nul_names_the_list_unsearched() -> None:
    """A zero byte anywhere (a payload's) and lists past :data:`NUL_SEARCHED`
    entries: the list being searched when they ran out is named, its
    entries not walked (before: every entry of every list, in Python, up
    to a 4 MiB request's hundreds of thousands, and the request passed)."""
    decode = decoder(scheduler_pb2.CreateJobRequest, refuse_nul=True)
    labels = create(payload=b"\0", name="ok", labels={f"k{n}": "v" for n in range(NUL_SEARCHED + 1)})
    keys = create(payload=b"\0", concurrency_keys=[job_pb2.ConcurrencyKey(key=f"c{n}") for n in range(NUL_SEARCHED // 2)],
                  labels={f"k{n}": "v" for n in range(NUL_SEARCHED // 2 + 1)})
    for request, field in ((labels, "job.labels"), (keys, "job.labels")):
        refused = decode(request.SerializeToString())
        assert type(refused) is Refused and not refused.undecodable
        assert [(v.field, v.description) for v in refused.error.violations] == [(field, UNSEARCHED)]
    within = create(payload=b"\0", labels={f"k{n}": "v" for n in range(NUL_SEARCHED // 2)}, name="a\0")
    assert nul_fields(within) == ["job.name"], "a request within the bound is searched whole"
    within.job.labels["z"] = "\0"
    assert nul_fields(within) == ["job.name", "job.labels"]


async def test_refusals_are_logged_once_per_interval_per_service_with_a_count(caplog) -> None:
    """Bytes that are no message: one WARNING a minute per service saying how
    many since the last; each call still refused INVALID_ARGUMENT."""
    import grpc

    from tickwheel_server.api.decoding import _guard_handler
    from tickwheel_server.telemetry.refusals import RefusalLog

    async def get_job(request, context):
        raise AssertionError("a refused request reached the servicer")

    handler = grpc.unary_unary_rpc_method_handler(
        get_job, request_deserializer=scheduler_pb2.GetJobRequest.FromString,
        response_serializer=scheduler_pb2.GetJobResponse.SerializeToString,
    )
    now = [100.0]
    refusals = RefusalLog(interval=60, now=lambda: now[0])
    guarded = {
        service: _guard_handler(handler, f"{service}/GetJob", refusals, refuse_nul=True, discard_unknown=True,
                                starting=STARTED)
        for service in ("svc", "other")
    }

    async def send(service: str) -> None:
        context = _Context()
        with pytest.raises(_Aborted):
            await _unary(guarded[service], b"\xff\xff", context)
        assert context.aborted[0] == grpc.StatusCode.INVALID_ARGUMENT

    with caplog.at_level(logging.WARNING, "tickwheel_server.api.decoding"):
        for _ in range(1000):
            await send("svc")
        await send("other")
        now[0] += 61
        await send("svc")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("svc: refused 1 request") and lines[1].startswith("other: refused 1 request")
    assert lines[2].startswith("svc: refused 1000 request(s) that were not valid messages") and "svc/GetJob" in lines[2]
    assert not [r for r in caplog.records if r.exc_info]


class _Start:
    def __init__(self) -> None:
        self.done = False

    def refusal(self) -> str:
        return "starting: waiting for etcd at 127.0.0.1:1"


async def _unary(handler, raw: bytes, context) -> None:
    """A call of a guarded unary method with the message ``raw``: served as
    a client-streaming method, which reads its message itself."""
    context.message = raw
    await handler.stream_unary(None, context)


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.aborted: tuple | None = None
        self.message = b""

    def peer(self) -> str:
        return "ipv4:203.0.113.9:1000"

    def invocation_metadata(self) -> tuple:
        return ()

    async def read(self) -> bytes:
        return self.message

    async def abort(self, code, details="", trailing_metadata=()):
        self.aborted = (code, details)
        raise _Aborted


async def test_a_guarded_method_is_refused_until_the_start_is_done() -> None:
    """Before ``starting.done``: UNAVAILABLE with the start's message, the
    servicer never called (even for bytes that are no message); after: served."""
    import grpc

    from tickwheel_server.api.decoding import _guard_handler
    from tickwheel_server.telemetry.refusals import RefusalLog

    served: list = []

    async def get_job(request, context):
        served.append(request)
        return scheduler_pb2.GetJobResponse()

    handler = grpc.unary_unary_rpc_method_handler(
        get_job, request_deserializer=scheduler_pb2.GetJobRequest.FromString,
        response_serializer=scheduler_pb2.GetJobResponse.SerializeToString,
    )
    start = _Start()
    guarded = _guard_handler(handler, "S/GetJob", RefusalLog(), refuse_nul=True, discard_unknown=True, starting=start)
    for raw in (scheduler_pb2.GetJobRequest(id="j").SerializeToString(), b"\xff\xff"):
        context = _Context()
        try:
            await _unary(guarded, raw, context)
        except _Aborted:
            pass
        assert context.aborted == (grpc.StatusCode.UNAVAILABLE, "starting: waiting for etcd at 127.0.0.1:1")
    assert served == []
    start.done = True
    await _unary(guarded, scheduler_pb2.GetJobRequest(id="j").SerializeToString(), _Context())
    assert [r.id for r in served] == ["j"]


def test_a_status_echoing_a_megabyte_the_caller_sent_stays_small() -> None:
    """NOT_FOUND, ALREADY_EXISTS and FAILED_PRECONDITION show the caller's
    name or id: cut, so that the status (message and details, in the
    trailers) stays far below the 16 KiB a gRPC client accepts; a megabyte
    echoed whole made the client see RESOURCE_EXHAUSTED "Stream removed"."""
    from tickwheel_server.api.status import status_for
    from tickwheel_server.errors import AlreadyExists, FailedPrecondition, NotFound

    huge = "A" * (1 << 20)
    for error in (NotFound("api key", huge), AlreadyExists("tenant", huge), FailedPrecondition(huge, huge)):
        _code, status = status_for(error)
        assert len(status.SerializeToString()) < 2_000, type(error).__name__
        assert "AAAA" in status.message  # still shows which


async def test_a_calls_bearer_secret_is_read_from_its_metadata_once() -> None:
    """The edge reads the secret for the refusal window and the request's
    read; the servicer's authenticator (``bearer``, ``caller_key``) is
    given the same, not a read of its own (before: a third read a call).
    A call whose edge is another task's reads its own."""
    import grpc

    from tickwheel_server.api.decoding import _guard_handler
    from tickwheel_server.auth.authenticator import bearer
    from tickwheel_server.auth.windows import caller_key
    from tickwheel_server.telemetry.refusals import RefusalLog

    class Counting(_Context):
        reads = 0

        def __init__(self, secret: str) -> None:
            super().__init__()
            self.secret = secret

        def invocation_metadata(self) -> tuple:
            Counting.reads += 1
            return (("authorization", f"Bearer {self.secret}"),)

    other = Counting("s-other")
    seen: list = []

    async def get_job(request, context):
        seen.append((bearer(context), caller_key(context), bearer(other)))
        return scheduler_pb2.GetJobResponse()

    handler = grpc.unary_unary_rpc_method_handler(
        get_job, request_deserializer=scheduler_pb2.GetJobRequest.FromString,
        response_serializer=scheduler_pb2.GetJobResponse.SerializeToString,
    )
    guarded = _guard_handler(handler, "S/GetJob", RefusalLog(), refuse_nul=True, discard_unknown=True, starting=STARTED)
    await _unary(guarded, scheduler_pb2.GetJobRequest(id="j").SerializeToString(), Counting("s-1"))
    assert seen == [("s-1", "s-1", "s-other")]
    assert Counting.reads == 2, "once for the call, once for the other call's context"
