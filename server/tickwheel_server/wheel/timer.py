"""One timer: what the wheel holds and what it hands back when due.

A timer is a plain ``(key, due_us, payload)`` tuple: ``key`` identifies it
(the execution id), ``due_us`` is its due instant in integer microseconds
since the Unix epoch, UTC, as the store keeps it
(``tickwheel.shared.ids.to_us``), and ``payload`` is whatever the caller needs
when it fires (for the gateway: partition, ready_at). A plain tuple rather
than a NamedTuple because the wheel builds one per insert and a NamedTuple
costs five times as much to build; unpack it: ``for key, due_us, payload in
batch``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeAlias

Timer: TypeAlias = tuple[Hashable, int, Any]
