"""What every elected duty of :mod:`tickwheel_server.maintenance` shares:
campaigning for its key, and sleeping until its next pass or its loss."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tickwheel.shared.clock import Clock

from ..lease import LeaseStore, LeaseStoreError, Ownership, Session

log = logging.getLogger(__name__)


async def campaign(
    leases: LeaseStore, key: str, server_id: str, session: Callable[[], Session], clock: Clock, *, retry: float = 1.0
) -> Ownership:
    """Block until this server holds ``key`` under its current session;
    a lease store error (no session yet, etcd unreachable) is tried again
    after ``retry`` seconds."""
    while True:
        try:
            return await leases.wait_acquire(key, server_id, session())
        except LeaseStoreError as error:
            log.debug("election of %s: %s; trying again", key, error)
            await clock.sleep(retry)


async def sleep_or(clock: Clock, seconds: float, event: asyncio.Event) -> None:
    """Sleep ``seconds`` of ``clock`` time, or until ``event`` is set."""
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        waiter.cancel()
