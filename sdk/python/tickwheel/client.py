"""The hand-written Python client over the generated ``tickwheel.v1`` stubs.

:class:`Client` (blocking, ``grpc`` channel) and :class:`AsyncClient`
(``grpc.aio``) have the same methods: one per SchedulerService RPC, and one
per AdminService RPC on their ``admin`` facade. Each builds its request from
plain arguments (see ``tickwheel._calls``, where every method's contract is
written once), sends it with ``authorization: Bearer <credential>``, and
returns the response message unchanged. Failures raise
:class:`tickwheel.errors.TickwheelError`.

Retries: UNAVAILABLE (by default) is retried with exponential backoff and
full jitter, within the client's deadline, and only for calls that are safe
to repeat: reads, CreateJob and TriggerJob (a request id makes them
idempotent; the client generates one when you do not), and dry runs. Other
writes fail on the first error. ``create_jobs`` creates any number of jobs
through BatchCreateJobs, 1 000 per call, one ``CreateOutcome`` per job;
``update_jobs`` and ``delete_jobs`` do the same through BatchUpdateJobs and
BatchDeleteJobs (retried: versions make each change apply once).

>>> from tickwheel import Client, cron_job
>>> with Client("127.0.0.1:50051", api_key="...") as client:
...     job = client.create_job(cron_job("report", "0 2 * * *", "UTC", handler="echo")).job
...     for execution in client.iter_executions(job.id):
...         print(execution.id, execution.status)
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, overload

import grpc
import grpc.aio
from google.protobuf import field_mask_pb2
from google.protobuf.message import Message

from tickwheel import _calls, batch
from tickwheel._calls import Rpc
from tickwheel.batch import CreateOutcome, DeleteOutcome, UpdateOutcome
from tickwheel.errors import TickwheelError
from tickwheel.options import DEFAULT_RETRY, RetryOptions, TlsOptions
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, calendar_pb2, execution_pb2, job_pb2, scheduler_pb2, scheduler_pb2_grpc

__all__ = ["AsyncAdmin", "AsyncClient", "Admin", "Client"]

P = ParamSpec("P")
Resp = TypeVar("Resp", bound=Message)
Page = TypeVar("Page", bound=Message)

_USER_AGENT = "tickwheel-python"
_UNSET: Any = object()


# --- shared plumbing ------------------------------------------------------------


def _signature(rpc: Rpc[Any], build: Callable[..., Any]) -> inspect.Signature:
    """The builder's signature with the RPC's response as its return
    annotation: what ``help()`` and IDEs show for the client method. Worked
    out once per method when the class is made, never per call (it costs
    more than the call's own Python)."""
    return inspect.signature(build).replace(return_annotation=rpc.response)


def _describe(function: Any, name: str, owner: type, signature: inspect.Signature, doc: str | None) -> None:
    """Gives a bound RPC method the builder's docstring and signature, so
    ``help()`` and IDEs show the real contract."""
    function.__name__ = name
    function.__qualname__ = f"{owner.__name__}.{name}"
    function.__doc__ = doc
    function.__signature__ = signature


class _SyncUnary(Generic[P, Resp]):
    """A blocking client method: builds the request with ``build`` and sends
    it as ``rpc`` through the owner's ``_invoke``."""

    def __init__(self, rpc: Rpc[Resp], build: Callable[P, Message]) -> None:
        self.rpc = rpc
        self.build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.owner = owner
        self.signature = _signature(self.rpc, self.build)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _SyncUnary[P, Resp]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, Resp]: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        rpc, build, invoke = self.rpc, self.build, obj._invoke

        def method(*args: P.args, **kwargs: P.kwargs) -> Resp:
            return invoke(rpc, build(*args, **kwargs))

        _describe(method, self.name, self.owner, self.signature, build.__doc__)
        return method


class _AsyncUnary(Generic[P, Resp]):
    """An asyncio client method: as :class:`_SyncUnary`, awaited."""

    def __init__(self, rpc: Rpc[Resp], build: Callable[P, Message]) -> None:
        self.rpc = rpc
        self.build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.owner = owner
        self.signature = _signature(self.rpc, self.build)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _AsyncUnary[P, Resp]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, Awaitable[Resp]]: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        rpc, build, invoke = self.rpc, self.build, obj._invoke

        async def method(*args: P.args, **kwargs: P.kwargs) -> Resp:
            return await invoke(rpc, build(*args, **kwargs))

        _describe(method, self.name, self.owner, self.signature, build.__doc__)
        return method


