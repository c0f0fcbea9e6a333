"""The executions table as the queue: its stores (hand-out, outcomes,
requeues, arming) built together over one engine, sharing one definition cache."""

from __future__ import annotations

import random

from ..jobspec import DefinitionCache
from ..circuits import CircuitBreaker
from .arming import ArmStore
from .executions import DeadLetterHook
from .fairshare import FairShare
from .handout import LOOSE_SCAN_ABOVE, HandoutStore
from .handout_starts import SkipHook
from .outcomes import OutcomeStore
from .requeue import DEFAULT_POISON_CAP, RequeueStore
from .tenant_walk import TenantWalk


class ExecutionQueue:
    """The hand-out (:attr:`handout`), the results (:attr:`outcomes`) and the
    ends of deliveries no worker will finish (:attr:`requeues`) of one
    server, and the executions it arms ahead of their instant (:attr:`arming`). ``on_dead_letter`` is called by both stores that dead-letter."""

    def __init__(
        self,
        engine,
        clock,
        *,
        rng: random.Random | None = None,
        on_dead_letter: DeadLetterHook | None = None,
        on_skip: SkipHook | None = None,
        poison_cap: int = DEFAULT_POISON_CAP,
        fair: FairShare | None = None,
        loose_scan_above: int = LOOSE_SCAN_ABOVE,
        lateral: bool = True,
        breaker: CircuitBreaker | None = None,
        definitions: DefinitionCache | None = None,
    ) -> None:
        definitions = definitions if definitions is not None else DefinitionCache()
        self.handout = HandoutStore(
            engine, clock, on_skip=on_skip, fair=fair, loose_scan_above=loose_scan_above, lateral=lateral,
            definitions=definitions,
        )
        self.outcomes = OutcomeStore(
            engine, clock, rng=rng, on_dead_letter=on_dead_letter, breaker=breaker, definitions=definitions
        )
        self.requeues = RequeueStore(engine, clock, on_dead_letter=on_dead_letter, poison_cap=poison_cap)
        self.arming = ArmStore(
            engine, clock, definitions=definitions, unique_instant=self.handout.unique_instant, fair=self.handout.fair,
            walk=TenantWalk(loose_scan_above),
        )
