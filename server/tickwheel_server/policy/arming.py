"""Which ready-soon executions a server may arm: decide their hand-out
seconds before their instant (pure; see docs/architecture.md, "Hand-outs
decided ahead").

An armed execution is sent at its instant without the round's decisions
(fair share, tenant caps, concurrency keys, overlap), so only those that need
none of them may be armed. The start at the instant still guards against
what may have changed since (:mod:`tickwheel_server.store.arming`).
"""

from __future__ import annotations

from .admission import Rules


def may_arm(
    rules: Rules | None, *, one_off: bool, origin: str, allow_overlap: bool, tenant_cap: int, wait_key: str | None
) -> bool:
    """True when an execution needs no decision at its instant.

    - ``rules``: its job's (None: the job is gone or its definition
      unreadable; such an execution keeps the round's path, which cancels
      a deleted job's run and fails an unreadable one);
    - the tenant has no concurrency cap (``tenant_cap`` 0) and the job names
      no concurrency key: a cap or a key is counted under a lock at the
      instant;
    - no ``wait_key`` (a woken waiter keeps its place in a key's line);
    - it may run beside others (``allow_overlap``, or the job's overlap
      policy ``allow``), or it is a one-off's own occurrence (origin
      ``scheduled`` of a schedule that fires once): the only run of its
      job, unless a manual run arrives, which the start's guard and the
      manual run's disarm take care of.
    """
    if rules is None or tenant_cap != 0 or rules.keys or wait_key is not None:
        return False
    if allow_overlap or rules.overlap == "allow":
        return True
    return one_off and origin == "scheduled"


def runs_beside(rules: Rules, allow_overlap: bool) -> bool:
    """An armed execution that may start whatever else of its job runs:
    its start skips the overlap guard."""
    return allow_overlap or rules.overlap == "allow"