def _retry_delay(
    retry: RetryOptions,
    rpc: Rpc[Any],
    request: Message,
    error: TickwheelError,
    attempt: int,
    remaining: float | None,
    rand: Callable[[], float] = random.random,
) -> float | None:
    """How long to wait before attempt ``attempt + 1``, or None to give up.

    Gives up when the status is not retryable, the call is not safe to
    repeat, the attempts are spent, or the wait would end past the deadline
    (``remaining`` seconds left; None means no deadline).
    """
    if error.code not in retry.retryable_codes or not rpc.idempotent(request):
        return None
    if attempt >= retry.max_attempts:
        return None
    delay = retry.backoff(attempt, rand)
    if remaining is not None and delay >= remaining:
        return None
    return delay


def _channel_options(
    tls: TlsOptions | None, retry: RetryOptions, extra: Sequence[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """Channel arguments: user agent, TLS name override, and reconnect
    backoff matched to the retry policy. gRPC fails calls at once while a
    channel waits out its reconnect backoff (default 1 s, growing to 120 s),
    so without this a retry after a server restart would fail without
    trying. ``extra`` overrides any of them."""
    options: dict[str, Any] = {
        "grpc.primary_user_agent": _USER_AGENT,
        "grpc.initial_reconnect_backoff_ms": max(int(retry.initial_backoff * 1000), 100),
        "grpc.min_reconnect_backoff_ms": max(int(retry.initial_backoff * 1000), 100),
        "grpc.max_reconnect_backoff_ms": max(int(retry.max_backoff * 1000), 100),
    }
    if tls is not None:
        options.update(tls.channel_options())
    options.update(extra)
    return list(options.items())


def _check_credential(name: str, value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or any(c in value for c in "\r\n\0") or value != value.strip():
        raise ValueError(f"{name} must be a single-line string without surrounding spaces")
    return value


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is not None and not timeout > 0:
        raise ValueError("timeout must be positive seconds, or None for no deadline")
    return timeout


class _Base:
    """State shared by both clients: address, credentials, deadline, retries."""

    _channel: Any

    def __init__(
        self,
        address: str,
        api_key: str | None,
        admin_token: str | None,
        timeout: float | None,
        retries: RetryOptions | int | None,
    ) -> None:
        if not address:
            raise ValueError("address is required (host:port)")
        self.address = address
        self._api_key = _check_credential("api_key", api_key)
        self._admin_token = _check_credential("admin_token", admin_token)
        self._timeout = _check_timeout(timeout)
        self._retry = RetryOptions.coerce(retries)
        self._owns_channel = True
        self._stubs: dict[str, Any] = {}

    @property
    def timeout(self) -> float | None:
        """Seconds each call may take in total, retries and waits included."""
        return self._timeout

    @property
    def retries(self) -> RetryOptions:
        """The retry options in force."""
        return self._retry

    def _bind(self, channel: Any) -> None:
        self._channel = channel
        self._stubs = {
            "scheduler": scheduler_pb2_grpc.SchedulerServiceStub(channel),
            "admin": admin_pb2_grpc.AdminServiceStub(channel),
        }

    def _metadata(self, service: str) -> tuple[tuple[str, str], ...]:
        token = self._api_key if service == "scheduler" else self._admin_token
        return (("authorization", f"Bearer {token}"),) if token else ()

    def _copy_with(self, timeout: Any, retries: Any) -> Any:
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._owns_channel = False
        if timeout is not _UNSET:
            clone._timeout = _check_timeout(timeout)
        if retries is not _UNSET:
            clone._retry = RetryOptions.coerce(retries)
        clone.admin = type(self.admin)(clone)  # type: ignore[attr-defined]
        return clone

    @staticmethod
    def _next_token(previous: str, page: Any) -> str:
        token = page.next_page_token
        if token and token == previous:
            raise RuntimeError("server returned the same page token twice; stopping")
        return token


# --- blocking client -----------------------------------------------------------------


class Admin:
    """AdminService, reached through ``Client.admin``. Calls carry the
    client's ``admin_token`` (no token: the server answers UNAUTHENTICATED; a
    tenant API key: PERMISSION_DENIED)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _invoke(self, rpc: Rpc[Resp], request: Message) -> Resp:
        return self._client._invoke(rpc, request)

    cluster_status = _SyncUnary(_calls.CLUSTER_STATUS, _calls.cluster_status)
    create_tenant = _SyncUnary(_calls.CREATE_TENANT, _calls.create_tenant)
    get_tenant = _SyncUnary(_calls.GET_TENANT, _calls.get_tenant)
    list_tenants = _SyncUnary(_calls.LIST_TENANTS, _calls.list_tenants)
    update_tenant = _SyncUnary(_calls.UPDATE_TENANT, _calls.update_tenant)
    pause_tenant = _SyncUnary(_calls.PAUSE_TENANT, _calls.pause_tenant)
    resume_tenant = _SyncUnary(_calls.RESUME_TENANT, _calls.resume_tenant)
    issue_api_key = _SyncUnary(_calls.ISSUE_API_KEY, _calls.issue_api_key)
    rotate_api_key = _SyncUnary(_calls.ROTATE_API_KEY, _calls.rotate_api_key)
    revoke_api_key = _SyncUnary(_calls.REVOKE_API_KEY, _calls.revoke_api_key)
    list_api_keys = _SyncUnary(_calls.LIST_API_KEYS, _calls.list_api_keys)
    issue_worker_credential = _SyncUnary(_calls.ISSUE_WORKER_CREDENTIAL, _calls.issue_worker_credential)
    revoke_worker_credential = _SyncUnary(_calls.REVOKE_WORKER_CREDENTIAL, _calls.revoke_worker_credential)
    list_worker_credentials = _SyncUnary(_calls.LIST_WORKER_CREDENTIALS, _calls.list_worker_credentials)
    search_jobs = _SyncUnary(_calls.SEARCH_JOBS, _calls.search_jobs)
    search_executions = _SyncUnary(_calls.SEARCH_EXECUTIONS, _calls.search_executions)
    drain_server = _SyncUnary(_calls.DRAIN_SERVER, _calls.drain_server)
    list_alerts = _SyncUnary(_calls.LIST_ALERTS, _calls.list_alerts)
    recompute_schedules = _SyncUnary(_calls.RECOMPUTE_SCHEDULES, _calls.recompute_schedules)

    def iter_tenants(self, *, page_size: int = 0) -> Iterator[admin_pb2.Tenant]:
        """Every tenant by name, fetching pages as needed."""
        for page in self._client.pages(self.list_tenants, page_size=page_size):
            yield from page.tenants

    def watch_alerts(
        self, *, kinds: Sequence[str | int] = (), tenant: str = "", include_open: bool = False
    ) -> Iterator[admin_pb2.WatchAlertsResponse]:
        """Alerts as they are raised and resolved, until you stop iterating
        (closing the iterator cancels the stream). ``include_open`` first
        sends every open alert. No deadline and no retry: a dropped stream
        raises ``TickwheelError`` (UNAVAILABLE) and the caller reconnects."""
        request = _calls.watch_alerts(kinds=kinds, tenant=tenant, include_open=include_open)
        client = self._client
        call = client._stubs["admin"].WatchAlerts(request, metadata=client._metadata("admin"))
        try:
            yield from call
        except grpc.RpcError as error:
            raise TickwheelError.from_rpc_error(error) from error
        finally:
            call.cancel()


class Client(_Base):
    """A blocking client for one Tickwheel server address.

    Args:
        address: ``host:port`` of any server (``127.0.0.1:50051`` for
            ``tickwheel dev``).
        api_key: the tenant API key sent on SchedulerService calls; None sends
            no credential (the server answers UNAUTHENTICATED).
        admin_token: the admin credential sent on ``client.admin`` calls.
        tls: TLS options; None connects in plaintext.
        timeout: seconds each call may take in total, retries and their
            waits included (default 10); None means no deadline.
        retries: :class:`RetryOptions`, or an int number of retries after the
            first attempt (0 or None disables them).
        channel_options: extra gRPC channel arguments.
        sleep: how the client waits between retries (for tests and
            instrumentation).

    The client owns its channel: use it as a context manager or call
    :meth:`close`. It is safe to share between threads.
    """

    def __init__(
        self,
        address: str,
        api_key: str | None = None,
        *,
        admin_token: str | None = None,
        tls: TlsOptions | None = None,
        timeout: float | None = 10.0,
        retries: RetryOptions | int | None = DEFAULT_RETRY,
        channel_options: Sequence[tuple[str, Any]] = (),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(address, api_key, admin_token, timeout, retries)
        self._sleep = sleep
        options = _channel_options(tls, self._retry, channel_options)
        if tls is None:
            channel = grpc.insecure_channel(address, options=options)
        else:
            channel = grpc.secure_channel(address, tls.channel_credentials(), options=options)
        self._bind(channel)
        self.admin = Admin(self)

    def close(self) -> None:
        """Closes the channel. Copies made by :meth:`with_options` share it and
        do nothing on close."""
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def with_options(self, *, timeout: float | None = _UNSET, retries: RetryOptions | int | None = _UNSET) -> Client:
        """A copy sharing this client's channel and credentials with another
        ``timeout`` and/or ``retries``, e.g. ``client.with_options(timeout=120)``."""
        return self._copy_with(timeout, retries)

    def _invoke(self, rpc: Rpc[Resp], request: Message) -> Resp:
        """Sends ``request`` as ``rpc``, retrying as ``RetryOptions`` and the
        RPC's idempotency allow, within the client's deadline."""
        method = getattr(self._stubs[rpc.service], rpc.method)
        metadata = self._metadata(rpc.service)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        attempt = 1
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            try:
                return method(request, timeout=remaining, metadata=metadata)
            except grpc.RpcError as rpc_error:
                error = TickwheelError.from_rpc_error(rpc_error)
                left = None if deadline is None else deadline - time.monotonic()
                delay = _retry_delay(self._retry, rpc, request, error, attempt, left)
                if delay is None:
                    raise error from rpc_error
            self._sleep(delay)
            attempt += 1

    def create_jobs(
        self,
        jobs: Iterable[job_pb2.Job],
        request_ids: Sequence[str | None] | None = None,
        *,
        batch_size: int = batch.MAX_BATCH_ITEMS,
        view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED,
    ) -> list[CreateOutcome]:
        """Creates ``jobs`` through BatchCreateJobs, ``batch_size`` (at most
        1 000) per call, one call after the other, and returns one
        :class:`~tickwheel.batch.CreateOutcome` per job, in order: the job
        (``created`` False when its request id had been seen) or the error
        CreateJob would have raised for it (``field_violations`` relative to
        the item). A bad job does not fail the others.

        ``request_ids`` (one per job; None entries get a uuid4) makes a rerun
        of the program idempotent; each id is chosen once and kept across the
        retries of its call. Each call is retried on UNAVAILABLE like
        ``create_job``, within the client's deadline. A call that still fails
        raises ``TickwheelError``: the calls before it were applied, and
        calling again with the same request ids is safe. So is the
        ``TickwheelError`` (INTERNAL) raised when the server answers another
        number of results than items.

        ``view`` ``JOB_VIEW_BASIC`` answers each job with its identity and
        state only (no payload). A call whose answer would be too large for
        the client is refused by the server, nothing written, and sent
        again as two halves (:func:`~tickwheel.batch.halves`)."""
        requests = batch.plan(jobs, request_ids, batch_size=batch_size, view=view)
        return self._batches(_calls.BATCH_CREATE_JOBS, requests, batch.outcomes)

    def update_jobs(
        self,
        changes: Iterable[job_pb2.Job | scheduler_pb2.UpdateJobRequest],
        update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None,
        *,
        batch_size: int = batch.MAX_BATCH_ITEMS,
        view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED,
    ) -> list[UpdateOutcome]:
        """Changes any number of jobs through BatchUpdateJobs, ``batch_size``
        (at most 1 000) per call, one call after the other, and returns one
        :class:`~tickwheel.batch.UpdateOutcome` per change, in order: the
        job as stored, or the error UpdateJob would have raised for it
        (a bad change does not fail the others). A change is a ``Job`` with
        ``id``, the ``version`` last read and the new values of
        ``update_mask`` (None: every mutable field), or an
        ``UpdateJobRequest``. Changes are applied in order: a job named
        twice sees the first change (and its new version).

        Each call is retried on UNAVAILABLE within the client's deadline:
        the versions make a change apply once, and a change a lost attempt
        applied then answers FAILED_PRECONDITION (read the job to tell). A
        call that still fails raises ``TickwheelError``: the calls before
        it were applied. ``view`` and a call whose answer would be too large:
        as :meth:`create_jobs`."""
        requests = batch.plan_updates(changes, update_mask, batch_size=batch_size, view=view)
        return self._batches(_calls.BATCH_UPDATE_JOBS, requests, batch.update_outcomes)

    def _batches(self, rpc: Rpc, requests: list, outcomes_of: Callable) -> list:
        """The outcomes of ``requests`` sent as ``rpc`` one after the other,
        a request refused for the size of its answer sent again as two
        halves (nothing of it was written)."""
        out: list = []
        pending = requests[::-1]
        while pending:
            request = pending.pop()
            try:
                response = self._invoke(rpc, request)
            except TickwheelError as error:
                if not batch.answer_too_large(error, request):
                    raise
                pending += batch.halves(request)[::-1]
                continue
            out.extend(outcomes_of(request, response))
        return out

    def delete_jobs(
        self,
        job_ids: Iterable[str],
        versions: Sequence[int] | None = None,
        *,
        batch_size: int = batch.MAX_BATCH_ITEMS,
    ) -> list[DeleteOutcome]:
        """Deletes any number of jobs through BatchDeleteJobs, ``batch_size``
        (at most 1 000) per call, and returns one
        :class:`~tickwheel.batch.DeleteOutcome` per id, in order: deleted
        (with ``canceled_executions``) or the error DeleteJob would have
        raised (NOT_FOUND for an unknown id, one named twice, or another
        tenant's; FAILED_PRECONDITION when a non-zero ``versions`` entry is
        stale). Retried on UNAVAILABLE: a job a lost attempt deleted then
        answers NOT_FOUND. A call that still fails raises
        ``TickwheelError``: the calls before it were applied."""
        out: list[DeleteOutcome] = []
        for request in batch.plan_deletes(job_ids, versions, batch_size=batch_size):
            response = self._invoke(_calls.BATCH_DELETE_JOBS, request)
            out.extend(batch.delete_outcomes(request, response))
        return out

    def pages(self, list_method: Callable[..., Page], /, **kwargs: Any) -> Iterator[Page]:
        """Every page of a list method (``client.list_jobs``,
        ``client.admin.search_jobs``, ...) called with ``kwargs``, following
        ``next_page_token`` until it is empty."""
        token = kwargs.pop("page_token", "")
        while True:
            page = list_method(page_token=token, **kwargs)
            yield page
            token = self._next_token(token, page)
            if not token:
                return

    # SchedulerService
    create_job = _SyncUnary(_calls.CREATE_JOB, _calls.create_job)
    batch_create_jobs = _SyncUnary(_calls.BATCH_CREATE_JOBS, _calls.batch_create_jobs)
    batch_update_jobs = _SyncUnary(_calls.BATCH_UPDATE_JOBS, _calls.batch_update_jobs)
    batch_delete_jobs = _SyncUnary(_calls.BATCH_DELETE_JOBS, _calls.batch_delete_jobs)
    batch_pause_jobs = _SyncUnary(_calls.BATCH_PAUSE_JOBS, _calls.batch_pause_jobs)
    batch_resume_jobs = _SyncUnary(_calls.BATCH_RESUME_JOBS, _calls.batch_resume_jobs)
    get_job = _SyncUnary(_calls.GET_JOB, _calls.get_job)
    list_jobs = _SyncUnary(_calls.LIST_JOBS, _calls.list_jobs)
    update_job = _SyncUnary(_calls.UPDATE_JOB, _calls.update_job)
    preview_update = _SyncUnary(_calls.PREVIEW_UPDATE, _calls.preview_update)
    list_job_revisions = _SyncUnary(_calls.LIST_JOB_REVISIONS, _calls.list_job_revisions)
    delete_job = _SyncUnary(_calls.DELETE_JOB, _calls.delete_job)
    pause_job = _SyncUnary(_calls.PAUSE_JOB, _calls.pause_job)
    resume_job = _SyncUnary(_calls.RESUME_JOB, _calls.resume_job)
    trigger_job = _SyncUnary(_calls.TRIGGER_JOB, _calls.trigger_job)
    backfill_job = _SyncUnary(_calls.BACKFILL_JOB, _calls.backfill_job)
    preview_schedule = _SyncUnary(_calls.PREVIEW_SCHEDULE, _calls.preview_schedule)
    get_execution = _SyncUnary(_calls.GET_EXECUTION, _calls.get_execution)
    list_executions = _SyncUnary(_calls.LIST_EXECUTIONS, _calls.list_executions)
    cancel_execution = _SyncUnary(_calls.CANCEL_EXECUTION, _calls.cancel_execution)
    list_dead_letters = _SyncUnary(_calls.LIST_DEAD_LETTERS, _calls.list_dead_letters)
    replay_dead_letter = _SyncUnary(_calls.REPLAY_DEAD_LETTER, _calls.replay_dead_letter)
    create_calendar = _SyncUnary(_calls.CREATE_CALENDAR, _calls.create_calendar)
    get_calendar = _SyncUnary(_calls.GET_CALENDAR, _calls.get_calendar)
    list_calendars = _SyncUnary(_calls.LIST_CALENDARS, _calls.list_calendars)
    update_calendar = _SyncUnary(_calls.UPDATE_CALENDAR, _calls.update_calendar)
    delete_calendar = _SyncUnary(_calls.DELETE_CALENDAR, _calls.delete_calendar)

    def iter_jobs(self, **kwargs: Any) -> Iterator[job_pb2.Job]:
        """Every job :meth:`list_jobs` would list with ``kwargs``, across pages."""
        for page in self.pages(self.list_jobs, **kwargs):
            yield from page.jobs

    def iter_executions(self, job_id: str, **kwargs: Any) -> Iterator[execution_pb2.Execution]:
        """A job's whole history, newest first, across pages (``kwargs`` as
        :meth:`list_executions`)."""
        for page in self.pages(self.list_executions, job_id=job_id, **kwargs):
            yield from page.executions

    def iter_dead_letters(self, **kwargs: Any) -> Iterator[execution_pb2.Execution]:
        """Every dead execution, newest first, across pages."""
        for page in self.pages(self.list_dead_letters, **kwargs):
            yield from page.executions

    def iter_calendars(self, **kwargs: Any) -> Iterator[calendar_pb2.Calendar]:
        """Every calendar :meth:`list_calendars` would list, across pages (without their dates)."""
        for page in self.pages(self.list_calendars, **kwargs):
            yield from page.calendars


# --- asyncio client -------------------------------------------------------------------


class AsyncAdmin:
    """AdminService, reached through ``AsyncClient.admin``: as :class:`Admin`,
    each method awaited."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def _invoke(self, rpc: Rpc[Resp], request: Message) -> Resp:
        return await self._client._invoke(rpc, request)

    cluster_status = _AsyncUnary(_calls.CLUSTER_STATUS, _calls.cluster_status)
    create_tenant = _AsyncUnary(_calls.CREATE_TENANT, _calls.create_tenant)
    get_tenant = _AsyncUnary(_calls.GET_TENANT, _calls.get_tenant)
    list_tenants = _AsyncUnary(_calls.LIST_TENANTS, _calls.list_tenants)
    update_tenant = _AsyncUnary(_calls.UPDATE_TENANT, _calls.update_tenant)
    pause_tenant = _AsyncUnary(_calls.PAUSE_TENANT, _calls.pause_tenant)
    resume_tenant = _AsyncUnary(_calls.RESUME_TENANT, _calls.resume_tenant)
    issue_api_key = _AsyncUnary(_calls.ISSUE_API_KEY, _calls.issue_api_key)
    rotate_api_key = _AsyncUnary(_calls.ROTATE_API_KEY, _calls.rotate_api_key)
    revoke_api_key = _AsyncUnary(_calls.REVOKE_API_KEY, _calls.revoke_api_key)
    list_api_keys = _AsyncUnary(_calls.LIST_API_KEYS, _calls.list_api_keys)
    issue_worker_credential = _AsyncUnary(_calls.ISSUE_WORKER_CREDENTIAL, _calls.issue_worker_credential)
    revoke_worker_credential = _AsyncUnary(_calls.REVOKE_WORKER_CREDENTIAL, _calls.revoke_worker_credential)
    list_worker_credentials = _AsyncUnary(_calls.LIST_WORKER_CREDENTIALS, _calls.list_worker_credentials)
    search_jobs = _AsyncUnary(_calls.SEARCH_JOBS, _calls.search_jobs)
    search_executions = _AsyncUnary(_calls.SEARCH_EXECUTIONS, _calls.search_executions)
    drain_server = _AsyncUnary(_calls.DRAIN_SERVER, _calls.drain_server)
    list_alerts = _AsyncUnary(_calls.LIST_ALERTS, _calls.list_alerts)
    recompute_schedules = _AsyncUnary(_calls.RECOMPUTE_SCHEDULES, _calls.recompute_schedules)

    async def iter_tenants(self, *, page_size: int = 0) -> AsyncIterator[admin_pb2.Tenant]:
        """Every tenant by name, fetching pages as needed."""
        async for page in self._client.pages(self.list_tenants, page_size=page_size):
            for tenant in page.tenants:
                yield tenant

    async def watch_alerts(
        self, *, kinds: Sequence[str | int] = (), tenant: str = "", include_open: bool = False
    ) -> AsyncIterator[admin_pb2.WatchAlertsResponse]:
        """As :meth:`Admin.watch_alerts`; closing the async iterator (or
        cancelling the task) cancels the stream."""
        request = _calls.watch_alerts(kinds=kinds, tenant=tenant, include_open=include_open)
        client = self._client
        call = client._stubs["admin"].WatchAlerts(request, metadata=client._metadata("admin"))
        try:
            async for item in call:
                yield item
        except grpc.RpcError as error:
            raise TickwheelError.from_rpc_error(error) from error
        finally:
            call.cancel()


class AsyncClient(_Base):
    """The asyncio client: the same constructor and methods as
    :class:`Client`, each method a coroutine. Create it inside the event loop
    that uses it; close it with ``await client.close()`` or ``async with``.
    ``sleep`` defaults to ``asyncio.sleep``."""

    def __init__(
        self,
        address: str,
        api_key: str | None = None,
        *,
        admin_token: str | None = None,
        tls: TlsOptions | None = None,
        timeout: float | None = 10.0,
        retries: RetryOptions | int | None = DEFAULT_RETRY,
        channel_options: Sequence[tuple[str, Any]] = (),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(address, api_key, admin_token, timeout, retries)
        self._sleep = sleep
        options = _channel_options(tls, self._retry, channel_options)
        if tls is None:
            channel = grpc.aio.insecure_channel(address, options=options)
        else:
            channel = grpc.aio.secure_channel(address, tls.channel_credentials(), options=options)
        self._bind(channel)
        self.admin = AsyncAdmin(self)

    async def close(self) -> None:
        """Closes the channel (copies from :meth:`with_options` do nothing)."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def with_options(self, *, timeout: float | None = _UNSET, retries: RetryOptions | int | None = _UNSET) -> AsyncClient:
        """As :meth:`Client.with_options`."""
        return self._copy_with(timeout, retries)

    async def _invoke(self, rpc: Rpc[Resp], request: Message) -> Resp:
        """As :meth:`Client._invoke`, without blocking the event loop."""
        method = getattr(self._stubs[rpc.service], rpc.method)
        metadata = self._metadata(rpc.service)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        attempt = 1
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            try:
                return await method(request, timeout=remaining, metadata=metadata)
            except grpc.RpcError as rpc_error:
                error = TickwheelError.from_rpc_error(rpc_error)
                left = None if deadline is None else deadline - time.monotonic()
                delay = _retry_delay(self._retry, rpc, request, error, attempt, left)
                if delay is None:
                    raise error from rpc_error
            await self._sleep(delay)
            attempt += 1

    async def create_jobs(
        self,
        jobs: Iterable[job_pb2.Job],
        request_ids: Sequence[str | None] | None = None,
        *,
        batch_size: int = batch.MAX_BATCH_ITEMS,
        view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED,
    ) -> list[CreateOutcome]:
        """As :meth:`Client.create_jobs`, awaited (the calls one after the other)."""
        requests = batch.plan(jobs, request_ids, batch_size=batch_size, view=view)
        return await self._batches(_calls.BATCH_CREATE_JOBS, requests, batch.outcomes)

    async def update_jobs(
        self,
        changes: Iterable[job_pb2.Job | scheduler_pb2.UpdateJobRequest],
        update_mask: Sequence[str] | field_mask_pb2.FieldMask | None = None,
        *,
        batch_size: int = batch.MAX_BATCH_ITEMS,
        view: int = scheduler_pb2.JOB_VIEW_UNSPECIFIED,
    ) -> list[UpdateOutcome]:
        """As :meth:`Client.update_jobs`, awaited (the calls one after the other)."""
        requests = batch.plan_updates(changes, update_mask, batch_size=batch_size, view=view)
        return await self._batches(_calls.BATCH_UPDATE_JOBS, requests, batch.update_outcomes)

    async def _batches(self, rpc: Rpc, requests: list, outcomes_of: Callable) -> list:
        """As :meth:`Client._batches`, awaited."""
        out: list = []
        pending = requests[::-1]
        while pending:
            request = pending.pop()
            try:
                response = await self._invoke(rpc, request)
            except TickwheelError as error:
                if not batch.answer_too_large(error, request):
                    raise
                pending += batch.halves(request)[::-1]
                continue
            out.extend(outcomes_of(request, response))
        return out

    async def delete_jobs(
        self,
        job_ids: Iterable[str],
        versions: Sequence[int] | None = None,
        *,
        batch_size: int = batch.MAX_BATCH_ITEMS,
    ) -> list[DeleteOutcome]:
        """As :meth:`Client.delete_jobs`, awaited (the calls one after the other)."""
        out: list[DeleteOutcome] = []
        for request in batch.plan_deletes(job_ids, versions, batch_size=batch_size):
            response = await self._invoke(_calls.BATCH_DELETE_JOBS, request)
            out.extend(batch.delete_outcomes(request, response))
        return out

    async def pages(self, list_method: Callable[..., Awaitable[Page]], /, **kwargs: Any) -> AsyncIterator[Page]:
        """As :meth:`Client.pages`, as an async iterator."""
        token = kwargs.pop("page_token", "")
        while True:
            page = await list_method(page_token=token, **kwargs)
            yield page
            token = self._next_token(token, page)
            if not token:
                return

    # SchedulerService
    create_job = _AsyncUnary(_calls.CREATE_JOB, _calls.create_job)
    batch_create_jobs = _AsyncUnary(_calls.BATCH_CREATE_JOBS, _calls.batch_create_jobs)
    batch_update_jobs = _AsyncUnary(_calls.BATCH_UPDATE_JOBS, _calls.batch_update_jobs)
    batch_delete_jobs = _AsyncUnary(_calls.BATCH_DELETE_JOBS, _calls.batch_delete_jobs)
    batch_pause_jobs = _AsyncUnary(_calls.BATCH_PAUSE_JOBS, _calls.batch_pause_jobs)
    batch_resume_jobs = _AsyncUnary(_calls.BATCH_RESUME_JOBS, _calls.batch_resume_jobs)
    get_job = _AsyncUnary(_calls.GET_JOB, _calls.get_job)
    list_jobs = _AsyncUnary(_calls.LIST_JOBS, _calls.list_jobs)
    update_job = _AsyncUnary(_calls.UPDATE_JOB, _calls.update_job)
    preview_update = _AsyncUnary(_calls.PREVIEW_UPDATE, _calls.preview_update)
    list_job_revisions = _AsyncUnary(_calls.LIST_JOB_REVISIONS, _calls.list_job_revisions)
    delete_job = _AsyncUnary(_calls.DELETE_JOB, _calls.delete_job)
    pause_job = _AsyncUnary(_calls.PAUSE_JOB, _calls.pause_job)
    resume_job = _AsyncUnary(_calls.RESUME_JOB, _calls.resume_job)
    trigger_job = _AsyncUnary(_calls.TRIGGER_JOB, _calls.trigger_job)
    backfill_job = _AsyncUnary(_calls.BACKFILL_JOB, _calls.backfill_job)
    preview_schedule = _AsyncUnary(_calls.PREVIEW_SCHEDULE, _calls.preview_schedule)
    get_execution = _AsyncUnary(_calls.GET_EXECUTION, _calls.get_execution)
    list_executions = _AsyncUnary(_calls.LIST_EXECUTIONS, _calls.list_executions)
    cancel_execution = _AsyncUnary(_calls.CANCEL_EXECUTION, _calls.cancel_execution)
    list_dead_letters = _AsyncUnary(_calls.LIST_DEAD_LETTERS, _calls.list_dead_letters)
    replay_dead_letter = _AsyncUnary(_calls.REPLAY_DEAD_LETTER, _calls.replay_dead_letter)
    create_calendar = _AsyncUnary(_calls.CREATE_CALENDAR, _calls.create_calendar)
    get_calendar = _AsyncUnary(_calls.GET_CALENDAR, _calls.get_calendar)
    list_calendars = _AsyncUnary(_calls.LIST_CALENDARS, _calls.list_calendars)
    update_calendar = _AsyncUnary(_calls.UPDATE_CALENDAR, _calls.update_calendar)
    delete_calendar = _AsyncUnary(_calls.DELETE_CALENDAR, _calls.delete_calendar)

    async def iter_jobs(self, **kwargs: Any) -> AsyncIterator[job_pb2.Job]:
        """As :meth:`Client.iter_jobs`."""
        async for page in self.pages(self.list_jobs, **kwargs):
            for job in page.jobs:
                yield job

    async def iter_executions(self, job_id: str, **kwargs: Any) -> AsyncIterator[execution_pb2.Execution]:
        """As :meth:`Client.iter_executions`."""
        async for page in self.pages(self.list_executions, job_id=job_id, **kwargs):
            for execution in page.executions:
                yield execution

    async def iter_dead_letters(self, **kwargs: Any) -> AsyncIterator[execution_pb2.Execution]:
        """As :meth:`Client.iter_dead_letters`."""
        async for page in self.pages(self.list_dead_letters, **kwargs):
            for execution in page.executions:
                yield execution

    async def iter_calendars(self, **kwargs: Any) -> AsyncIterator[calendar_pb2.Calendar]:
        """As :meth:`Client.iter_calendars`."""
        async for page in self.pages(self.list_calendars, **kwargs):
            for item in page.calendars:
                yield item

