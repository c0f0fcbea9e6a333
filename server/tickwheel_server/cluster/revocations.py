"""A revoked credential refused, and a tenant's changed settings applied, on
every server at once: the server that made the change tells the others
through the lease store.

Each server caches verified credentials for the authenticator's cache time
and re-verifies its open Pull streams every half of it; without word from
the revoking server, a revoked API key or worker credential would keep
working elsewhere for that long. So after the store committed a revocation
(RevokeApiKey, RevokeWorkerCredential, and RotateApiKey, whose old key's
expiry moved), the server that did it calls :meth:`Revocations.announce`
with what the store read (:class:`~tickwheel_server.auth.authenticator.Revoked`:
the kind, the credential's id and its tenant), and puts it on the cluster's
one revocations key (:func:`~tickwheel_server.lease.keys.revocations_key`).
A tenant's settings changed (UpdateTenant, PauseTenant, ResumeTenant) are
told the same way: the word ``tnt <tenant>`` (a
:class:`~tickwheel_server.auth.authenticator.Revoked` of kind
:data:`~tickwheel_server.auth.authenticator.TENANT_CHANGED`) names the
tenant the store read back after the change, and evicts every cached
principal of that tenant's API keys, which carry its request rate and
payload quota. Every server watches that key (:meth:`Revocations.follow`);
each put:

* evicts the named credentials from its authenticator's cache
  (:meth:`Authenticator.forget_revoked
  <tickwheel_server.auth.authenticator.Authenticator.forget_revoked>`: one
  look-up each, and only a principal of that kind and tenant; for a tenant,
  its API keys' principals), so the next call with one is verified in the
  store and refused, or given the tenant's settings as they are now;
* re-verifies, in one store read, the open streams of the worker
  credentials named (:meth:`CredentialWatch.check_once
  <tickwheel_server.gateway.revocation.CredentialWatch.check_once>` with
  their ids), which ends those revoked. A put never ends a stream by
  itself: the store says whether the credential is revoked.

Nothing is trusted but the store: a put names what the revoking server read
back from the row it revoked, never the request; an entry naming a
credential with another tenant evicts nothing; a tenant word evicts that
tenant's principals only (what anyone who can put ``*`` may do anyway);
a put that cannot be read (malformed, too long, of a newer format, or with
a kind this server does not know) is taken as "all": the cache is emptied
and every open stream re-verified, which only costs store reads. So a
server older than the tenant word (it knew ``twk`` and ``tww`` only) takes
a put carrying one as "all": no worse than ``*``.

Bounded: one key for the cluster, whatever the number of credentials (no
key per credential, no lease). A server has one put in flight;
announcements made meanwhile are merged into the next, which carries at
most ``max_entries`` of them and beyond that says "all" instead (a handful
of bytes). What a server adds to etcd's history is budgeted in bytes
(each put's value plus :data:`PUT_OVERHEAD` for its revision): at most
``burst`` at once and ``rate`` a second after that; over it, the next put
waits (merging what comes meanwhile). An operator revoking one credential
after another is never held up (a put of one entry is a hundred bytes or
so); however many revocations an operator, or a leaked admin token,
makes, etcd's history grows by at most ``rate`` bytes a second per server,
and a receiving server evicts one cache entry per entry and reads the
store once per put for its streams.

When the word is lost, today's bounds hold: a revocation whose put fails
(etcd cut from the revoking server) takes effect elsewhere within the cache
time, and streams end within the re-verification period. A watch carries
on from the revision after the last one it delivered; whenever the watch
is established again (after a store error, a compaction past it) the
cache is emptied and every open stream re-verified, as revocations put
meanwhile may not be delivered.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Collection

from tickwheel.shared.backoff import BackoffSleeper, kept_running
from tickwheel.shared.clock import Clock

from ..auth import tokens
from ..auth.authenticator import TENANT_CHANGED, Revoked
from ..lease import EventType, LeaseStore, LeaseStoreClosed, LeaseStoreError, SessionLost, WatchCompacted
from ..lease.keys import revocations_key
from ..telemetry.outages import OutageLog

log = logging.getLogger(__name__)

VERSION = "v1"
"""The first word of a put's value (then the sender's server id)."""
ALL = "*"
"""An entry that stands for every credential (too many to name in one put)."""
DEFAULT_RATE = 32 * 1024
"""Bytes a second a server may add to etcd's history with its puts (values and overheads)."""
DEFAULT_BURST = 64 * 1024
"""Bytes a server may add at once, before :data:`DEFAULT_RATE` holds it back."""
PUT_OVERHEAD = 256
"""Bytes counted for a put beyond its value: the key, the revision's record in etcd."""
DEFAULT_MAX_ENTRIES = 32
"""Credentials named in one put; more are sent as :data:`ALL`."""
DEFAULT_WAIT = 2.0
"""Seconds :meth:`Revocations.announce` waits for its put (the revoking call then answers anyway)."""
ENTRY_MAX = 3 + 1 + 64 + 1 + 63
"""Bytes of one entry: ``<kind> <credential id> <tenant>``, or ``tnt <tenant>`` (shorter)."""
MAX_RECHECK = 10_000
"""Credential ids waiting for their streams' re-verification; beyond, every stream is re-verified."""
RETRY_INITIAL, RETRY_CAP = 0.05, 2.0

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TENANT = re.compile(r"[a-z][a-z0-9-]{0,62}")
_KINDS = (tokens.API_KEY_PREFIX, tokens.WORKER_CREDENTIAL_PREFIX)


