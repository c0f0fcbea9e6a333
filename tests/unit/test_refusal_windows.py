"""Refusal windows: a caller refused RESOURCE_EXHAUSTED with a retry delay
that calls again inside it is refused at the edge (the guard) with the
same status and RetryInfo, its request not decoded, its credential not
checked, nothing else touched; one that keeps at it is told a longer delay;
other callers (another key behind the same address) are untouched. The
authenticator over fake stores, a real rate limiter, on a fake clock."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from tickwheel.v1 import scheduler_pb2

from tickwheel.shared.clock import FakeClock
from tickwheel_server.api.decoding import STARTED, _guard_handler
from tickwheel_server.auth.authenticator import Authenticator
from tickwheel_server.auth.ratelimit import RequestRateLimiter
from tickwheel_server.auth.windows import PEER_KEY, RefusalWindows, caller_key, escalated
from tickwheel_server.api.status import abort
from tickwheel_server.errors import QuotaExceeded, TickwheelError
from tickwheel_server.store.tenants import Tenant
from tickwheel_server.telemetry.refusals import RefusalLog
from tests.unit.test_auth_failures import ADMIN, Call, FakeTenants, FakeWorkers, random_key


@pytest.mark.parametrize(
    ("delay", "strikes", "window"),
    [
        (0.2, 0, 0.2),
        (0.2, 16, 0.2),  # within the slack: the delay as told
        (0.2, 17, 0.4),
        (0.2, 31, 0.4),
        (0.2, 32, 0.8),
        (0.2, 10_000, 10.0),  # capped
        (30.0, 100, 30.0),  # never shorter than the delay told
    ],
)
def test_the_window_doubles_every_slack_calls_past_the_slack_up_to_the_cap(delay, strikes, window) -> None:
    assert escalated(delay, strikes, slack=16, cap=10.0) == pytest.approx(window)


def test_the_caller_key_is_the_bearer_secret_or_the_peer() -> None:
    assert caller_key(Call("twk_a_b")) == "twk_a_b"
    assert caller_key(Call(None, "ipv4:10.0.0.1:4242")) == PEER_KEY + "ipv4:10.0.0.1"


class _Aborted(Exception):
    pass


class _Context(Call):
    aborted: tuple | None = None
    message: bytes = b""
    """The call's request message, as ``read`` hands it to a guarded method."""

    async def read(self) -> bytes:
        return self.message

    async def abort(self, code, details="", trailing_metadata=()):
        self.aborted = (code, details, dict(trailing_metadata))
        raise _Aborted


def setup(rate: int = 2) -> tuple[Authenticator, FakeTenants, RequestRateLimiter, FakeClock]:
    clock = FakeClock()
    tenants = FakeTenants()
    limiter = RequestRateLimiter(clock)
    windows = RefusalWindows(clock, hold=0.0)  # held calls wait on the clock: none here
    auth = Authenticator(tenants, FakeWorkers(), ADMIN, clock, rate_limiter=limiter, windows=windows)
    return auth, tenants, limiter, clock


def issue(tenants: FakeTenants, name: str, rate: int) -> str:
    secret = tenants.issue(name)
    tenants.keys[secret] = Tenant(name=name, requests_per_second=rate)
    return secret


def guarded(auth: Authenticator, served: list):
    async def create_job(request, context):
        try:
            await auth.tenant(context)
        except TickwheelError as error:
            await abort(context, error)
        served.append(request)
        return scheduler_pb2.CreateJobResponse()

    handler = grpc.unary_unary_rpc_method_handler(
        create_job, request_deserializer=scheduler_pb2.CreateJobRequest.FromString,
        response_serializer=scheduler_pb2.CreateJobResponse.SerializeToString,
    )
    return _guard_handler(handler, "S/CreateJob", RefusalLog(), refuse_nul=True, discard_unknown=True,
                          starting=STARTED, windows=auth.windows)  # fmt: skip


async def call(handler, secret: str | None, raw: bytes, peer: str = "ipv4:203.0.113.9:1000"):
    """(code, message, RetryInfo delay in seconds or None) of one call; code OK when served."""
    context = _Context(secret, peer)
    context.message = raw
    try:
        await handler.stream_unary(None, context)  # a guarded unary method reads its message itself
    except _Aborted:
        code, message, trailing = context.aborted
        status = status_pb2.Status.FromString(trailing["grpc-status-details-bin"]) if trailing else status_pb2.Status()
        delays = []
        for detail in status.details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                delays.append(info.retry_delay.ToTimedelta().total_seconds())
        return code, message, (delays or [None])[0]
    return grpc.StatusCode.OK, "", None


REQUEST = scheduler_pb2.CreateJobRequest(request_id="r").SerializeToString()
UNDECODABLE = b"\xff\xff"


