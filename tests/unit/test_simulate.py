"""The capacity model (``loadtest/simulate.py``) keeps the rules it models:
deterministic for a seed, every occurrence started exactly once and never
before its due instant, a burst armed ahead started inside its start window
(sized by its starts, as ``gateway/armed.py`` sizes it) and sent at its
instant, claims in lanes of contiguous partitions, a dead server's
partitions taken over after the session TTL and what it armed given back
by the reaper, and lateness that grows without bound when the store is too
small. No figure of the model is asserted beyond what those rules imply."""

from __future__ import annotations

import heapq
import json
import math
import signal
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
               peak=3_000, peak_at=15, peak_window=1.0, horizon=10, lookahead=5, seed=7, slots=6_000,
               db_claim_ms=0.086, db_arm_ms=0.030, db_start_ms=0.040, db_handout_ms=0.055, db_result_ms=0.039,
               server_claim_ms=0.102, server_arm_ms=0.025, server_start_ms=0.035, server_handout_ms=0.058,
               server_result_ms=0.031, worker_ms=0.029, deal_share=0.5)


def run(config: Config) -> Simulation:
    simulation = Simulation(config)
    simulation.figures_ = simulation.run()
    return simulation


def test_the_same_seed_gives_the_same_figures_and_another_seed_others() -> None:
    first, again = simulate(SMALL), simulate(SMALL)
    assert first == again
    other = simulate(replace(SMALL, seed=8))
    del other["config"], first["config"]
    assert other != first


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
    # Nothing armed (arm_ahead 0): an instant peak of 12 000 is taken by the rounds at its instant, and the
    # kill falls while server 0 deals a committed take. A round's take records no worker: they wait the grace.
    config = replace(SMALL, peak=12_000, peak_window=0.0, kill_server_at=15.3, arm_ahead=0.0, slots=0)
    simulation = run(config)
    assert simulation.reaped and not simulation.ahead
    late = lateness(simulation, simulation.reaped)
    # Lease expiry (2/3 to 1 TTL), the reaper's next pass, one TTL of grace rounded up to passes.
    assert min(late) >= config.ttl * 2 / 3 + config.ttl - 1.0
    assert max(late) <= 2 * config.ttl + 2 * config.reaper_every + 1.0
    figures = simulation.figures_["killed"]["reaped_lateness_at_start_s"]
    assert figures["count"] == len(simulation.reaped)
    assert simulation.figures_["started_twice"] == 0 and simulation.figures_["not_started"] == 0


# A burst of 6 000 at 25 s beside the background: with 6 000 slots each server's workers hold 2 000,
# so each server arms its share of it, server 0 too.
ARMED = replace(SMALL, peak=6_000, peak_at=25.0, peak_window=0.0, lookahead=60.0, horizon=30)


def test_what_the_dead_server_armed_waits_for_the_reapers_first_pass_after_its_lease_expired() -> None:
    config = replace(ARMED, kill_server_at=20.0)
    simulation = run(config)
    disarmed = set(simulation.disarmed)
    peak_armed = [i for i in range(config.peak) if i in disarmed]
    assert peak_armed and len(peak_armed) < config.peak  # its share of the burst, armed and not yet started
    # The reaper's first pass after the expiry (2/3 to 1 TTL after the death) gives them back, not a grace later.
    started = [simulation.started_at[i] for i in disarmed]
    assert min(started) >= config.kill_server_at + config.ttl * 2 / 3
    assert max(started) <= config.kill_server_at + config.ttl + config.reaper_every + config.sweep + 1.0
    assert not disarmed & set(simulation.reaped)
    assert simulation.figures_["killed"]["disarmed_lateness_at_start_s"]["count"] == len(disarmed)
    # What the dead server had not armed is armed and started by the others, on time: its
    # partitions' rows were claimed a minute ahead, and the queue is shared.
    # (What it had started for its next second and not sent waits for the same pass: the next test.)
    stranded = disarmed | set(simulation.released)
    after = [i for i, due in enumerate(simulation.due) if due >= config.kill_server_at and i not in stranded]
    assert any(simulation.partition[i] in simulation.moved for i in after)
    assert max(lateness(simulation, after)) < config.sweep + 0.5
    assert all(simulation.armed_by[i] != 0 for i in after if simulation.due[i] > config.kill_server_at + 1)
    figures = simulation.figures_
    assert figures["started_twice"] == 0 and figures["not_started"] == 0 and figures["early"] == 0


def test_what_the_dead_server_started_ahead_and_never_sent_goes_back_at_that_pass_too() -> None:
    # The kill falls inside the burst's start window: server 0's share is started (running, its
    # workers recorded) and held for the instant, never sent.
    config = replace(ARMED, kill_server_at=24.5)
    simulation = run(config)
    held = [i for i in simulation.released if i < config.peak]
    assert held and not set(simulation.released) & set(simulation.reaped)
    assert all(simulation.start_committed[i] < config.kill_server_at for i in held)
    # Their workers said hello elsewhere without them: given back at the
    # reaper's first pass after the lease expired, not a grace later.
    late = lateness(simulation, held)
    assert min(late) >= config.kill_server_at + config.ttl * 2 / 3 - config.peak_at
    assert max(late) <= config.kill_server_at + config.ttl + config.reaper_every + config.sweep + 1.0 - config.peak_at
    assert simulation.figures_["killed"]["released_lateness_at_start_s"]["count"] == len(simulation.released)
    # Without the hello's mark (--release-unsent 0) they wait the grace too: about two TTLs.
    before = run(replace(config, release_unsent=0))
    waited = [i for i in held if i in set(before.reaped)]
    assert waited and not before.released
    assert min(lateness(before, waited)) >= config.kill_server_at + config.ttl * 5 / 3 - 1.0 - config.peak_at
    for simulation in (simulation, before):
        assert simulation.figures_["started_twice"] == 0 and simulation.figures_["not_started"] == 0
        assert simulation.figures_["early"] == 0


