"""A burst's start window (gateway/armed.py, ``ArmedQueue.start_window_us``):
sized by what is armed for its instant at the measured start rate, bounded,
every batch started before the instant and sent at it, never before; with a
fake clock, on SQLite and PostgreSQL."""

from __future__ import annotations

from tickwheel.shared.ids import to_us
from tickwheel_server.gateway.armed import DEFAULT_START_AHEAD
from tickwheel_server.gateway.connections import Connections
from tickwheel_server.store.tenants import Tenant, TenantStore

from .test_armed_queue import finish, rows, sent
from .test_arming import add_one_off
from .test_gateway_liveness import connect, make_gateway

BURST = 12
ROW_US = 150_000.0
"""A start's cost per row the tests pin: 12 runs in batches of 2, two starts
under way, are three rounds of starts of 0.3 s, 0.9 s, and twice that."""
WINDOW_US = 1_800_000


async def armed_burst(engine, clock, *, later: tuple[str, ...] = ()):
    """Tenant acme with :data:`BURST` one-offs ``e0``… due in 4 s (``later``
    4.5 s), armed by a gateway with one worker of 20 slots, batches of 2 and
    the start rate pinned: (gateway, connection, the burst's instant in µs)."""
    clock.autojump = False  # time passes only as the test says
    await TenantStore(engine, clock).create(Tenant(name="acme"))
    for n in range(BURST):
        add_one_off(engine, clock, f"e{n}", due_in=4)
    for ident in later:
        add_one_off(engine, clock, ident, due_in=4.5)
    connections = Connections()
    connection = connect(connections, clock, slots=20)
    gateway = make_gateway(engine, clock, connections)
    gateway.armed.batch = 2
    gateway.armed.row_us = ROW_US
    assert await gateway.rounds.hand_out_round() == 0
    assert len(gateway.armed) == BURST + len(later)
    return gateway, connection, rows(engine)["e0"][3]


async def advance_to(gateway, clock, at_us: int) -> int:
    """Move the clock to ``at_us`` and run a round: how many it sent."""
    clock.advance((at_us - to_us(clock.now())) / 1e6)
    return await gateway.rounds.hand_out_round()


async def test_a_bursts_start_window_opens_as_long_before_its_instant_as_its_starts_take(
    migrated_engine, clock
) -> None:
    """Twelve runs on one instant take three rounds of starts at the pinned
    rate: their window opens 1.8 s ahead (a fixed second left the last
    rounds of starts after the instant), every batch is started then and
    none is sent before the instant."""
    gateway, connection, due_us = await armed_burst(migrated_engine, clock)
    assert gateway.armed.next_instant_us(0) == due_us - WINDOW_US
    assert gateway.armed.start_window_us(due_us) == WINDOW_US
    assert await advance_to(gateway, clock, due_us - WINDOW_US - 1) == 0
    assert {r[0] for r in rows(migrated_engine).values()} == {"armed"}
    assert await advance_to(gateway, clock, due_us - WINDOW_US) == 0
    after = rows(migrated_engine)
    assert {r[0] for r in after.values()} == {"running"}  # the whole burst started ahead
    # Stamped with its instant (each start's a microsecond apart: unique), never before it.
    assert all(due_us <= at < due_us + 1_000 for _status, _delivery, at, _due in after.values())
    assert gateway.armed.waiting_to_send == BURST and sent(connection) == []
    assert await advance_to(gateway, clock, due_us - 1) == 0
    assert sent(connection) == []
    assert await advance_to(gateway, clock, due_us) == BURST
    assert sent(connection) == sorted((f"e{n}", 1) for n in range(BURST))


async def test_a_run_after_a_burst_keeps_its_own_window_and_instant(migrated_engine, clock) -> None:
    """``z1``, due 0.5 s after the burst, in its second, counts in the
    burst's window (13 runs: four rounds of starts, 2.4 s) but is not
    started at its opening: once the burst is started its own window (the
    second) opens 0.5 s before the burst's instant; it is sent at its own
    instant, never with the burst."""
    gateway, connection, due_us = await armed_burst(migrated_engine, clock, later=("z1",))
    later_us = rows(migrated_engine)["z1"][3]
    assert later_us == due_us + 500_000
    window_us = 2_400_000
    assert gateway.armed.next_instant_us(0) == due_us - window_us
    await advance_to(gateway, clock, due_us - window_us)
    assert gateway.armed.waiting_to_send == BURST
    assert rows(migrated_engine)["z1"][:2] == ("armed", 1)
    assert gateway.armed.next_instant_us(to_us(clock.now())) == later_us - int(DEFAULT_START_AHEAD * 1_000_000)
    assert await advance_to(gateway, clock, due_us - 500_000) == 0
    assert rows(migrated_engine)["z1"][0] == "running" and rows(migrated_engine)["z1"][2] >= later_us
    assert await advance_to(gateway, clock, due_us) == BURST
    assert ("z1", 1) not in sent(connection)
    assert await advance_to(gateway, clock, later_us - 1) == 0
    assert await advance_to(gateway, clock, later_us) == 1
    assert sent(connection) == [("z1", 1)]