def encode(server_id: str, entries: Collection[Revoked], everything: bool) -> bytes:
    """A put's value: a header line, then one line per entry (or :data:`ALL`)."""
    lines = [f"{VERSION} {server_id}"]
    lines += [ALL] if everything else [_line(r) for r in entries]
    return "\n".join(lines).encode()


def _line(r: Revoked) -> str:
    return f"{r.kind} {r.tenant}" if r.kind == TENANT_CHANGED else f"{r.kind} {r.credential_id} {r.tenant}"


def decode(value: bytes, max_entries: int = DEFAULT_MAX_ENTRIES) -> tuple[str, list[Revoked] | None]:
    """(sender's server id, entries) of a put's value; entries None means
    every credential: :data:`ALL`, or a value that is not one this server
    can read (then the sender is ``""``). Never raises."""
    if len(value) > (max_entries + 1) * (ENTRY_MAX + 1) + 400:
        return "", None
    try:
        header, *lines = value.decode().split("\n")
    except UnicodeDecodeError:
        return "", None
    version, _, sender = header.partition(" ")
    if version != VERSION or not lines or len(lines) > max_entries:
        return "", None
    if lines == [ALL]:
        return sender, None
    entries = []
    for line in lines:
        if line.startswith(TENANT_CHANGED + " "):
            tenant = line[len(TENANT_CHANGED) + 1:]
            if not _TENANT.fullmatch(tenant):
                return "", None
            entries.append(Revoked(TENANT_CHANGED, "", tenant))
            continue
        kind, ident, tenant = (line.split(" ") + ["", "", ""])[:3]
        if line.count(" ") != 2 or kind not in _KINDS or not _ID.fullmatch(ident) or not _TENANT.fullmatch(tenant):
            return "", None
        entries.append(Revoked(kind, ident, tenant))
    return sender, entries


