"""Schedule-engine test setup.

Hypothesis profiles: ``ci`` (the default here; 100 examples, no deadline, so
this folder stays well under a minute on two cores) and ``thorough`` (for a
long local run: ``HYPOTHESIS_PROFILE=thorough``). ``zoneinfo`` is pinned to
the ``tzdata`` package so the reference and the engine read the same rules.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

from tickwheel_server.schedule import pin_tzdata

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=False,
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
try:
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except InvalidArgument:  # a profile registered elsewhere and not loaded yet
    settings.load_profile("ci")

pin_tzdata()
