"""What the claim hands out itself (``store/claim_handout.py``), its pure
rules table-tested: which definitions need no decision at their instant,
which workers may run a candidate, and how a group's credit is shared."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.api.validate import normalise_job
from tickwheel_server.jobspec import JobDefinition
from tickwheel_server.policy.fairness import Shares
from tickwheel_server.store.claim_handout import (
    Candidate, DirectHandOut, HandOutOffer, fits, needs_no_decision, share_out,
)
from tickwheel_server.store.claim_writes import ClaimWrites
from tickwheel_server.store.executions import Capability
from tickwheel_server.store.fairshare import FairShare

NOW = datetime(2027, 1, 1, tzinfo=timezone.utc)


def definition(*, once: bool = True, overlap=job_pb2.OVERLAP_POLICY_UNSPECIFIED, key: str = "") -> JobDefinition:
    job = job_pb2.Job(name="j", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")),
                      overlap_policy=overlap)
    if once:
        job.schedule.once_at.FromDatetime(NOW)
    else:
        job.schedule.cron.expression = "* * * * *"
    if key:
        job.concurrency_keys.add(key=key, limit=1)
    return JobDefinition.parse("job", 1, normalise_job(job, NOW).SerializeToString())


@pytest.mark.parametrize(
    ("name", "spec", "expected"),
    [
        ("a one-off's own occurrence", definition(), (True, False)),
        ("a one-off that may overlap", definition(overlap=job_pb2.OVERLAP_POLICY_ALLOW), (True, True)),
        ("a recurring job that may overlap", definition(once=False, overlap=job_pb2.OVERLAP_POLICY_ALLOW), (True, True)),
        ("a recurring job under skip", definition(once=False), (False, False)),
        ("a recurring job under queue_one", definition(once=False, overlap=job_pb2.OVERLAP_POLICY_QUEUE_ONE),
         (False, False)),
        ("a keyed one-off", definition(key="k"), (False, False)),
        ("a keyed job that may overlap", definition(overlap=job_pb2.OVERLAP_POLICY_ALLOW, key="k"), (False, False)),
    ],
)
def test_what_needs_no_decision_at_its_instant(name, spec, expected) -> None:
    assert needs_no_decision(spec) == expected, name


def candidate(index: int, tenant: str = "a", handler: str | None = "echo", due_us: int = 0) -> Candidate:
    return Candidate(index, f"e{index}", f"j{index}", tenant, handler, due_us, False)


@pytest.mark.parametrize(
    ("capability", "row", "expected"),
    [
        (Capability(("a",), ("echo",), False), candidate(0), True),
        (Capability(("b",), ("echo",), True), candidate(0), False),
        (Capability(("a",), ("other",), True), candidate(0), False),
        (Capability(("a",), ("echo",), False), candidate(0, handler=None), False),
        (Capability(("a",), (), True), candidate(0, handler=None), True),
    ],
)
def test_which_workers_may_run_a_candidate(capability, row, expected) -> None:
    assert fits(capability, row) is expected


def offer(*groups: tuple[Capability, int]) -> HandOutOffer:
    return HandOutOffer("s1", groups, FairShare(), lambda: None, lambda at_us: at_us)


ANY = Capability(("a", "b"), ("echo",), True)


def test_a_groups_credit_is_shared_by_weight_oldest_due_first() -> None:
    rows = [candidate(i, "a", due_us=100 - i) for i in range(5)] + [candidate(10 + i, "b") for i in range(5)]
    [chosen] = share_out(offer((ANY, 4)), rows, {"a": 1, "b": 3}, Shares())
    assert sorted(c.tenant for c in chosen) == ["a", "b", "b", "b"]
    assert [c.id for c in chosen if c.tenant == "a"] == ["e4"], "a's oldest due"


def test_credit_beyond_the_candidates_is_not_spent_and_a_candidate_goes_to_one_group() -> None:
    rows = [candidate(0, "a"), candidate(1, "b"), candidate(2, "b", handler=None)]
    http_only = Capability(("b",), (), True)
    first, second = share_out(offer((ANY, 10), (http_only, 10)), rows, {"a": 1, "b": 1}, Shares())
    assert [c.id for c in first] == ["e0", "e1", "e2"] and second == []


def test_a_group_with_no_credit_or_nothing_it_may_run_gets_nothing() -> None:
    rows = [candidate(0, "a")]
    nothing, other = share_out(offer((ANY, 0), (Capability(("z",), ("echo",), True), 5)), rows, {"a": 1}, Shares())
    assert nothing == [] and other == []


def test_the_passes_are_charged_as_a_round_would_charge_them() -> None:
    shares = Shares()
    share_out(offer((ANY, 3)), [candidate(i, "a") for i in range(3)], {"a": 1}, shares)
    assert shares.passes["a"] == pytest.approx(3.0)


def test_one_tenants_rows_come_oldest_due_first_and_the_next_group_gets_the_rest() -> None:
    rows = [candidate(i, "a", due_us=100 + (i * 7) % 10) for i in range(10)]
    first, second = share_out(offer((ANY, 4), (ANY, 10)), rows, {"a": 1}, Shares())
    expected = sorted(rows, key=lambda c: (c.due_us, c.id))
    assert first == expected[:4] and second == expected[4:]


def test_the_rows_handed_out_are_made_once_when_every_one_was_inserted() -> None:
    """The claim's writes ask :meth:`DirectHandOut.keep` again once the
    INSERT said which ids it inserted: with every one inserted (the common
    case), the rows :meth:`DirectHandOut.stamp` made are kept, not made a
    second time; with one that already existed, that one is left out."""
    writes = ClaimWrites()
    for i in range(3):
        for name, value in (("ids", f"e{i}"), ("job_ids", f"j{i}"), ("tenants", "a"), ("partitions", i),
                            ("nominal_ats", 100), ("due_ats", 100), ("handlers", "echo"), ("missed_counts", 0),
                            ("payloads", b"")):
            getattr(writes, name).append(value)
    direct = DirectHandOut(offer((ANY, 10)), now_us=1_000)
    spec = definition()
    for i in range(3):
        direct.consider(i, f"e{i}", SimpleNamespace(id=f"j{i}", version=1, tenant="a"), spec, 100)
    direct.chosen = share_out(direct.offer, direct.candidates, {"a": 1}, Shares())
    taken = writes.take([0, 1, 2])
    assert direct.stamp(taken, 500) == 1_000
    made = direct.handed[0]
    direct.keep(taken, {"e0", "e1", "e2"})
    assert direct.handed[0] is made, "made again"
    assert [h.id for h in made] == ["e0", "e1", "e2"] and {h.handed_out_at_us for h in made} == {1_000}
    direct.keep(taken, {"e0", "e2"})  # e1 existed already: not handed out
    assert [h.id for h in direct.handed[0]] == ["e0", "e2"]