class Revocations:
    """Tells the other servers of the revocations made here, and follows
    theirs; see the module docstring.

    ``forget`` is the authenticator's :meth:`forget_revoked`, ``forget_all``
    its :meth:`forget`; ``recheck`` re-verifies the open streams of the
    given worker credential ids (all of them for None) and ends those
    revoked (:meth:`CredentialWatch.check_once`). ``root`` is the lease
    store's key root (a test gives each its own)."""

    def __init__(
        self,
        leases: LeaseStore,
        clock: Clock,
        *,
        server_id: str,
        forget: Callable[[Revoked], int],
        forget_all: Callable[[], None],
        recheck: Callable[[Collection[str] | None], Awaitable[int]],
        root: str | None = None,
        rate: float = DEFAULT_RATE,
        burst: float = DEFAULT_BURST,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        wait: float = DEFAULT_WAIT,
    ) -> None:
        if not rate > 0 or max_entries < 1 or wait <= 0 or burst < (max_entries + 1) * (ENTRY_MAX + 1) + PUT_OVERHEAD:
            raise ValueError("rate must be > 0, max_entries >= 1, wait > 0 and burst hold the longest put")
        self._leases = leases
        self._clock = clock
        self.outages = OutageLog(
            log, "revocations", clock, then="the cache time and the streams' re-verification cover it"
        )
        self._server_id = server_id
        self._forget = forget
        self._forget_all = forget_all
        self._recheck = recheck
        self.key = revocations_key() if root is None else revocations_key(root)
        self._rate = rate
        self._burst = burst
        self._budget = burst
        """Bytes this server may put now (:meth:`_send_forever` refills it)."""
        self._refilled = clock.monotonic()
        self._max_entries = max_entries
        self._wait = wait
        self._pending: dict[tuple[str, str], Revoked] = {}
        self._everything = False
        self._sent: asyncio.Future[bool] | None = None
        """Resolved once the next put is made: True if it landed."""
        self._kick = asyncio.Event()
        self._to_recheck: set[str] | None = set()
        """Worker credential ids whose streams to re-verify (None: every stream)."""
        self._recheck_kick = asyncio.Event()
        self.puts = 0
        """Puts made (counted when sent)."""
        self.failed_puts = 0
        self.received = 0
        """Puts of other servers seen on the key."""
        self.evicted = 0
        """Cached principals evicted on another server's word."""
        self.compactions = 0
        """Times the watch could not resume: the history it needed was compacted."""
        self.resets = 0
        """Times the whole cache was emptied (a watch established again, or a put saying all)."""
        self.following = asyncio.Event()
        """Set once the key is watched (puts before are not seen)."""

    # -- the revoking server's side ---------------------------------------------------

    async def announce(self, revoked: Revoked) -> bool:
        """Tell every server that ``revoked`` changed (after the store
        committed it; a credential, or a tenant's settings): True once the
        put carrying it landed, False when it
        failed or did not land within ``wait`` (the others then learn it
        within their cache time)."""
        if self._everything or len(self._pending) >= self._max_entries:
            self._everything, self._pending = True, {}
        else:
            key = revoked.tenant if revoked.kind == TENANT_CHANGED else revoked.credential_id
            self._pending[(revoked.kind, key)] = revoked
        if self._sent is None:
            self._sent = asyncio.get_running_loop().create_future()
        sent = self._sent
        self._kick.set()
        try:
            async with asyncio.timeout(self._wait):
                return await asyncio.shield(sent)
        except TimeoutError:
            return False

    async def run(self) -> None:
        """Follow the key, re-verify streams named and send the puts, until
        cancelled; a part that fails unexpectedly is logged and started again."""
        async with asyncio.TaskGroup() as group:
            for part in (self._send_forever, self.follow, self._recheck_forever):
                group.create_task(
                    kept_running(part, self._clock, log, "revocations", initial=RETRY_INITIAL, cap=RETRY_CAP)
                )

    async def _send_forever(self) -> None:
        while True:
            await self._kick.wait()
            now = self._clock.monotonic()
            self._budget = min(self._burst, self._budget + (now - self._refilled) * self._rate)
            self._refilled = now
            if self._budget < 0:  # over the budget: wait, merging what comes meanwhile
                await self._clock.sleep(-self._budget / self._rate)
                continue
            self._kick.clear()
            entries, everything, sent = list(self._pending.values()), self._everything, self._sent
            self._pending, self._everything, self._sent = {}, False, None
            value = encode(self._server_id, entries, everything)
            self._budget -= len(value) + PUT_OVERHEAD
            self.puts += 1
            try:
                await self._leases.put(self.key, value)
                landed = True
            except (LeaseStoreError, SessionLost) as error:
                self.failed_puts += 1
                landed = False
                log.warning("revocations not told to the other servers (%s): they apply them within their cache time",
                            error)
            if sent is not None and not sent.done():
                sent.set_result(landed)

    # -- every server's side ------------------------------------------------------------

    async def follow(self) -> None:
        """Watch the key; apply each other server's put. Rides out lease
        store errors (the cache time and the streams' re-verification are
        the fallback meanwhile); ends when the store closes."""
        backoff = BackoffSleeper(self._clock, initial=RETRY_INITIAL, cap=RETRY_CAP)
        start: int | None = None
        while True:
            try:
                async with self._leases.watch(self.key, start_revision=start) as events:
                    backoff.reset()
                    self.outages.ok()
                    # Whatever was put before now may not be delivered: start clean.
                    self._reset()
                    self.following.set()
                    async for event in events:
                        start = event.revision + 1
                        if event.type is EventType.PUT:
                            self._apply(bytes(event.value))
            except WatchCompacted:
                self.compactions += 1
                start = None  # from now on; the reset when it is established covers what was missed
            except LeaseStoreClosed:
                return
            except LeaseStoreError as error:
                self.outages.failed("following the revocations key", error)
                await backoff.sleep()

    def _reset(self) -> None:
        self.resets += 1
        self._forget_all()
        self._to_recheck = None
        self._recheck_kick.set()

    def _apply(self, value: bytes) -> None:
        sender, entries = decode(value, self._max_entries)
        if sender == self._server_id:
            return  # ours: applied here before it was put
        self.received += 1
        if entries is None:
            self._reset()
            return
        for revoked in entries:
            self.evicted += self._forget(revoked)
        workers = {r.credential_id for r in entries if r.kind == tokens.WORKER_CREDENTIAL_PREFIX}
        if workers and self._to_recheck is not None:
            self._to_recheck |= workers
            if len(self._to_recheck) > MAX_RECHECK:
                self._to_recheck = None
            self._recheck_kick.set()

    async def _recheck_forever(self) -> None:
        while True:
            await self._recheck_kick.wait()
            self._recheck_kick.clear()
            ids, self._to_recheck = self._to_recheck, set()
            try:
                await self._recheck(ids)
            except Exception as error:  # the periodic re-verification is the fallback
                self.outages.failed("re-verifying the streams of revoked credentials", error)
            else:
                self.outages.ok()
