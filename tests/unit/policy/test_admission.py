"""What may start in a hand-out round (``tickwheel_server.policy.admission``):
the overlap policies and the concurrency keys, as tables at a fixed instant."""

from __future__ import annotations

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.policy.admission import Active, Candidate, KeyState, Rules, admit, rules_of

NOW = 100
"""The round's instant (microseconds; small numbers read more easily)."""


def spec(overlap=job_pb2.OVERLAP_POLICY_SKIP) -> job_pb2.Job:
    return job_pb2.Job(name="j", overlap_policy=overlap)


def cand(ident: str, nominal: int, origin: str = "scheduled", job: str = "j", **kw) -> Candidate:
    return Candidate(ident, job, "acme", origin, nominal, nominal, **kw)


def test_rules_count_a_key_once_with_its_last_limit() -> None:
    job = spec(job_pb2.OVERLAP_POLICY_QUEUE_ONE)
    job.concurrency_keys.add(key="db", limit=1)
    job.concurrency_keys.add(key="api", limit=4)
    job.concurrency_keys.add(key="db", limit=2)
    assert rules_of(job) == Rules("queue_one", (("api", 4), ("db", 2)))
    assert rules_of(job_pb2.Job()) == Rules("skip", ())


def test_occurrences_ready_in_one_round_start_in_nominal_order() -> None:
    batch = [cand("j:3", 3), cand("j:1", 1), cand("j:2", 2)]
    for policy, started, waiting, skipped in (
        ("skip", ["j:1"], [], ["j:2", "j:3"]),
        ("queue_one", ["j:1"], ["j:2"], ["j:3"]),
        ("allow", ["j:1", "j:2", "j:3"], [], []),
    ):
        out = admit(batch, {"j": Rules(policy)}, [], {}, now_us=10)
        assert [s.candidate.id for s in out.start] == started, policy
        assert [w.candidate.id for w in out.wait] == waiting, policy
        assert [s.candidate.id for s in out.skip] == skipped, policy
    out = admit(batch, {"j": Rules("replace")}, [], {}, now_us=10)
    assert [s.candidate.id for s in out.start] == ["j:3"]
    assert sorted(c.id for c in out.cancel) == ["j:1", "j:2"]
    assert [(r.job_id, r.id, r.reason) for r in out.replace] == [("j", "j:3", "canceled: replaced by j:3")]


def test_an_earlier_occurrence_ready_elsewhere_keeps_a_later_one_from_starting() -> None:
    # j:1 is ready but being claimed by another server (not a candidate here).
    pending = Active("j:1", "j", "acme", "scheduled", "scheduled", 1, 1)
    out = admit([cand("j:2", 2)], {"j": Rules("skip")}, [pending], {}, now_us=10)
    assert [(s.candidate.id, s.blocker_id) for s in out.skip] == [("j:2", "j:1")]
    later = Active("j:3", "j", "acme", "waiting", "scheduled", 3, 3)
    out = admit([cand("j:2", 2)], {"j": Rules("skip")}, [later], {}, now_us=10)
    assert [s.candidate.id for s in out.start] == ["j:2"]  # a waiting later one is behind it


def test_keys_admit_in_ready_order_and_never_past_an_older_waiter() -> None:
    rules = {"a": Rules("allow", (("db", 2),)), "b": Rules("allow", (("db", 2),))}
    batch = [cand("a:1", 5, job="a"), cand("b:1", 6, job="b"), cand("a:2", 7, job="a")]
    out = admit(batch, rules, [], {("acme", "db"): KeyState(2, 1)}, now_us=10)
    assert [s.candidate.id for s in out.start] == ["a:1"]
    assert [(w.candidate.id, w.key) for w in out.wait] == [("b:1", "db"), ("a:2", "db")]
    out = admit(batch, rules, [], {("acme", "db"): KeyState(3, 0, head_ready_at=5)}, now_us=10)
    assert [s.candidate.id for s in out.start] == ["a:1"]  # b:1 and a:2 are behind the waiter ready at 5
    assert out.wake == {("acme", "db"): 2}  # free slots and sleeping waiters: wake them


def running(ident: str, nominal: int, **kw) -> Active:
    return Active(ident, "j", "acme", "running", "scheduled", nominal, nominal, **kw)


def retry_wait(ident: str, nominal: int, ready_at: int) -> Active:
    return Active(ident, "j", "acme", "scheduled", "scheduled", nominal, ready_at, attempt=2)


def pending(ident: str, nominal: int, ready_at: int, status: str = "scheduled") -> Active:
    return Active(ident, "j", "acme", status, "scheduled", nominal, ready_at)


