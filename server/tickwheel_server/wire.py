"""The store's words for enum values ↔ their protobuf numbers, and the
varint of protobuf's wire format, for the code that builds wire messages
by hand (the gateway's assignments, the API's serialized answers).

Pure mappings: an unknown word maps to the enum's UNSPECIFIED (0) by the
caller's ``.get(word, 0)``. The API's own conversions (``api/convert.py``)
import them from here, so one mapping serves both.
"""

from __future__ import annotations

from tickwheel.v1 import execution_pb2

EXECUTION_ORIGIN_TO_PROTO = {
    "scheduled": execution_pb2.EXECUTION_ORIGIN_SCHEDULED,
    "trigger": execution_pb2.EXECUTION_ORIGIN_TRIGGER,
    "backfill": execution_pb2.EXECUTION_ORIGIN_BACKFILL,
}


def varint(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf base-128 varint (a tag or a length)."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SHORT = [varint(value) for value in range(0x4000)]
"""The varints of the lengths and numbers most fields hold (two bytes at most)."""


def length_prefix(value: bytes) -> bytes:
    """A length-delimited field's length, as a varint."""
    size = len(value)
    return _SHORT[size] if size < 0x4000 else varint(size)


def int32_field(tag: bytes, value: int) -> bytes:
    """An int32, bool or enum field (``tag``: its one-byte tag) as protobuf
    writes it: nothing for 0, a negative value as its 64-bit two's complement."""
    if 0 < value < 0x4000:
        return tag + _SHORT[value]
    if value == 0:
        return b""
    return tag + varint(value & 0xFFFF_FFFF_FFFF_FFFF)
