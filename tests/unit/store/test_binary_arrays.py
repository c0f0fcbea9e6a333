"""The claim's array parameters packed a column at a time
(``store/binary_arrays.py``): the bytes psycopg's own list dumper sends for
text and bytea, integers as the column's type, NULLs, refusals; and the
claim's statements carry no list for psycopg to dump element by element."""

from __future__ import annotations

import struct

import psycopg
import pytest
from psycopg.adapt import AdaptersMap, PyFormat, Transformer

from tickwheel_server.store import binary_arrays
from tickwheel_server.store.binary_arrays import (
    BigintArray, ByteaArray, IntegerArray, PackedArray, TextArray, pack_bytea, pack_integers, pack_text,
)
from tickwheel_server.store.claim_writes import ClaimWrites


def psycopg_dump(values: list) -> bytes:
    """What psycopg's own binary list dumper sends for ``values``."""
    return bytes(Transformer().get_dumper(values, PyFormat.BINARY).dump(values))


def unpack(data: bytes) -> tuple[int, list]:
    """A one-dimensional binary array: its element oid and its elements (bytes, None for NULL)."""
    ndim, has_null, oid = struct.unpack_from("!iiI", data)
    if ndim == 0:
        return oid, []
    assert ndim == 1
    length, lower = struct.unpack_from("!ii", data, 12)
    assert lower == 1
    elements, at = [], 20
    for _ in range(length):
        (size,) = struct.unpack_from("!i", data, at)
        at += 4
        if size == -1:
            elements.append(None)
        else:
            elements.append(data[at:at + size])
            at += size
    assert at == len(data)
    assert has_null == (None in elements)
    return oid, elements


TEXTS = [
    ("one ASCII id", ["01KC0000000000000000000001:2026-12-07T00:00:00Z"]),
    ("ids of one length", [f"01KC{index:022d}:2026-12-07T00:00:00Z" for index in range(300)]),
    ("lengths that differ", [f"x{index}" for index in range(300)]),
    ("empty strings among them", ["", "a", "", "bc"]),
    ("every one empty", ["", "", ""]),
    ("quotes, backslashes, commas, braces", ['q"', "\\", "a,b", "{}", "NULL"]),
    ("not ASCII, one length", ["é", "☃"]),
    ("not ASCII, lengths that differ", ["é☃", "x", "日本語テキスト"]),
    ("NULLs", ["a", None, "c", None]),
    ("a NULL among them", ["a", None]),
]


@pytest.mark.parametrize(("name", "values"), TEXTS, ids=[name for name, _ in TEXTS])
def test_text_is_packed_as_psycopg_dumps_it(name, values) -> None:
    assert pack_text(values) == psycopg_dump(values), name
    assert unpack(pack_text(values)) == (25, [None if v is None else v.encode() for v in values])


BYTEAS = [
    ("payloads of one length", [b"{}"] * 100),
    ("payloads that differ", [b"", b"{}", bytes(range(256)), b"\x00\xff"]),
    ("NULLs", [b"x", None, b""]),
]


@pytest.mark.parametrize(("name", "values"), BYTEAS, ids=[name for name, _ in BYTEAS])
def test_bytea_is_packed_as_psycopg_dumps_it(name, values) -> None:
    assert pack_bytea(values) == psycopg_dump(values), name
    assert pack_bytea([None if v is None else memoryview(v) for v in values]) == psycopg_dump(values)


@pytest.mark.parametrize(
    ("size", "values"),
    [
        (4, [0, 1, -1, 255, 2**31 - 1, -(2**31)]),
        (8, [0, 1, -1, 1_796_601_600_000_000, 2**63 - 1, -(2**63)]),
        (4, [7, None, None, 9]),
        (8, [None, 2**40, None]),
        (8, [None]),
    ],
)
def test_integers_go_as_the_column_s_type(size, values) -> None:
    oid, elements = unpack(pack_integers(values, size))
    assert oid == (23 if size == 4 else 20)
    assert elements == [None if v is None else v.to_bytes(size, "big", signed=True) for v in values]


@pytest.mark.parametrize("pack", [pack_text, pack_bytea, lambda v: pack_integers(v, 4), lambda v: pack_integers(v, 8)])
def test_an_empty_column_is_an_array_of_no_dimension(pack) -> None:
    oid, elements = unpack(pack([]))
    assert elements == []


@pytest.mark.parametrize(
    ("pack", "values"),
    [
        (lambda v: pack_integers(v, 4), [1, 2**31]),
        (lambda v: pack_integers(v, 8), [2**63]),
        (lambda v: pack_integers(v, 8), [1.5]),
        (lambda v: pack_integers(v, 8), ["1"]),
        (pack_text, ["a", 3]),
        (pack_text, [None, b"a"]),
        (pack_bytea, [b"a", "a"]),
    ],
)
def test_a_value_the_column_cannot_hold_is_refused_before_anything_is_sent(pack, values) -> None:
    with pytest.raises(psycopg.DataError):
        pack(values)


def test_the_dumpers_are_psycopg_s_for_the_wrappers() -> None:
    transformer = Transformer()
    for wrapper, oid in ((TextArray, 1009), (ByteaArray, 1001), (IntegerArray, 1007), (BigintArray, 1016)):
        dumper = transformer.get_dumper(wrapper([]), PyFormat.BINARY)
        assert dumper.oid == oid
    adapters = AdaptersMap()  # empty: what register() adds, alone
    binary_arrays.register(adapters)
    dumper = Transformer(adapters).get_dumper(TextArray(["a"]), PyFormat.BINARY)
    assert dumper.dump(TextArray(["a"])) == pack_text(["a"])


def test_the_claim_s_writes_send_no_list_for_psycopg_to_dump_element_by_element() -> None:
    writes = ClaimWrites(
        ids=["j1:t"], job_ids=["j1"], tenants=["a"], partitions=[3], nominal_ats=[1], due_ats=[1], handlers=[None],
        missed_counts=[0], payloads=[b"{}"], trace_contexts=["00-x"], cursor_ids=["j1"], next_run_ats=[None],
        next_due_ats=[None], run_counts=[1], states=["completed"], next_nominal_ats=[None], nominal=True,
    )
    statements = [*writes.array_statements(5), writes.handed_out_statement(5, "owner", 6)]
    assert len(statements) == 3
    for _sql, parameters in statements:
        lists = {name: value for name, value in parameters.items() if isinstance(value, list)}
        assert not lists
        assert all(isinstance(value, (PackedArray, int, str)) for value in parameters.values())


def test_the_length_prefixes_kept_are_bounded_whatever_the_sizes_sent() -> None:
    """A tenant's payloads of every size up to its limit: each packed as
    psycopg dumps it, and the prefix tables keep no length past the bound."""
    values = [bytes(size) for size in range(binary_arrays._KEPT_LENGTHS - 2, binary_arrays._KEPT_LENGTHS + 3000)]
    assert pack_bytea(values) == psycopg_dump(values)
    texts = ["x" * size for size in range(binary_arrays._KEPT_LENGTHS + 3000, binary_arrays._KEPT_LENGTHS + 3100)]
    assert pack_text(texts) == psycopg_dump(texts)
    assert max(binary_arrays._LENGTHS) < binary_arrays._KEPT_LENGTHS
    assert max(binary_arrays._TEXT_LENGTHS) < binary_arrays._KEPT_LENGTHS
