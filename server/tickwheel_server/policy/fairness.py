"""Weighted fair share across tenants in hand-out (pure).

Each hand-out round has a budget (its workers' credit) and a set of tenants
with ready work, each with a weight (1 to 1000) and, if capped, the room left
under its concurrency cap. :meth:`Shares.allocate` decides how many
executions each tenant may be handed this round by stride scheduling, the
per-slot form of weighted fair queueing: every tenant has a *pass*, its
virtual time; serving one slot of a tenant advances its pass by ``1 /
weight``, and the next slot always goes to the tenant that would finish it
first (smallest ``pass + 1 / weight``, ties by name). Over any stretch of
rounds in which tenants stay busy, each gets slots in proportion to its
weight, to within one slot, however small the rounds are: a deficit carried
from round to round, as deficit round robin carries it.

A tenant that had no ready work does not bank credit while idle: when it
comes back its pass starts at the system's virtual time (the start tag of
the latest slot served), so a tenant quiet for an hour does not then take
every slot for an hour. A tenant at its cap is left out of the round. Slots
a tenant was granted but did not use (it had fewer ready than its grant, or
they had to wait for their job or a key) are given back with
:meth:`Shares.refund`, so an allocation costs only what was handed out.

:class:`~tickwheel_server.store.fairshare.FairShare` keeps the passes of
one server between rounds. A round works on a copy (:meth:`Shares.copy`) and
stores it only when its transaction committed, so a retried transaction
decides the same way. The state is this server's alone: every server is
fair to the tenants its workers serve, so the cluster is too; the caps, which
must hold exactly, are counted in the store.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

@dataclass(frozen=True, slots=True)
class Demand:
    """A tenant with ready work in one round."""

    tenant: str
    weight: int
    room: int | None = None
    """How many more may run under its cap; None: no cap."""

    def __post_init__(self) -> None:
        if self.weight < 1:
            raise ValueError(f"tenant {self.tenant!r}: weight must be >= 1")


@dataclass
class Shares:
    """Passes by tenant and the virtual time: what one round decides from."""

    passes: dict[str, float] = field(default_factory=dict)
    virtual: float = 0.0

    def copy(self) -> "Shares":
        return Shares(dict(self.passes), self.virtual)

    def allocate(self, budget: int, demands: Iterable[Demand], served: list[str] | None = None) -> dict[str, int]:
        """Split ``budget`` slots among ``demands``: tenant → slots (every
        demand appears, 0 when at its cap or out-served). Advances the passes
        of the tenants served. ``served``, if given, gets the tenant of each
        slot appended in the order the rule serves them (:meth:`order`)."""
        wanted = {d.tenant: d for d in demands}
        grants = {name: 0 for name in wanted}
        open_ = [d for d in wanted.values() if d.room is None or d.room > 0]
        if len(open_) == 1 and budget > 0:
            # One tenant to serve (the common case): what the loop below
            # would do one slot at a time, at once.
            demand = open_[0]
            granted = budget if demand.room is None else min(budget, demand.room)
            start = max(self.passes.get(demand.tenant, self.virtual), self.virtual)
            grants[demand.tenant] = granted
            self.virtual = max(self.virtual, start + (granted - 1) / demand.weight)
            self.passes[demand.tenant] = start + granted / demand.weight
            if served is not None:
                served.extend([demand.tenant] * granted)
            return grants
        heap: list[tuple[float, str]] = []
        for name in sorted(wanted):
            demand = wanted[name]
            if demand.room is not None and demand.room <= 0:
                continue
            start = max(self.passes.get(name, self.virtual), self.virtual)
            self.passes[name] = start
            heapq.heappush(heap, (start + 1.0 / demand.weight, name))
        while budget > 0 and heap:
            finish, name = heapq.heappop(heap)
            demand = wanted[name]
            step = 1.0 / demand.weight
            if not heap:  # the last tenant left: its slots at once, as the loop below would serve them
                slots = budget if demand.room is None else min(budget, demand.room - grants[name])
                for _ in range(slots - 1):
                    finish += step
                grants[name] += slots
                budget -= slots
                self.virtual = max(self.virtual, finish - step)
                self.passes[name] = finish
                if served is not None:
                    served.extend([name] * slots)
                break
            while True:  # this tenant's slots while it would be the next popped
                grants[name] += 1
                budget -= 1
                self.virtual = max(self.virtual, finish - step)
                self.passes[name] = finish
                if served is not None:
                    served.append(name)
                if demand.room is not None and grants[name] >= demand.room:
                    break
                finish += step
                if budget <= 0 or (heap and heap[0] < (finish, name)):
                    heapq.heappush(heap, (finish, name))
                    break
        return grants

    def order(self, counts: Mapping[str, tuple[int, int]]) -> list[str]:
        """The order in which the rule serves ``counts`` (tenant → (weight,
        how many)) one slot at a time: a tenant per slot, each as many times
        as its count, interleaved by weight (a tenant of weight 3 three
        slots to one of weight 1), the tenant whose pass is least first.
        Advances the passes as :meth:`allocate` does."""
        served: list[str] = []
        self.allocate(
            sum(n for _weight, n in counts.values()),
            [Demand(name, weight, n) for name, (weight, n) in counts.items()],
            served,
        )
        return served

    def refund(self, tenant: str, weight: int, slots: int) -> None:
        """Give back ``slots`` the tenant was granted and did not use."""
        if slots > 0 and tenant in self.passes:
            self.passes[tenant] -= slots / weight