@pytest.mark.parametrize(
    "case, policy, candidates, active, started, waiting, skipped, canceled, stopped",
    [
        ("skip: a running one skips the next", "skip", [cand("j:2", 2)], [running("j:1", 1)],
         [], [], [("j:2", "j:1")], [], []),
        ("skip: a retry wait counts as running", "skip", [cand("j:2", 2)], [retry_wait("j:1", 1, NOW + 50)],
         [], [], [("j:2", "j:1")], [], []),
        ("skip: an earlier one not ready yet is not ahead", "skip", [cand("j:2", 2)], [pending("j:1", 1, NOW + 1)],
         ["j:2"], [], [], [], []),
        ("skip: an earlier one ready exactly now is ahead", "skip", [cand("j:2", 2)], [pending("j:1", 1, NOW)],
         [], [], [("j:2", "j:1")], [], []),
        ("skip: a later one waiting is behind", "skip", [cand("j:2", 2)], [pending("j:3", 3, 3, "waiting")],
         ["j:2"], [], [], [], []),
        ("queue_one: buffers one behind a running one", "queue_one", [cand("j:2", 2)], [running("j:1", 1)],
         [], [("j:2", None)], [], [], []),
        ("queue_one: one already buffered, the next is skipped", "queue_one", [cand("j:3", 3)],
         [running("j:1", 1), pending("j:2", 2, 2, "waiting")], [], [], [("j:3", "j:1")], [], []),
        ("allow: beside a running one", "allow", [cand("j:2", 2)], [running("j:1", 1)], ["j:2"], [], [], [], []),
        ("replace: stops the running one and waits for it", "replace", [cand("j:2", 2)], [running("j:1", 1)],
         [], [("j:2", None)], [], [], ["j:1"]),
        ("replace: a stop already asked is not asked again", "replace", [cand("j:2", 2)],
         [running("j:1", 1, cancel_requested=True)], [], [("j:2", None)], [], [], []),
        ("replace: older ready ones of the round are canceled", "replace", [cand("j:1", 1), cand("j:2", 2)], [],
         ["j:2"], [], [], ["j:1"], []),
        ("replace: a trigger replaces nothing, it waits", "replace", [cand("j:2", 2, origin="trigger")],
         [running("j:1", 1)], [], [("j:2", None)], [], [], []),
        ("a trigger is never skipped: it waits", "skip", [cand("j:2", 2, origin="trigger")], [running("j:1", 1)],
         [], [("j:2", None)], [], [], []),
        ("a backfill is never skipped: it waits", "skip", [cand("j:2", 2, origin="backfill")], [running("j:1", 1)],
         [], [("j:2", None)], [], [], []),
        ("a run allowed to overlap starts beside a running one", "skip", [cand("j:2", 2, allow_overlap=True)],
         [running("j:1", 1)], ["j:2"], [], [], [], []),
        ("a running one allowed to overlap holds nothing up", "skip", [cand("j:2", 2)],
         [running("j:1", 1, allow_overlap=True)], ["j:2"], [], [], [], []),
        ("nothing else: it starts", "skip", [cand("j:1", 1)], [], ["j:1"], [], [], [], []),
    ],
)
def test_overlap(case, policy, candidates, active, started, waiting, skipped, canceled, stopped) -> None:
    out = admit(candidates, {"j": Rules(policy)}, active, {}, now_us=NOW)
    assert [s.candidate.id for s in out.start] == started, case
    assert [(w.candidate.id, w.key) for w in out.wait] == waiting, case
    assert [(s.candidate.id, s.blocker_id) for s in out.skip] == skipped, case
    assert [c.id for c in out.cancel] == canceled, case
    assert [s.id for s in out.stop] == stopped, case


ALLOW_DB = {"a": Rules("allow", (("db", 2),)), "b": Rules("allow", (("db", 2),))}
BATCH = [cand("a:1", 5, job="a"), cand("b:1", 6, job="b"), cand("a:2", 7, job="a")]


@pytest.mark.parametrize(
    "case, rules, state, started, waiting, wake",
    [
        ("free slots for all", ALLOW_DB, {("acme", "db"): KeyState(3, 0)}, ["a:1", "b:1", "a:2"], [], {}),
        ("one free slot: the oldest ready", ALLOW_DB, {("acme", "db"): KeyState(2, 1)}, ["a:1"],
         [("b:1", "db"), ("a:2", "db")], {}),
        ("no free slot", ALLOW_DB, {("acme", "db"): KeyState(2, 2)}, [], [("a:1", "db"), ("b:1", "db"), ("a:2", "db")],
         {}),
        ("never past an older waiter", ALLOW_DB, {("acme", "db"): KeyState(3, 0, head_ready_at=5)}, ["a:1"],
         [("b:1", "db"), ("a:2", "db")], {("acme", "db"): 2}),
        ("a waiter ready later is behind", ALLOW_DB, {("acme", "db"): KeyState(3, 0, head_ready_at=8)},
         ["a:1", "b:1", "a:2"], [], {}),
        ("free slots and sleepers, nobody here: wake them", ALLOW_DB,
         {("acme", "db"): KeyState(3, 0, head_ready_at=1), ("acme", "mq"): KeyState(4, 1, head_ready_at=2)}, [],
         [("a:1", "db"), ("b:1", "db"), ("a:2", "db")], {("acme", "db"): 3, ("acme", "mq"): 3}),
        ("two keys: waits on the first one full", {"a": Rules("allow", (("api", 1), ("db", 5))),
                                                  "b": Rules("allow", (("api", 1), ("db", 5)))},
         {("acme", "api"): KeyState(1, 0), ("acme", "db"): KeyState(5, 5)}, [],
         [("a:1", "db"), ("b:1", "db"), ("a:2", "db")], {}),
        ("a job without keys is not held by them", {"a": Rules("allow"), "b": Rules("allow", (("db", 1),))},
         {("acme", "db"): KeyState(1, 1)}, ["a:1", "a:2"], [("b:1", "db")], {}),
    ],
)
def test_concurrency_keys(case, rules, state, started, waiting, wake) -> None:
    out = admit(BATCH, rules, [], state, now_us=NOW)
    assert [s.candidate.id for s in out.start] == started, case
    assert [(w.candidate.id, w.key) for w in out.wait] == waiting, case
    assert out.wake == wake, case
