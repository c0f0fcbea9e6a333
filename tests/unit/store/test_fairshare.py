"""The fair-share holder between hand-out rounds (``tickwheel_server.store.fairshare``)."""

from __future__ import annotations

from tickwheel_server.policy.fairness import Demand, Shares
from tickwheel_server.store.fairshare import MAX_TRACKED, FairShare


def test_a_round_commits_only_what_its_transaction_kept() -> None:
    fair = FairShare()
    tried = fair.begin()
    tried.allocate(10, [Demand("a", 1)])  # a transaction that was rolled back and retried
    kept = fair.begin()
    assert kept.allocate(2, [Demand("a", 1), Demand("b", 1)]) == {"a": 1, "b": 1}
    fair.commit(kept, ["a", "b"])
    assert fair.passes() == {"a": 1.0, "b": 1.0}


def test_idle_tenants_passes_are_dropped_beyond_the_bound() -> None:
    """Past MAX_TRACKED passes, those at or behind the virtual time (they would
    restart there anyway) go, unless the round saw the tenant active."""
    few = FairShare()
    few.commit(Shares({"idle": 0.5}, virtual=1.0), [])
    assert few.passes() == {"idle": 0.5}, "under the bound nothing is dropped"
    many = FairShare()
    idle = {f"t{index}": 0.5 for index in range(MAX_TRACKED)}
    many.commit(Shares({**idle, "ahead": 2.0, "seen": 0.5}, virtual=1.0), ["seen"])
    assert many.passes() == {"ahead": 2.0, "seen": 0.5}
