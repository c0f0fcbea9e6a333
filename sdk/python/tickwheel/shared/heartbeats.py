"""The heartbeat interval a server may announce in its welcome.

The server refuses a configuration outside these bounds; a worker clamps
an announced interval into them (a hostile or broken server announcing
a millisecond would make it heartbeat in a tight loop, one announcing a
year would never hear that the server died).
"""

from __future__ import annotations

MIN_HEARTBEAT_INTERVAL = 0.05
"""Seconds; the shortest heartbeat interval (tests run servers this fast)."""
MAX_HEARTBEAT_INTERVAL = 300.0
"""Seconds; the longest heartbeat interval."""


def clamp_heartbeat_interval(seconds: float) -> float:
    """``seconds`` within [:data:`MIN_HEARTBEAT_INTERVAL`, :data:`MAX_HEARTBEAT_INTERVAL`]."""
    return min(MAX_HEARTBEAT_INTERVAL, max(MIN_HEARTBEAT_INTERVAL, seconds))
