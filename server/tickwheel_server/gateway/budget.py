"""How much a worker credential may send that none of its streams holds: a token bucket per credential.

A worker's genuine results are bounded by the credit the server gave it:
each delivery a stream holds has one result pending at most. What is not
held costs: a result for a delivery the stream does not hold (a resend
after a lost acknowledgement, a late result, or a bogus or another
tenant's id), a result that fails its checks, a second result for one
already pending, a re-attachment the store turns down, and each entry of
a heartbeat that the stream does not hold (a heartbeat may list 20 000
entries, and reading them costs the server's loop). Each takes a
token from its credential's bucket, refilled at ``rate`` per second up to
``burst``; the burst covers what one worker may hold at most (a reconnect
resending every unacknowledged result). Past it the stream is ended with
RESOURCE_EXHAUSTED (:class:`OverBudget`), and a new stream of the
credential is refused while its bucket is empty.

Buckets are kept per server, in a bounded LRU, on the injected clock's
monotonic time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from tickwheel.shared.clock import Clock

from ..errors import RateLimited

DEFAULT_RATE = 1000.0
DEFAULT_BURST = 20_000.0
DEFAULT_MAX_CREDENTIALS = 10_000


class OverBudget(RateLimited):
    """The credential sent more than its budget allows: end the stream (RESOURCE_EXHAUSTED)."""

    def __init__(self, credential_id: str, description: str) -> None:
        super().__init__(f"worker_credential:{credential_id}", description)


@dataclass
class _Bucket:
    tokens: float
    at: float


class UnheldBudget:
    """Token buckets by worker credential id."""

    def __init__(
        self, clock: Clock, *, rate: float = DEFAULT_RATE, burst: float = DEFAULT_BURST,
        max_credentials: int = DEFAULT_MAX_CREDENTIALS,
    ) -> None:
        if rate <= 0 or burst < 1 or max_credentials < 1:
            raise ValueError("need rate > 0, burst >= 1 and max_credentials >= 1")
        self._clock = clock
        self.rate = rate
        self.burst = burst
        self.max_credentials = max_credentials
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.refused = 0
        """Tokens asked for and not granted."""

    def _bucket(self, credential_id: str) -> _Bucket:
        now = self._clock.monotonic()
        bucket = self._buckets.get(credential_id)
        if bucket is None:
            bucket = self._buckets[credential_id] = _Bucket(self.burst, now)
            while len(self._buckets) > self.max_credentials:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(credential_id)
            bucket.tokens = min(self.burst, bucket.tokens + max(0.0, now - bucket.at) * self.rate)
            bucket.at = now
        return bucket

    def take(self, credential_id: str, count: int) -> int:
        """Take up to ``count`` tokens of the credential's bucket; returns how many it had."""
        if count <= 0:
            return 0
        bucket = self._bucket(credential_id)
        granted = min(count, int(bucket.tokens))
        bucket.tokens -= granted
        self.refused += count - granted
        return granted

    def exhausted(self, credential_id: str) -> bool:
        """Whether the credential's bucket holds less than one token now."""
        return self._bucket(credential_id).tokens < 1.0

    def message(self, credential_id: str) -> str:
        return (
            f"worker credential {credential_id} sent more than {self.rate:g} per second (bursts of {self.burst:g}) "
            "of results, re-attachments or heartbeat entries that none of its streams holds (stale, unknown, "
            "another tenant's, duplicated or malformed): stream ended"
        )
