"""``on_each_backend`` (tests/support/server.py), which runs a minute-long
integration case on both backends at once: it passes only when the case
passed on every backend, names the backend of each failure, and lets a case
run to its end when the other failed."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.server import on_each_backend

SERVERS = {"embedded": "sqlite server", "postgres+etcd": "postgres server"}


async def test_the_cases_run_at_once_and_pass_when_each_passed() -> None:
    started: list[str] = []
    both = asyncio.Event()

    async def case(server: str) -> None:
        started.append(server)
        if len(started) == len(SERVERS):
            both.set()
        await asyncio.wait_for(both.wait(), 5)  # each waits for the other: at once, not one after the other

    await on_each_backend(SERVERS, case)
    assert sorted(started) == sorted(SERVERS.values())


async def test_a_failure_on_one_backend_fails_it_named_and_the_other_runs_to_its_end() -> None:
    ended: list[str] = []

    async def case(server: str) -> None:
        if server == "postgres server":
            raise AssertionError("N2 did not run")
        await asyncio.sleep(0.05)  # still running when the other failed
        ended.append(server)

    with pytest.raises(BaseExceptionGroup) as raised:
        await on_each_backend(SERVERS, case)
    [failure] = raised.value.exceptions
    assert isinstance(failure, AssertionError) and failure.__notes__ == ["on the postgres+etcd backend"]
    assert ended == ["sqlite server"]


async def test_failures_on_both_backends_are_both_reported() -> None:
    async def case(server: str) -> None:
        raise AssertionError(server)

    with pytest.raises(BaseExceptionGroup) as raised:
        await on_each_backend(SERVERS, case)
    assert [(str(e), e.__notes__) for e in raised.value.exceptions] == [
        ("sqlite server", ["on the embedded backend"]), ("postgres server", ["on the postgres+etcd backend"]),
    ]
