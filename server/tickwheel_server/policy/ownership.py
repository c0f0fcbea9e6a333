"""Partition shares: which partitions each member should own, and one member's plan. Pure.

Every member of the ownership (``dispatcher/ownership.py``) runs the same
plan on the same view of the lease store, so the rule must give the same
answer in every process and every release: the rendezvous weight of a
(member, partition) pair is splitmix64 of a BLAKE2b seed of the member id,
never Python's randomised ``hash``. :func:`assign_partitions` is balanced
to within one partition and sticky, so a join or a leave moves only the
partitions that must move; :func:`plan_ownership` turns a member's share
into what to acquire, release and wait for. Nothing here reads a clock or
touches a store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _member_seed(member: str) -> int:
    return int.from_bytes(hashlib.blake2b(member.encode(), digest_size=8).digest(), "big")


def _score(seed: int, partition: int) -> int:
    """Rendezvous weight of (member, partition): splitmix64 of the pair, the
    same in every process (never Python's randomised ``hash``)."""
    x = ((seed ^ ((partition * _GOLDEN) & _MASK64)) + _GOLDEN) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def assign_partitions(
    members: Iterable[str], partition_count: int, holders: Mapping[int, str] | None = None
) -> dict[str, frozenset[int]]:
    """Which partitions each member should own.

    * Covers ``range(partition_count)`` exactly once across the members.
    * Balanced: every member gets ``P // N`` or ``P // N + 1``.
    * Sticky: a member keeps the partitions it holds in ``holders`` (partition
      -> member; entries for non-members or out-of-range partitions are
      ignored) up to its quota, dropping its lowest-weighted ones first. The
      ``P % N`` larger quotas go to the members holding most (ties by a hash of
      the id). So from a balanced state, a join moves exactly the newcomer's
      share (``P // (N+1)`` or one more) and a leave moves exactly the
      leaver's partitions.
    * The rest (free partitions) go to members under quota by rendezvous
      weight of (member, partition), highest first: with no holders this is a
      balanced rendezvous hashing of the member set alone.
    * Deterministic: depends only on the set of members and ``holders``.

    O(F·N·log(F·N)) for F free partitions and N members.
    """
    if partition_count < 1:
        raise ValueError(f"partition_count must be >= 1, got {partition_count}")
    ids = sorted(set(members))
    if not ids:
        return {}
    seeds = {member: _member_seed(member) for member in ids}
    base, extra = divmod(partition_count, len(ids))
    held: dict[str, list[int]] = {member: [] for member in ids}
    for partition, holder in (holders or {}).items():
        if holder in held and 0 <= partition < partition_count:
            held[holder].append(partition)
    ranked = sorted(ids, key=lambda member: (-len(held[member]), -seeds[member], member))
    quota = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(ranked)}

    shares: dict[str, set[int]] = {}
    for member in ids:
        best = sorted(held[member], key=lambda p, s=seeds[member]: (-_score(s, p), p))
        shares[member] = set(best[: quota[member]])
    taken = set().union(*shares.values())
    free = [partition for partition in range(partition_count) if partition not in taken]
    hungry = [member for member in ids if len(shares[member]) < quota[member]]
    pairs = sorted(
        ((-_score(seeds[member], partition), partition, member) for partition in free for member in hungry)
    )
    for _, partition, member in pairs:
        if partition in taken or len(shares[member]) >= quota[member]:
            continue
        shares[member].add(partition)
        taken.add(partition)
    return {member: frozenset(share) for member, share in shares.items()}


@dataclass(frozen=True)
class OwnershipPlan:
    """What one member should do now."""

    target: frozenset[int]
    """Its share (:func:`assign_partitions`)."""
    acquire: frozenset[int]
    """In its share, held by nobody or by this server's id: try to acquire
    (``try_acquire`` adopts a key already under our session, e.g. after a
    call that timed out but was applied, and refuses an earlier session's)."""
    release: frozenset[int]
    """Held by it, not in its share: resign."""
    waiting: frozenset[int]
    """In its share, still held by another member: wait for the key to go."""

    @property
    def settled(self) -> bool:
        return not (self.acquire or self.release or self.waiting)


def plan_ownership(
    me: str,
    members: Iterable[str],
    partition_count: int,
    holders: Mapping[int, str],
    mine: Iterable[int],
) -> OwnershipPlan:
    """The plan for member ``me``.

    ``holders`` is the lease store as last seen (partition -> holder's server
    id); ``mine`` the partitions ``me`` holds under its current session, which
    override ``holders`` (the view may lag behind our own acquisitions and
    resignations). A partition the view shows held by ``me`` but not in
    ``mine`` is a key we do not know we hold (an earlier session's, or an
    acquisition whose reply was lost): planned as free, and acquired again if
    it is in our share (adopted if it is this session's, refused otherwise).
    ``me`` not among ``members`` means an empty share (release everything).
    """
    held = frozenset(mine)
    others = {p: h for p, h in holders.items() if p not in held and h != me}
    effective = dict(others)
    effective.update({partition: me for partition in held})
    target = assign_partitions(members, partition_count, effective).get(me, frozenset())
    missing = target - held
    acquire = frozenset(p for p in missing if p not in others)
    return OwnershipPlan(target=target, acquire=acquire, release=held - target, waiting=missing - acquire)

