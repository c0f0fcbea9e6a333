"""The libpq options a store session starts with: JIT off on PostgreSQL, the
wait limits (``lock_timeout``, ``idle_in_transaction_session_timeout``)
the server asks for, the operator's own options kept (the idle limit only
where it is shorter: ours is a ceiling)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from sqlalchemy.engine import URL

from .errors import StoreConfigError

JIT_OFF = "-c jit=off"
"""What :func:`postgres_options` adds to a PostgreSQL session's startup options."""

LOCK_TIMEOUT = "lock_timeout"
IDLE_IN_TRANSACTION_TIMEOUT = "idle_in_transaction_session_timeout"


def _sets(options: str, name: str) -> bool:
    """Whether the libpq ``options`` string sets ``name`` itself (``-c name=…``,
    ``-cname=…``, ``--name=…``, any case)."""
    return re.search(rf"(?:^|\s)(?:-c\s*|--){re.escape(name)}\s*=", options, re.I) is not None


_TIME_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}


def setting_ms(value: str) -> float | None:
    """A time setting as PostgreSQL reads it (``90s``, ``1.5min``, ``500``:
    milliseconds without a unit), in milliseconds; None when it is not one
    this reads (quoted oddly, a unit it does not know)."""
    found = re.fullmatch(r"\s*'?\s*(\d+(?:\.\d*)?)\s*(us|ms|s|min|h|d)?\s*'?\s*", value.replace("\\", ""))
    return None if found is None else float(found.group(1)) * _TIME_UNITS_MS[found.group(2) or "ms"]


def _capped(options: str, name: str, ours: str) -> str:
    """``options`` with each setting of ``name`` longer than ``ours`` (a time,
    in :func:`wait_limits`' ``<n>ms``), 0 (no limit) or unreadable replaced by
    ``-c name=ours``; a shorter one kept."""
    limit = setting_ms(ours)

    def cap(match: re.Match) -> str:
        given = setting_ms(match.group(2))
        kept = given is not None and limit is not None and 0 < given <= limit
        return match.group(0) if kept else f"{match.group(1)}-c {name}={ours}"

    return re.sub(rf"(^|\s)(?:-c\s*|--){re.escape(name)}\s*=((?:\\.|\S)*)", cap, options, flags=re.I)


def session_options(
    url: URL, settings: Mapping[str, str], environ: Mapping[str, str] = os.environ, *, ceilings: frozenset[str] = frozenset()
) -> str:
    """The libpq ``options`` a session of ``url`` starts with: the URL's own
    ``options`` (else ``PGOPTIONS`` from ``environ``, which libpq would read
    only when none is given) with ``-c name=value`` added for each of
    ``settings`` they do not set themselves (the operator's wins), except
    that a setting named in ``ceilings`` is at most ours: the operator's
    replaced where it is longer (or 0, or unreadable). A connect-time option
    costs no statement, and binds the session before its first one."""
    given = url.query.get("options")
    if given is None:
        base = environ.get("PGOPTIONS", "")
    else:
        base = " ".join(given) if isinstance(given, tuple) else given
    for name in ceilings & settings.keys():
        base = _capped(base, name, settings[name])
    added = [f"-c {name}={value}" for name, value in settings.items() if not _sets(base, name)]
    return " ".join([base, *added]).strip()


def postgres_options(url: URL, environ: Mapping[str, str] = os.environ) -> str:
    """:func:`session_options` with :data:`JIT_OFF` alone: JIT off, unless
    the URL's options (or ``PGOPTIONS``) set ``jit`` themselves (an
    operator's ``?options=-c%20jit%3Don`` turns it back on).

    JIT off: the store's statements are short and many; priced over a
    large table's estimates, a plan passes ``jit_above_cost`` and compiling
    it costs more than running it (``loadtest/RESULTS.md``). CockroachDB
    has no ``jit`` setting: its sessions never get this."""
    return session_options(url, {"jit": "off"}, environ)


def wait_limits(lock_timeout: float | None, idle_in_transaction_timeout: float | None) -> dict[str, str]:
    """The session settings that bound how long a session waits for a lock
    and may sit idle inside a transaction, in whole milliseconds (at least
    1); a limit None or 0 is left to the database (its role's, database's
    or server's setting). :class:`StoreConfigError` for a negative one."""
    limits: dict[str, str] = {}
    for name, seconds in ((LOCK_TIMEOUT, lock_timeout), (IDLE_IN_TRANSACTION_TIMEOUT, idle_in_transaction_timeout)):
        if seconds is None or seconds == 0:
            continue
        if not seconds > 0:
            raise StoreConfigError(f"{name} must be > 0 seconds (or 0: the database's own), not {seconds!r}")
        limits[name] = f"{max(1, round(seconds * 1000))}ms"
    return limits
