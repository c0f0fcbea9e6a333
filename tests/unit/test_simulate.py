"""The capacity model (``loadtest/simulate.py``) keeps the rules it models:
deterministic for a seed, every occurrence started exactly once and never
before its due instant, a burst claimed ahead started before its instant
and sent at it, a dead server's partitions moved after the session TTL, and lateness that grows without bound when the store is too small. No
figure of the model is asserted beyond what those rules imply."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtest"))

from simulate import Config, Simulation, simulate

# A small cluster with a background load and a peak, quick to simulate; its
# costs pinned here, so that new measured defaults do not move these tests.
SMALL = Config(servers=3, partitions=32, db_cores=2, worker_cores=4, jobs=2_000, runs_per_job_per_day=8_640,
               peak=3_000, peak_at=15, peak_window=1.0, horizon=10, lookahead=5, seed=7,
               db_claim_ms=0.086, db_handout_ms=0.055, db_result_ms=0.039, server_claim_ms=0.102,
               server_handout_ms=0.058, server_result_ms=0.031, worker_ms=0.029, deal_share=0.5)


def run(config: Config) -> Simulation:
    simulation = Simulation(config)
    simulation.figures_ = simulation.run()
    return simulation


def test_the_same_seed_gives_the_same_figures_and_another_seed_others() -> None:
    first, again = simulate(SMALL), simulate(SMALL)
    assert first == again
    other = simulate(replace(SMALL, seed=8))
    assert other["peak"]["lateness_at_start_s"] != first["peak"]["lateness_at_start_s"]


def test_the_command_prints_the_same_json_for_the_same_seed() -> None:
    command = [sys.executable, str(ROOT / "loadtest" / "simulate.py"), "--servers", "2", "--peak", "500",
               "--peak-at", "3", "--peak-window", "1", "--jobs", "100", "--runs-per-job-per-day", "864",
               "--horizon", "2", "--seed", "5"]
    outputs = [subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
               for _ in range(2)]
    assert outputs[0] == outputs[1]
    report = json.loads(outputs[0])
    assert report["config"]["seed"] == 5 and report["peak"]["occurrences"] == 500


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="db_cores"):
        Config(db_cores=0)
    with pytest.raises(ValueError, match="kill_server_at"):
        Config(servers=1, kill_server_at=5.0)
    done = subprocess.run([sys.executable, str(ROOT / "loadtest" / "simulate.py"), "--handout-batch", "0"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "handout_batch" in done.stderr


@pytest.mark.parametrize("kill_at", [None, 12.0, 15.5])
def test_every_occurrence_starts_exactly_once_and_never_before_it_is_due(kill_at: float | None) -> None:
    simulation = run(replace(SMALL, kill_server_at=kill_at))
    figures = simulation.figures_
    assert figures["occurrences"] == len(simulation.due) > SMALL.peak
    assert figures["started"] == figures["occurrences"] and figures["not_started"] == 0
    assert figures["started_twice"] == 0 and figures["early"] == 0
    assert all(count == 1 for count in simulation.starts)
    for i, due in enumerate(simulation.due):
        assert simulation.taken_at[i] >= due
        assert simulation.started_at[i] >= simulation.taken_at[i]


def lateness(simulation: Simulation, indices: list[int]) -> list[float]:
    return [simulation.started_at[i] - simulation.due[i] for i in indices]


def test_a_dead_servers_partitions_move_after_the_ttl_and_what_it_had_not_claimed_is_late_by_about_it() -> None:
    config = replace(SMALL, peak=0, lookahead=1.0, ttl=10.0, tick=1.0, horizon=40, kill_server_at=20.0)
    simulation = run(config)
    moved = simulation.moved
    assert len(moved) == math.ceil(config.partitions / config.servers)  # server 0's share
    alive = [s for s in simulation.servers if s.alive]
    assert not simulation.servers[0].alive and not simulation.servers[0].partitions
    assert sorted(p for s in alive for p in s.partitions) == list(range(config.partitions))  # each owned once
    assert max(len(s.partitions) for s in alive) - min(len(s.partitions) for s in alive) <= 1
    # Due after the death and before the move: nobody claims them until their partitions move.
    stranded = [i for i, due in enumerate(simulation.due)
                if simulation.partition[i] in moved and 22.0 <= due <= 28.0]
    others = [i for i, due in enumerate(simulation.due)
              if simulation.partition[i] not in moved and 22.0 <= due <= 28.0]
    assert stranded and others
    late = lateness(simulation, stranded)
    assert max(late) <= config.ttl + config.tick + 1.0
    # The lease expires one TTL after the last keep-alive, sent every TTL/3.
    assert max(late) >= config.ttl * 2 / 3 - config.lookahead - 1.0
    assert min(late) > 1.0  # every one of them waited for the move
    assert max(lateness(simulation, others)) < 1.0
    assert simulation.figures_["killed"]["partitions_moved"] == len(moved)


def test_rows_the_dead_server_took_and_never_dealt_are_requeued_by_the_reaper_about_two_ttls_later() -> None:
    # An instant peak of 12 000: the kill falls while server 0 deals a committed take. Taken at
    # their instant (nothing started ahead: a round's take records no worker), they wait the grace.
    config = replace(SMALL, peak=12_000, peak_window=0.0, kill_server_at=15.3, start_ahead=0.0)
    simulation = run(config)
    assert simulation.reaped
    late = lateness(simulation, simulation.reaped)
    # Lease expiry (2/3 to 1 TTL), the reaper's next pass, one TTL of grace rounded up to passes.
    assert min(late) >= config.ttl * 2 / 3 + config.ttl - 1.0
    assert max(late) <= 2 * config.ttl + 2 * config.reaper_every + 1.0
    figures = simulation.figures_["killed"]["reaped_lateness_at_start_s"]
    assert figures["count"] == len(simulation.reaped)
    assert simulation.figures_["started_twice"] == 0 and simulation.figures_["not_started"] == 0


def test_what_the_dead_server_claimed_ahead_is_handed_out_by_the_others_sweeps_within_about_a_sweep() -> None:
    config = replace(SMALL, peak=0, lookahead=60.0, horizon=40, kill_server_at=20.0)
    simulation = run(config)
    moved = [i for i, due in enumerate(simulation.due) if simulation.partition[i] in simulation.moved and due >= 20.0]
    # Not started yet at the death (due more than start_ahead later): the others' sweeps take them.
    after = [i for i in moved if simulation.due[i] > 20.0 + config.start_ahead]
    assert after
    assert max(lateness(simulation, after)) < config.sweep + 0.5
    # Due within start_ahead of the death: those the dead server had started ahead and held for
    # their instant were never sent, and wait for the reaper; the rest went out on time elsewhere.
    soon = [i for i in moved if simulation.due[i] <= 20.0 + config.start_ahead]
    held = [i for i in soon if i in set(simulation.released)]
    # Their workers said hello elsewhere without them: given back at the
    # reaper's first pass after the lease expired, not a grace later.
    assert held and not set(held) & set(simulation.reaped)
    assert min(lateness(simulation, held)) >= config.ttl * 2 / 3 - 1.0
    assert max(lateness(simulation, held)) <= config.ttl + config.reaper_every + config.sweep + 1.0
    assert simulation.figures_["killed"]["released_lateness_at_start_s"]["count"] == len(set(simulation.released))
    assert max(lateness(simulation, [i for i in soon if i not in set(held)]), default=0.0) < config.sweep + 0.5
    # Without the hello's mark (--release-unsent 0) they wait the grace too: about two TTLs.
    before = run(replace(config, release_unsent=0))
    waited = [i for i in soon if i in set(before.reaped)]
    assert waited and not before.released
    assert min(lateness(before, waited)) >= config.ttl * 2 / 3 + config.ttl - 1.0


def test_a_burst_claimed_ahead_is_started_before_its_instant_and_sent_at_it() -> None:
    burst = replace(SMALL, servers=1, jobs=0, peak=10_000, peak_window=0.0, peak_at=15, lookahead=10,
                    db_cores=1, worker_cores=2)
    ahead, at_instant = run(burst), run(replace(burst, start_ahead=0.0))
    for simulation in (ahead, at_instant):
        assert simulation.figures_["early"] == 0 and simulation.figures_["started_twice"] == 0
        assert min(simulation.started_at) >= burst.peak_at
    # The takes' store work falls in the second before the instant, not after it.
    assert ahead.db_by_second.get(14, 0.0) > 0.5 and at_instant.db_by_second.get(14, 0.0) == 0.0
    late = [max(lateness(s, range(burst.peak))) for s in (ahead, at_instant)]
    assert late[0] < late[1]


def test_a_store_smaller_than_the_demand_makes_lateness_grow() -> None:
    # 2 000 occurrences/s need about 0.36 store cores at the default costs.
    load = replace(SMALL, peak=0, jobs=20_000, runs_per_job_per_day=8_640, lookahead=5, warm=1)
    ample = run(replace(load, db_cores=4, horizon=20))
    starved = [run(replace(load, db_cores=0.2, horizon=horizon)) for horizon in (10, 20)]

    assert ample.figures_["all"]["lateness_at_start_s"]["max"] < 1.0
    shorter, longer = (s.figures_["all"]["lateness_at_start_s"]["max"] for s in starved)
    assert shorter > 5.0
    assert longer > shorter + 5.0  # ten more seconds of demand beyond capacity: the backlog only grows
    assert all(s.figures_["store"]["utilisation"] > 0.9 for s in starved)
    assert ample.figures_["store"]["utilisation"] < 0.5
