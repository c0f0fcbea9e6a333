"""What every SQL store shares: an engine, a clock, and transactions with retries."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine

from ..clock import Clock
from .engine import capabilities, run_in_transaction_async

T = TypeVar("T")


class SqlStore:
    """Base of the per-aggregate stores.

    Every public method runs as one transaction through
    :func:`run_in_transaction_async`, so it is retried on SQLSTATE 40001 and
    must therefore compute only from what it reads and from arguments decided
    before the first try (``now`` is read once per call, before the
    transaction).
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock
        self.caps = capabilities(engine)

    async def _tx(self, fn: Callable[[Connection], T], *, idempotent: bool = False) -> T:
        return await run_in_transaction_async(self.engine, fn, clock=self.clock, idempotent=idempotent)
