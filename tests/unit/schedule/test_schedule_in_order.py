"""``schedule_in_order`` (the claim's way of building a Schedule, each slot
written directly) makes the value the dataclass's constructor makes: equal,
with the same hash and text, and as frozen."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from tickwheel_server.schedule import GapPolicy, RepeatPolicy, Schedule, ScheduleKind
from tickwheel_server.schedule.model import schedule_in_order

AT = datetime(2027, 3, 14, 1, 59, 26, 535_897, tzinfo=timezone.utc)
VALUES = [
    (ScheduleKind.ONCE, "", "UTC", AT, GapPolicy.AUTO, RepeatPolicy.AUTO, False, None, None, None, 0, "job_1"),
    (ScheduleKind.CRON, "H/15 1 * * MON-FRI", "Europe/Dublin", None, GapPolicy.SHIFT, RepeatPolicy.BOTH, True,
     timedelta(minutes=5), AT, AT + timedelta(days=30), 12, "job_2"),
    (ScheduleKind.LOCAL, "", "Pacific/Apia", datetime(2011, 12, 30, 9, 0), GapPolicy.SKIP, RepeatPolicy.ONCE,
     False, timedelta(0), None, AT, 1, ""),
]


@pytest.mark.parametrize("values", VALUES, ids=[str(v[0].value) for v in VALUES])
def test_the_same_value_as_the_constructor(values: tuple) -> None:
    built, constructed = schedule_in_order(*values), Schedule(*values)
    assert type(built) is Schedule
    assert built == constructed and hash(built) == hash(constructed) and repr(built) == repr(constructed)
    assert dataclasses.astuple(built) == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.zone = "UTC"  # type: ignore[misc]