async def test_the_window_is_start_ahead_for_a_small_instant_and_bounded_for_a_burst(
    migrated_engine, clock, monkeypatch
) -> None:
    """An instant whose runs fit the starts under way at once keeps
    ``start_ahead`` however slow a start; a burst's window grows with the
    measured rate up to :data:`MAX_START_WINDOW`; a fast store keeps the
    second, and a pace measured below :data:`START_ROW_US` counts as it;
    ``start_ahead`` 0 (no start ahead) stays 0."""
    from tickwheel_server.gateway import armed as armed_module
    from tickwheel_server.gateway.armed import MAX_START_WINDOW, ArmedQueue

    gateway, _connection, due_us = await armed_burst(migrated_engine, clock)
    queue = gateway.armed
    queue.row_us = 10_000_000.0
    assert queue.start_window_us(due_us) == int(MAX_START_WINDOW * 1_000_000)
    queue.batch = BURST // queue.start_depth  # one round of starts
    assert queue.start_window_us(due_us) == int(DEFAULT_START_AHEAD * 1_000_000)
    queue.batch = 2
    queue.row_us = 10.0
    assert queue.start_window_us(due_us) == int(DEFAULT_START_AHEAD * 1_000_000)
    monkeypatch.setattr(armed_module, "START_ROW_US", ROW_US)  # the floor under a pace measured too low
    assert queue.start_window_us(due_us) == WINDOW_US
    monkeypatch.undo()
    assert queue.start_window_us(due_us + 5_000_000) == int(DEFAULT_START_AHEAD * 1_000_000)  # nothing armed then
    off = ArmedQueue(queue._store, queue._requeues, clock, queue._fence, start_ahead=0)
    assert off.start_window_us(due_us) == 0


async def test_a_pause_before_a_bursts_window_wins_and_within_it_the_started_run_ends_once(
    migrated_engine, clock
) -> None:
    """Paused before the burst's window opens, ``e0``'s run is disarmed and
    never sent. Paused inside it (1.5 s ahead: inside the sized window,
    outside a fixed second's), ``e1``'s run was started and goes on as a
    started run does (docs/architecture.md, "Hand-outs decided ahead"):
    sent at its instant, never before, ended once."""
    from tickwheel_server.store.jobs import JobStore

    gateway, connection, due_us = await armed_burst(migrated_engine, clock)
    jobs = JobStore(migrated_engine, clock, partition_count=16)
    clock.advance((due_us - WINDOW_US - 100_000 - to_us(clock.now())) / 1e6)
    await jobs.pause("acme", "job_e0")
    assert rows(migrated_engine)["e0"][:2] == ("waiting", 0)  # disarmed, held by the pause
    assert await advance_to(gateway, clock, due_us - WINDOW_US) == 0
    assert await advance_to(gateway, clock, due_us - 1_500_000) == 0
    assert rows(migrated_engine)["e1"][:2] == ("running", 1)
    await jobs.pause("acme", "job_e1")
    assert await advance_to(gateway, clock, due_us - 1) == 0 and sent(connection) == []
    assert await advance_to(gateway, clock, due_us) == BURST - 1
    assert await finish(gateway, connection) == sorted((f"e{n}", 1) for n in range(1, BURST))
    ended = rows(migrated_engine)
    assert ended["e0"][:2] == ("waiting", 0)
    assert {ident: r[:2] for ident, r in ended.items() if ident != "e0"} == {
        f"e{n}": ("succeeded", 1) for n in range(1, BURST)}


async def test_a_bursts_arming_is_not_cut_by_its_own_longer_window(migrated_engine, clock, monkeypatch) -> None:
    """An arming pass stops for starts once what it armed is within
    ``start_ahead`` of its instant, not when a burst's longer window opens:
    cut there, the burst's last arms waited for the starts of the rest and
    were started after the instant. Here the burst's window opens during
    its first arm (1.5 s ahead): the pass arms on, then the round starts
    the whole burst, before the instant."""
    clock.autojump = False
    await TenantStore(migrated_engine, clock).create(Tenant(name="acme"))
    for n in range(BURST):
        add_one_off(migrated_engine, clock, f"e{n}", due_in=4)
    connections = Connections()
    connection = connect(connections, clock, slots=20)
    gateway = make_gateway(migrated_engine, clock, connections)
    gateway.armed.batch = 2
    gateway.armed.row_us = ROW_US
    store = gateway.armed._store
    real_arm, real_start = store.arm, store.start
    calls: list[str] = []

    async def arm(*args, **kwargs):
        armed = await real_arm(*args, **kwargs)
        calls.append("arm")
        if len(calls) == 1:
            clock.advance(4 - 1.5)  # the first arm lasted until the burst's window was open
        return armed

    async def start(owner, items, *args, **kwargs):
        calls.append("start")
        return await real_start(owner, items, *args, **kwargs)

    monkeypatch.setattr(store, "arm", arm)
    monkeypatch.setattr(store, "start", start)
    monkeypatch.setattr(gateway.armed, "_measured", lambda rows, began: None)  # the pace stays pinned
    assert await gateway.rounds.hand_out_round() == 0
    arms = calls.index("start")
    assert calls[:arms] == ["arm"] * arms and arms >= BURST // 2 and "arm" not in calls[arms:], calls
    assert gateway.armed.waiting_to_send == BURST and sent(connection) == []
    due_us = rows(migrated_engine)["e0"][3]
    assert await advance_to(gateway, clock, due_us) == BURST
