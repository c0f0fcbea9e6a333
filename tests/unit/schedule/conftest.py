"""Schedule-engine test setup.

``zoneinfo`` is pinned to the ``tzdata`` package so the reference and the
engine read the same rules. (Hypothesis profiles live in tests/conftest.py.)
"""

from __future__ import annotations

from tickwheel_server.schedule import pin_tzdata

pin_tzdata()
