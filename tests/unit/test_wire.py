"""wire.varint against protobuf's own encoding of the same value."""

from __future__ import annotations

import pytest
from google.protobuf import wrappers_pb2

from tickwheel_server.wire import varint


@pytest.mark.parametrize("value", [0, 1, 0x7F, 0x80, 300, 16383, 16384, 2**31 - 1, 2**32, 2**63 - 1])
def test_a_varint_is_protobufs(value: int) -> None:
    # UInt64Value.value is field 1, varint: its serialization is the tag 0x08 then the varint.
    encoded = wrappers_pb2.UInt64Value(value=value).SerializeToString()
    assert varint(value) == (encoded[1:] if value else b"\x00")
