"""Instants into protobuf Timestamps: what ``FromDatetime`` gives, to the
microsecond, before and after the epoch and in any zone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from google.protobuf import timestamp_pb2

from tickwheel_server.api.convert import set_timestamp, timestamp


@pytest.mark.parametrize("instant", [
    datetime(1970, 1, 1, tzinfo=timezone.utc),
    datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
    datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc),
    datetime(2026, 12, 5, 3, 0, 0, 123_456, tzinfo=timezone.utc),
    datetime(2026, 12, 5, 3, 0, 0, 5, tzinfo=timezone(timedelta(hours=-9, minutes=-30))),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
])  # fmt: skip
def test_set_timestamp_is_from_datetime(instant: datetime) -> None:
    expected = timestamp_pb2.Timestamp()
    expected.FromDatetime(instant)
    message = timestamp_pb2.Timestamp()
    set_timestamp(message, instant)
    assert message == expected == timestamp(instant)
    assert message.ToDatetime(tzinfo=timezone.utc) == instant


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError):
        set_timestamp(timestamp_pb2.Timestamp(), datetime(2026, 1, 1))
