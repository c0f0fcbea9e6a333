"""The store's words for enum values ↔ their protobuf numbers, for the
layers below the API that build wire messages (the gateway's assignments).

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
