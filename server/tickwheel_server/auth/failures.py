"""What failed authentications may cost: a negative cache and rate limits.

A well-formed API key or worker credential that is not in the authenticator's
cache costs a store read to check. Without limits, anyone who can reach the
port turns random well-formed keys into store reads at will. So:

- Negative cache: a secret that failed verification is remembered (as its
  SHA-256, bounded LRU) for :data:`NEGATIVE_TTL_SECONDS`; the same secret again
  fails without a read. A secret cannot become valid later (secrets are
  random and issued once), so the cache never refuses a good credential.
- Per peer: each peer (its IP address; an IPv6 address counts by its /64,
  which one host usually holds whole) has a token bucket of failures
  (:data:`PEER_RATE` a second, :data:`PEER_BURST` at once). Once it is empty,
  that peer's calls whose credential is not in the positive cache fail
  RESOURCE_EXHAUSTED before anything is checked, until it refills. Every
  failure counts here, a guessed admin token too; and each verification in
  flight counts as a failure until it answers (one that verifies spends
  nothing), so calls arriving together cannot all pass on the same tokens.
- Overall: one bucket (:data:`OVERALL_RATE`, :data:`OVERALL_BURST`) of
  failures that cost a store read, from all peers together. Once it is
  empty, a secret is still looked up only if its credential id verified on
  this server within :data:`KNOWN_TTL_SECONDS` (a caller whose cached
  principal expired keeps working); other unknown secrets fail
  RESOURCE_EXHAUSTED without a read until the bucket refills.

- Secrets that verified: a secret that verified on this server within
  :data:`KNOWN_TTL_SECONDS` (its SHA-256, bounded LRU) is checked again
  (its cached principal expired) whatever either bucket holds: a tenant
  behind the same address (a NAT) as a peer spending its failures keeps
  working, not refused every time its cached principal expires. Only the
  holder of a secret that verified can take this path, and it costs one
  store read a cache lifetime for each such secret.

So an attacker's failures lock out only its own peer (and there only
credentials not seen here lately); from many peers at
once, they cost at most the overall rate in store reads, and valid callers
seen recently are unaffected (a credential never used on this server before
waits for the flood to subside). Time is the injected clock's monotonic time.
"""

from __future__ import annotations

import hashlib
import ipaddress
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass

from tickwheel.shared.clock import Clock

from ..errors import RateLimited
from .ratelimit import TokenBucket

NEGATIVE_TTL_SECONDS = 10.0
NEGATIVE_SIZE = 10_000
PEER_RATE = 2.0
PEER_BURST = 20.0
OVERALL_RATE = 50.0
OVERALL_BURST = 200.0
KNOWN_TTL_SECONDS = 3600.0
KNOWN_SIZE = 100_000
MAX_PEERS = 100_000
MAX_PEER_TEXT = 128


def peer_key(peer: str) -> str:
    """The key a gRPC peer (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``,
    ``unix:...``) is limited under: its address without the port, an IPv6
    address as its /64 (pure)."""
    peer = peer[:MAX_PEER_TEXT]
    kind, sep, rest = peer.partition(":")
    if not sep:
        return peer or "unknown"
    if kind == "ipv4":
        return "ipv4:" + rest.rpartition(":")[0] if ":" in rest else peer
    if kind == "ipv6":
        host = urllib.parse.unquote(rest)
        if host.startswith("["):
            host = host[1:].partition("]")[0]
        try:
            network = ipaddress.IPv6Network(f"{host.partition('%')[0]}/64", strict=False)
        except ValueError:
            return peer
        return f"ipv6:{network}"
    return peer


def secret_digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class FailureLimits:
    peer_rate: float = PEER_RATE
    peer_burst: float = PEER_BURST
    overall_rate: float = OVERALL_RATE
    overall_burst: float = OVERALL_BURST
    negative_ttl: float = NEGATIVE_TTL_SECONDS
    known_ttl: float = KNOWN_TTL_SECONDS

    def __post_init__(self) -> None:
        if min(self.peer_rate, self.overall_rate, self.negative_ttl, self.known_ttl) <= 0:
            raise ValueError("rates and lifetimes must be > 0")
        if self.peer_burst < 1 or self.overall_burst < 1:
            raise ValueError("bursts must be >= 1")


