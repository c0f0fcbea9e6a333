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
