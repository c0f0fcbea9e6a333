"""A scripted SchedulerService + AdminService on a real in-process gRPC
server (127.0.0.1:0), for SDK and CLI tests.

Every call is recorded (method, request, metadata) and checked for the
right ``authorization: Bearer`` credential (UNAUTHENTICATED otherwise, as
the real server does). Each method answers from a script: queued outcomes
first (``fake.script("GetJob", failure(...), response)``), then a standing
reply (``fake.reply("GetJob", response)``), and UNIMPLEMENTED when neither
is set, as an unbuilt server RPC would. An outcome is a response message, a
:func:`failure` (a status with optional BadRequest field violations, sent
with ``abort_with_status`` so the ``grpc-status-details-bin`` trailer is
real), or a callable ``(request, context) -> outcome``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from tickwheel.v1 import admin_pb2_grpc, scheduler_pb2_grpc

API_KEY = "tw_test_tenant_key"
ADMIN_TOKEN = "tw_test_admin_token"


@dataclass(frozen=True)
class Recorded:
    service: str
    method: str
    request: Any
    metadata: dict[str, str]


@dataclass(frozen=True)
class Failure:
    status: grpc.Status


def failure(code: grpc.StatusCode, message: str, violations: Iterable[tuple[str, str]] = ()) -> Failure:
    """A failed call: ``code`` and ``message``, with a google.rpc.BadRequest
    holding ``violations`` (field, description) when any are given."""
    status = status_pb2.Status(code=code.value[0], message=message)
    violations = list(violations)
    if violations:
        detail = any_pb2.Any()
        detail.Pack(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=f, description=d) for f, d in violations
                ]
            )
        )
        status.details.append(detail)
    return Failure(rpc_status.to_status(status))


class _Servicer:
    """Answers every method of one service through ``FakeTickwheel.handle``."""

    def __init__(self, fake: FakeTickwheel, service: str) -> None:
        self._fake = fake
        self._service = service

    def __getattr__(self, method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda request, context: self._fake.handle(self._service, method, request, context)


class FakeTickwheel:
    """See the module docstring. Use as a context manager or start/stop."""

    STREAMING = frozenset({"WatchAlerts"})

    def __init__(self, api_key: str = API_KEY, admin_token: str = ADMIN_TOKEN, port: int = 0) -> None:
        self.api_key = api_key
        self.admin_token = admin_token
        self.calls: list[Recorded] = []
        self._scripts: dict[str, deque[Any]] = {}
        self._replies: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4))
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(_Servicer(self, "scheduler"), self._server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(_Servicer(self, "admin"), self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self.address = f"127.0.0.1:{self.port}"

    def start(self) -> FakeTickwheel:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None).wait(5)

    def __enter__(self) -> FakeTickwheel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # scripting -------------------------------------------------------------

    def reply(self, method: str, outcome: Any) -> None:
        """The standing answer of ``method`` once its script is used up."""
        self._replies[method] = outcome

    def script(self, method: str, *outcomes: Any) -> None:
        """Answers for the next calls of ``method``, in order."""
        self._scripts.setdefault(method, deque()).extend(outcomes)

    def requests(self, method: str) -> list[Any]:
        """The requests ``method`` received, in order."""
        return [c.request for c in self.calls if c.method == method]

    # serving ---------------------------------------------------------------

    def handle(self, service: str, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        metadata = {key: value for key, value in context.invocation_metadata()}
        with self._lock:
            self.calls.append(Recorded(service, method, request, metadata))
            queue = self._scripts.get(method)
            outcome = queue.popleft() if queue else self._replies.get(method)
        expected = self.api_key if service == "scheduler" else self.admin_token
        if metadata.get("authorization") != f"Bearer {expected}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or unknown credential")
        if callable(outcome):
            outcome = outcome(request, context)
        if outcome is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"Method {method} not implemented")
        if isinstance(outcome, Failure):
            context.abort_with_status(outcome.status)
        if method in self.STREAMING:
            return iter(outcome)
        return outcome
