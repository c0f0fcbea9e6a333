"""Logging a server component's failures by what they are: an outage of
the store or of etcd that the component rides out, or a defect.

The lines themselves (one WARNING when an outage begins, ``still
failing`` after a minute, then after gaps doubling up to 15 minutes, one
INFO at its end, a traceback for a defect) are
:class:`tickwheel.shared.outages.OutageLog`'s, which the worker uses too;
:class:`OutageLog` here is that log knowing the server's outages.

What counts as an outage (:func:`outage_of`): the store's
:class:`~tickwheel_server.store.errors.StoreUnavailableError` (and an
ambiguous commit, which only a broken connection causes), etcd's
:class:`~tickwheel_server.lease.types.LeaseStoreUnavailable` and a lost
session, a refused, reset or closed connection, and a driver error the
driver itself marks as a lost connection.
"""

from __future__ import annotations

import logging

from tickwheel.shared import outages as shared
from tickwheel.shared.outages import STILL_AT_MOST, STILL_EVERY, one_line

from ..lease.types import LeaseStoreUnavailable, SessionLost
from ..store.errors import AmbiguousCommitError, StoreUnavailableError

__all__ = ["STILL_AT_MOST", "STILL_EVERY", "OutageLog", "log_failure", "one_line", "outage_of"]


def outage_of(error: BaseException) -> str | None:
    """``"store"``, ``"etcd"`` or ``"connection"`` when ``error`` (or what it
    was raised from) is a known outage; ``None`` for anything else."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (StoreUnavailableError, AmbiguousCommitError)):
            return "store"
        if isinstance(current, (LeaseStoreUnavailable, SessionLost)):
            return "etcd"
        if isinstance(current, (ConnectionError, EOFError)):
            return "connection"
        if getattr(current, "connection_invalidated", False):  # SQLAlchemy's DBAPIError: the driver lost it
            return "store"
        current = current.__cause__ or current.__context__
    return None


def log_failure(logger: logging.Logger, what: str, error: BaseException, *, then: str = "retrying") -> None:
    """One failure outside a loop's pass: a known outage as one WARNING line
    (``what``, the outage, the error's first line), anything else as ERROR
    with its traceback."""
    kind = outage_of(error)
    if kind is None:
        logger.error("%s; %s", what, then, exc_info=error)
    else:
        logger.warning("%s, %s unavailable: %s; %s", what, kind, one_line(error), then)


class OutageLog(shared.OutageLog):
    """:class:`tickwheel.shared.outages.OutageLog` of a server component:
    its outages are :func:`outage_of`'s."""

    def __init__(
        self, logger: logging.Logger, component: str, clock: shared.Monotonic, *, every: float = STILL_EVERY,
        then: str = "retrying",
    ) -> None:
        super().__init__(logger, component, clock, kind_of=outage_of, every=every, then=then)