class FailedAuthentications:
    """The authenticator's record of failures (see the module docstring)."""

    def __init__(self, clock: Clock, limits: FailureLimits | None = None, *, max_peers: int = MAX_PEERS) -> None:
        self._clock = clock
        self.limits = limits or FailureLimits()
        self._max_peers = max_peers
        self._negative: OrderedDict[bytes, float] = OrderedDict()
        self._known: OrderedDict[str, float] = OrderedDict()
        self._good: OrderedDict[bytes, float] = OrderedDict()
        """Digest of a secret that verified -> until when it passes the limits."""
        self._peers: OrderedDict[str, TokenBucket] = OrderedDict()
        self._overall = TokenBucket(self.limits.overall_burst, clock.monotonic())
        self._pending: dict[str, int] = {}
        """Per peer, its checks passed and not yet settled (verifications in flight, :meth:`settle`)."""
        self._pending_reads = 0
        self._digests_in_flight: set[bytes] = set()
        """Secrets (digests) whose verification is counted in flight: the same
        secret again meanwhile (a client's calls sent together with a key
        new to this server) spends nothing more."""
        """Of those, the ones that may cost a store read."""
        self.refused = 0
        """Calls refused RESOURCE_EXHAUSTED."""

    def known_bad(self, digest: bytes) -> bool:
        """The secret with this digest failed verification within the negative TTL."""
        until = self._negative.get(digest)
        if until is None:
            return False
        if until <= self._clock.monotonic():
            del self._negative[digest]
            return False
        return True

    def check(self, peer: str, *, lookup: str | None, digest: bytes | None = None) -> bool:
        """Before checking a secret not in the positive cache for ``peer``
        (a :func:`peer_key`): RateLimited when the peer spent its failures,
        or when the secret needs a store read (``lookup``: its credential
        id) while the overall failures are spent and the id did not verify
        recently; never when the secret (``digest``: :func:`secret_digest`)
        verified recently.

        The verifications in flight count as failures already spent until
        they are settled: calls that arrive together cannot all pass on the
        same tokens (120 unknown secrets at once from one peer once cost 120
        store reads against a burst of 20). True when the call was counted
        so: the caller must then :meth:`settle` it once it is decided,
        after its :meth:`failed` or :meth:`verified`."""
        now = self._clock.monotonic()
        if digest is not None and self.verified_lately(digest):
            return False
        if digest is not None and digest in self._digests_in_flight:
            return False  # the same secret is being verified: one count for all its calls
        pending = self._pending.get(peer, 0)
        bucket = self._peers.get(peer)
        tokens = self.limits.peer_burst if bucket is None else _tokens(bucket, now, self.limits.peer_rate, self.limits.peer_burst)
        if tokens - pending < 1.0:
            self.refused += 1
            raise RateLimited(
                f"peer:{peer}", f"too many failed authentications from {peer}; retry in a few seconds",
                retry_after=1.0 / self.limits.peer_rate,
            )  # fmt: skip
        if lookup is not None:
            overall = _tokens(self._overall, now, self.limits.overall_rate, self.limits.overall_burst)
            if overall - self._pending_reads < 1.0:
                seen = self._known.get(lookup)
                if seen is None or seen <= now:
                    self.refused += 1
                    raise RateLimited(
                        "server", "too many failed authentications on this server: credentials not used here "
                        "recently are not checked until they subside; retry in a few seconds",
                        retry_after=1.0 / self.limits.overall_rate,
                    )  # fmt: skip
            self._pending_reads += 1
        self._pending[peer] = pending + 1
        if digest is not None:
            self._digests_in_flight.add(digest)
        return True

    def settle(self, peer: str, lookup: str | None, digest: bytes | None = None) -> None:
        """A call :meth:`check` counted (it answered True) is decided: it
        no longer counts as in flight."""
        pending = self._pending.get(peer, 0) - 1
        if pending > 0:
            self._pending[peer] = pending
        else:
            self._pending.pop(peer, None)
        if lookup is not None:
            self._pending_reads = max(0, self._pending_reads - 1)
        if digest is not None:
            self._digests_in_flight.discard(digest)

    def failed(self, peer: str, digest: bytes | None, *, looked_up: bool) -> None:
        """A secret from ``peer`` failed verification (``looked_up``: it cost
        a store read); ``digest`` None for a call with no usable secret."""
        now = self._clock.monotonic()
        bucket = self._peers.get(peer)
        if bucket is None:
            bucket = self._peers[peer] = TokenBucket(self.limits.peer_burst, now)
            while len(self._peers) > self._max_peers:
                self._peers.popitem(last=False)
        else:
            self._peers.move_to_end(peer)
        bucket.take(now, self.limits.peer_rate, self.limits.peer_burst)
        if looked_up:
            self._overall.take(now, self.limits.overall_rate, self.limits.overall_burst)
        if digest is None:
            return
        self._good.pop(digest, None)  # revoked or expired since it verified: limited again
        self._negative[digest] = now + self.limits.negative_ttl
        self._negative.move_to_end(digest)
        while len(self._negative) > NEGATIVE_SIZE:
            self._negative.popitem(last=False)

    def verified_lately(self, digest: bytes) -> bool:
        """The secret with this digest verified within the known TTL (:meth:`verified`)."""
        good = self._good.get(digest)
        return good is not None and good > self._clock.monotonic()

    def verified(self, credential_id: str | None, digest: bytes | None = None) -> None:
        """A secret (``digest``) verified, of the stored credential with this
        id (None for the admin token): the id is looked up even while the
        overall failures are spent, and the secret is checked whatever the
        limits hold (:meth:`check`)."""
        until = self._clock.monotonic() + self.limits.known_ttl
        for seen, key in ((self._known, credential_id), (self._good, digest)):
            if key is not None:
                seen[key] = until
                seen.move_to_end(key)
                while len(seen) > KNOWN_SIZE:
                    seen.popitem(last=False)


def _tokens(bucket: TokenBucket, now: float, rate: float, burst: float) -> float:
    """Refill ``bucket`` to ``now`` and say what it holds (none taken)."""
    bucket.tokens = min(burst, bucket.tokens + max(0.0, now - bucket.at) * rate)
    bucket.at = now
    return bucket.tokens
