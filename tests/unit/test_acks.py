"""A worker's result acks, written as bytes and made into its message with
one parse (``AckBatches``), are the message protobuf builds ack by ack:
each field, each receiver's own acks, in the order added."""

from __future__ import annotations

from tickwheel.v1 import worker_pb2

from tickwheel_server.gateway.acks import AckBatches

ACKS = [
    ("e0", 2, False, ""),
    ("e1", 1, True, ""),
    ("e2", 1, True, ""),
    ("e3", 2, False, "delivery 2 is not the execution's current one"),
    ("e" * 300, 300, True, ""),
    ("", 0, False, ""),
    ("e4", -1, False, "é" * 200),
    ("e5", 2**31 - 1, True, "late"),
    ("e6", 1, False, ""),
    ("e7", 2, True, ""),
]


def test_acks_written_as_bytes_are_the_acks_protobuf_builds() -> None:
    batches = AckBatches()
    expected: dict[str, worker_pb2.PullResponse] = {}
    for number, (execution_id, delivery, accepted, reason) in enumerate(ACKS * 2):
        receiver = ("worker-a", "worker-b", "worker-c")[number % 3]
        batches.add(receiver, execution_id, delivery, accepted, reason)
        expected.setdefault(receiver, worker_pb2.PullResponse()).ack.acks.add(
            execution_id=execution_id, delivery=delivery, accepted=accepted, reason=reason
        )
    messages = batches.messages()
    assert list(messages) == list(expected)
    for receiver, message in messages.items():
        assert message == expected[receiver]
        assert message.SerializeToString() == expected[receiver].SerializeToString()
        assert message.WhichOneof("message") == "ack"


def test_no_acks_make_no_messages() -> None:
    assert AckBatches().messages() == {}