async def test_a_call_inside_its_retry_delay_is_refused_before_decoding_or_authenticating() -> None:
    auth, tenants, limiter, clock = setup()
    flood = issue(tenants, "flood", 2)
    neighbour = issue(tenants, "quiet", 2)
    served: list = []
    handler = guarded(auth, served)
    assert [(await call(handler, flood, REQUEST))[0] for _ in range(2)] == [grpc.StatusCode.OK] * 2
    code, message, delay = await call(handler, flood, REQUEST)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay == pytest.approx(0.5)
    reads, refused = tenants.reads, limiter.refused

    code, message, delay = await call(handler, flood, UNDECODABLE)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, "refused before its bytes were decoded (else INVALID_ARGUMENT)"
    assert "API request rate over 2/s" in message and 0 < delay <= 0.5, "the same refusal, with its RetryInfo"
    assert (await call(handler, flood, REQUEST))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (tenants.reads, limiter.refused) == (reads, refused), "neither the credential nor the bucket was looked at"
    assert auth.windows.refused == 2
    assert len(served) == 2, "nothing served inside the window"

    assert (await call(handler, neighbour, REQUEST))[0] == grpc.StatusCode.OK, "another key from the same address"
    assert (await call(handler, neighbour, UNDECODABLE))[0] == grpc.StatusCode.INVALID_ARGUMENT

    clock.advance(0.5)
    assert (await call(handler, flood, REQUEST))[0] == grpc.StatusCode.OK, "served again once the delay ended"


async def test_a_caller_that_keeps_calling_inside_its_delay_is_told_a_longer_one() -> None:
    auth, tenants, _, clock = setup()
    flood = issue(tenants, "flood", 2)
    handler = guarded(auth, [])
    for _ in range(3):
        await call(handler, flood, REQUEST)
    delays = [(await call(handler, flood, REQUEST))[2] for _ in range(16 * 4)]
    assert max(delays[:16]) <= 0.5, "within the slack: the delay as told"
    assert delays[-1] == pytest.approx(0.5 * 2**4, rel=0.01), "doubled every 16 calls past the slack"
    assert auth.windows.window(flood).until == pytest.approx(clock.monotonic() + 8.0), "outlasts the delay first told"
    clock.advance(8.0)
    assert (await call(handler, flood, REQUEST))[0] == grpc.StatusCode.OK
    assert (await call(handler, flood, REQUEST))[0] == grpc.StatusCode.OK
    code, _, delay = await call(handler, flood, REQUEST)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay > 0.5, "refused again soon: escalated at once"


async def test_a_peer_over_its_failures_is_refused_at_the_edge_by_its_secret() -> None:
    auth, tenants, _, clock = setup()
    handler = guarded(auth, [])
    bogus = "twk_x_" + "y" * 43
    codes = [(await call(handler, bogus, REQUEST))[0] for _ in range(25)]
    assert codes[0] == grpc.StatusCode.UNAUTHENTICATED and codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED
    reads = tenants.reads
    code, _, delay = await call(handler, bogus, UNDECODABLE)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay is not None
    assert tenants.reads == reads
    quiet = issue(tenants, "quiet", 2)
    assert (await call(handler, quiet, REQUEST))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED, (
        "a key never verified here, from that address, waits for its failures (failures.py)")
    assert len(auth.windows) == 2


def test_windows_are_bounded() -> None:
    clock = FakeClock()
    windows = RefusalWindows(clock, max_keys=3)
    error = QuotaExceeded("t", "requests_per_second", 1, "over", retry_after=1.0)
    for n in range(10):
        windows.opened(f"k{n}", error, 1.0)
    assert len(windows) == 3 and windows.inside("k0") is None and windows.inside("k9") is not None


async def test_a_peer_sending_a_new_secret_each_call_meets_its_peers_window() -> None:
    """Once a peer is over its failures, a call from it with a secret not
    verified here lately is refused at the edge (the peer's window), not
    checked; a key that verified here, from the same address, is served."""
    auth, tenants, _, clock = setup()
    handler = guarded(auth, [])
    nat = "ipv4:203.0.113.9:1000"
    quiet = issue(tenants, "quiet", 1000)
    assert (await call(handler, quiet, REQUEST, nat))[0] == grpc.StatusCode.OK
    codes = [(await call(handler, random_key(), REQUEST, nat))[0] for _ in range(25)]
    assert codes[0] == grpc.StatusCode.UNAUTHENTICATED and codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED
    reads, refused = tenants.reads, auth.failures.refused
    code, _, delay = await call(handler, random_key(), UNDECODABLE, nat)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay is not None, "refused before it was decoded"
    assert (tenants.reads, auth.failures.refused) == (reads, refused), "nor checked"
    code, _, _ = await call(handler, random_key(), UNDECODABLE, "ipv4:198.51.100.7:1")
    assert code == grpc.StatusCode.INVALID_ARGUMENT, "another address's call is its own"
    clock.advance(5.0)  # quiet's cached principal expired: checked again, not refused
    assert (await call(handler, quiet, REQUEST, nat))[0] == grpc.StatusCode.OK


def test_refusals_inside_an_open_window_count_as_calls_inside_it() -> None:
    """Calls sent together all pass the edge before the first is refused;
    each refusal while the window is open is a call inside it (before, each
    opened the window afresh, told the delay as given however many came)."""
    clock = FakeClock()
    windows = RefusalWindows(clock)
    error = QuotaExceeded("t", "requests_per_second", 1, "over", retry_after=1.0)
    lengths = [windows.opened("k", error, 1.0) for _ in range(40)]
    assert lengths[:17] == [1.0] * 17 and lengths[-1] == 4.0
