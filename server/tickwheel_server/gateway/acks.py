"""A worker's result acks written as wire bytes, its batch made with one parse.

The intake acknowledges a batch of results to each worker in one
PullResponse; each ack's fields are written as bytes (as
:mod:`.assignments` writes assignments) and each worker's message is made
from them with one parse, rather than each ack added to the message field
by field.
"""

from __future__ import annotations

from tickwheel.v1 import worker_pb2

from ..wire import int32_field, length_prefix, varint

_EXECUTION_ID, _DELIVERY, _ACCEPTED, _REASON = b"\x0a", b"\x10", b"\x18", b"\x22"
"""``ResultAck.execution_id`` (1), ``delivery`` (2), ``accepted`` (3), ``reason`` (4)."""
_ACK = b"\x0a"
"""``ResultAcks.acks`` (field 1, length-delimited)."""
_ACKS = b"\x22"
"""``PullResponse.ack`` (field 4, length-delimited)."""
assert worker_pb2.PullResponse.DESCRIPTOR.fields_by_name["ack"].number == 4


class AckBatches:
    """One intake batch's acks, per receiver."""

    __slots__ = ("_parts", "_tails")

    def __init__(self) -> None:
        self._parts: dict[object, list[bytes]] = {}
        self._tails: dict[tuple[int, bool, str], bytes] = {}
        """(delivery, accepted, reason) encoded: a batch's acks share a few."""

    def add(self, receiver: object, execution_id: str, delivery: int, accepted: bool, reason: str) -> None:
        """Queue for ``receiver`` the ack of ``execution_id``'s ``delivery``."""
        tail = self._tails.get((delivery, accepted, reason))
        if tail is None:
            encoded = reason.encode()
            tail = self._tails[delivery, accepted, reason] = b"".join((
                int32_field(_DELIVERY, delivery), int32_field(_ACCEPTED, int(accepted)),
                _REASON + length_prefix(encoded) + encoded if encoded else b"",
            ))  # fmt: skip
        ident = execution_id.encode()
        ack = _EXECUTION_ID + length_prefix(ident) + ident + tail if ident else tail
        parts = self._parts.get(receiver)
        if parts is None:
            parts = self._parts[receiver] = []
        parts.append(_ACK + length_prefix(ack) + ack)

    def messages(self) -> dict[object, worker_pb2.PullResponse]:
        """Each receiver's acks in one message (one parse each), in the order added."""
        messages = {}
        for receiver, parts in self._parts.items():
            inner = b"".join(parts)
            messages[receiver] = worker_pb2.PullResponse.FromString(_ACKS + varint(len(inner)) + inner)
        return messages