BURST = replace(SMALL, servers=1, partitions=256, jobs=0, peak_window=0.0, peak_at=40, slots=0, shared_cores=2, lookahead=60,
                horizon=5)


@pytest.mark.parametrize(("size", "window"), [(3_000, 1.0), (10_000, 1.2), (30_000, 3.0)])
def test_a_bursts_start_window_is_sized_by_its_starts_and_every_run_is_sent_at_its_instant(
        size: int, window: float) -> None:
    """One round of starts (start_depth × 2 000) keeps start_ahead; beyond it the rounds × 2 000 rows
    × 100 µs (the floor: the arms of this store read faster) × 2, at most 3 s."""
    simulation = run(replace(BURST, peak=size))
    figures = simulation.figures_
    assert figures["early"] == 0 and figures["started_twice"] == 0 and figures["not_started"] == 0
    opened = simulation.servers[0].windows
    if window > BURST.start_ahead:
        assert opened == [(BURST.peak_at, window, size)]
    else:
        assert opened == []
    # Every run of the burst armed, started inside its window before the instant, sent at the instant.
    assert figures["peak"]["armed"] == size
    starts = [simulation.start_committed[i] for i in range(size)]
    assert min(starts) >= BURST.peak_at - window and max(starts) < BURST.peak_at
    assert all(simulation.taken_at[i] == BURST.peak_at for i in range(size))
    assert figures["peak"]["lateness_at_hand_out_s"]["max"] == 0.0


def test_a_fixed_one_second_window_leaves_a_large_bursts_last_starts_after_its_instant() -> None:
    sized = run(replace(BURST, peak=30_000))
    fixed = run(replace(BURST, peak=30_000, max_start_window=1.0))  # the window as it was before session 28
    assert fixed.servers[0].windows == []
    late_starts = [i for i in range(30_000) if fixed.start_committed[i] >= BURST.peak_at]
    assert late_starts and all(fixed.taken_at[i] > BURST.peak_at for i in late_starts)
    assert fixed.figures_["early"] == 0 and fixed.figures_["started_twice"] == 0
    assert (fixed.figures_["peak"]["lateness_at_start_s"]["p99"]
            > sized.figures_["peak"]["lateness_at_start_s"]["p99"])


def test_a_slower_stores_measured_pace_opens_a_longer_window_up_to_the_bound() -> None:
    quick = run(replace(BURST, peak=10_000))
    slow = run(replace(BURST, peak=10_000, db_arm_ms=0.3, db_start_ms=0.3))  # arms of 2 000 read 300 µs a row
    (_, window, _), = slow.servers[0].windows
    assert slow.servers[0].row_us > BURST.start_row_us
    assert quick.servers[0].windows[0][1] < window <= BURST.max_start_window
    starts = [slow.start_committed[i] for i in range(10_000)]
    assert min(starts) >= BURST.peak_at - window
    assert slow.figures_["early"] == 0 and slow.figures_["not_started"] == 0


def test_without_a_start_window_the_armed_burst_is_started_at_its_instant() -> None:
    at_instant = run(replace(BURST, peak=10_000, start_ahead=0.0))
    figures = at_instant.figures_
    assert figures["early"] == 0 and figures["started_twice"] == 0 and figures["not_started"] == 0
    assert min(at_instant.start_committed[i] for i in range(10_000)) >= BURST.peak_at
    ahead = run(replace(BURST, peak=10_000))
    assert (figures["peak"]["lateness_at_start_s"]["p99"]
            > ahead.figures_["peak"]["lateness_at_start_s"]["p99"])


@pytest.mark.parametrize("lanes", [1, 2, 3])
def test_claim_lanes_split_each_servers_partitions_into_contiguous_runs(lanes: int) -> None:
    simulation = run(replace(SMALL, claim_lanes=lanes, kill_server_at=12.0))
    for s in simulation.servers:
        runs = [simulation.lane_partitions(s, lane) for lane in range(lanes)]
        assert sorted(p for run_ in runs for p in run_) == sorted(s.partitions)  # each once
        owned = sorted(s.partitions)
        for run_ in runs:
            if run_:
                start = owned.index(run_[0])
                assert owned[start:start + len(run_)] == run_  # contiguous in order
        sizes = [len(run_) for run_ in runs if run_]
        assert not sizes or max(sizes) - min(sizes) <= 1
    figures = simulation.figures_
    assert figures["started"] == figures["occurrences"] and figures["started_twice"] == 0
    assert figures["early"] == 0


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


def test_a_window_opening_a_hair_early_in_floating_point_still_starts_its_instant() -> None:
    # 6.034103999999999 + 1.6 rounds to 7.634103999999999, below the instant 7.634104: the
    # window is open (instant − window is now) and what it holds must be taken, not looked at forever.
    config = replace(BURST, peak=1, peak_at=7.634104, start_ahead=1.6)
    simulation = Simulation(config)
    s, due = simulation.servers[0], simulation.due[0]
    heapq.heappush(s.armed, (due, 0))
    s.per_second[math.floor(due)] += 1
    s.armed_count = s.spoken = 1
    simulation.now = due - config.start_ahead
    assert simulation.now + config.start_ahead < due
    def stuck(*_: object) -> None:
        raise TimeoutError("start_due never returned")

    previous = signal.signal(signal.SIGALRM, stuck)  # the loop that never ended fails here, not the suite
    signal.alarm(20)
    try:
        simulation.start_due(s)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not s.armed and list(s.starts.values()) == [[0]]
