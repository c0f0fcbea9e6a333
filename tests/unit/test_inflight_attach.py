"""InFlight.attach_many (a batch's deliveries attached to one stream at its
send) leaves the table exactly as one attach per delivery would: new
deliveries, a delivery another stream held (taken from it), one this stream
held already, and a result pending that stays pending."""

from __future__ import annotations

from tickwheel_server.gateway.inflight import Holding, InFlight


def state(flight: InFlight) -> tuple:
    entries = {key: (e.partition, id(e.connection) if e.connection is not None else None, e.worker_id, e.last_seen,
                     e.orphaned_at, e.cancel_sent, e.result_pending)
               for key, e in flight._entries.items()}
    held = {owner: sorted(keys) for owner, keys in flight._by_connection.items() if keys}
    return entries, held, sorted(flight._by_connection)


def setup(flight: InFlight, a: object, b: object) -> None:
    flight.attach(a, ("old-a", 1), 3, "wa", 1.0)
    flight.attach(b, ("old-b", 1), 4, "wb", 1.0)
    flight.attach(b, ("pending-b", 1), 4, "wb", 1.0)
    assert flight.hold_result(b, ("pending-b", 1)) is Holding.HELD


def test_attach_many_is_one_attach_per_delivery() -> None:
    a, b = object(), object()
    items = [(("new", 1), 1), (("old-b", 1), 2), (("old-a", 1), 3), (("pending-b", 1), 4), (("new", 2), 5)]
    one, many = InFlight(timeout=30, grace=10), InFlight(timeout=30, grace=10)
    setup(one, a, b)
    setup(many, a, b)
    for key, partition in items:
        one.attach(a, key, partition, "wa", 2.0)
    many.attach_many(a, items, "wa", 2.0)
    assert state(many) == state(one)
    assert many.held_by(a) == sorted(key for key, _ in items)
    assert many.held_by(b) == []
    assert many.hold_result(a, ("pending-b", 1)) is Holding.DUPLICATE  # still pending, now on a's stream
    assert many.hold_result(b, ("old-b", 1)) is Holding.NOT_HELD  # b no longer holds it


def test_a_stream_that_held_only_one_delivery_re_attached_keeps_the_rest() -> None:
    """Re-attaching the only delivery a stream holds drops and remakes its
    set; the deliveries after it in the batch must land in the new one."""
    a = object()
    flight = InFlight(timeout=30, grace=10)
    flight.attach(a, ("only", 1), 1, "wa", 1.0)
    flight.attach_many(a, [(("only", 1), 1), (("next", 1), 1), (("last", 1), 1)], "wa", 2.0)
    assert flight.held_by(a) == [("last", 1), ("next", 1), ("only", 1)]
    assert flight.detach(a, 3.0) == 3


def test_nothing_to_attach_leaves_nothing() -> None:
    a = object()
    flight = InFlight(timeout=30, grace=10)
    flight.attach_many(a, [], "wa", 1.0)
    assert len(flight) == 0 and flight._by_connection == {}


def test_done_takes_the_delivery_from_the_stream_that_holds_it_and_no_other() -> None:
    """``done`` (thousands a result batch) drops the entry and its stream's
    hold on it; a key no stream holds, an orphaned one, or one ended twice
    changes nothing else, and a stream left holding nothing is forgotten."""
    a, b = object(), object()
    flight = InFlight(timeout=30, grace=10)
    setup(flight, a, b)
    flight.attach(a, ("other-a", 1), 3, "wa", 1.0)
    flight.done(("old-b", 1))
    assert flight.held_by(b) == [("pending-b", 1)] and flight.held_by(a) == [("old-a", 1), ("other-a", 1)]
    before = state(flight)
    flight.done(("old-b", 1))  # twice: nothing more
    flight.done(("nobody", 7))  # held by no stream
    flight.done(("old-a", 2))  # another delivery of a held execution
    assert state(flight) == before
    flight.done(("pending-b", 1))
    assert id(b) not in flight._by_connection, "a stream holding nothing is forgotten"
    assert flight.detach(a, 2.0) == 2
    flight.done(("old-a", 1))  # orphaned: waiting for a re-attachment
    assert sorted(flight._entries) == [("other-a", 1)] and flight._by_connection == {}
