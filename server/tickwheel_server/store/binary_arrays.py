"""Array parameters packed a column at a time for psycopg's binary format.

psycopg dumps a list parameter element by element in Python (a dumper
call, a packed length and two appends each); the claim's writes
(:mod:`.claim_writes`) send fourteen such columns, a batch's thousand
elements each, in every claim. A column wrapped here (:class:`TextArray`,
:class:`ByteaArray`, :class:`IntegerArray`, :class:`BigintArray`) is
packed whole by its dumper: the texts of a column of ASCII strings
joined and encoded once, the integers through :mod:`array`, the length
prefixes from a table. What reaches PostgreSQL is its binary array format
(one dimension, lower bound 1, NULL as length -1), the same bytes
psycopg's own list dumper sends for text and bytea; integers go as the
column's type (``int4``, ``int8``) where psycopg picks the smallest type
the values fit, so the statement's parameter types no longer vary with
the values.

Contract: a wrapper is sent only to a binary placeholder (``%(name)b``)
whose SQL casts it to the same array type; its elements are of the
column's Python type or None, else the dump raises ``psycopg.DataError``
(as PostgreSQL's cast of an out-of-range integer would), nothing sent.
The dumpers are registered on psycopg's global adapters at import and on
every connection the store's engines open (:func:`register`).
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import chain
from typing import Any

import psycopg
from psycopg._encodings import conn_encoding
from psycopg.adapt import Dumper
from psycopg.pq import Format

_HEAD = struct.Struct("!iiI").pack
"""Dimensions, whether a NULL is among the elements, the element type's oid."""
_DIMENSION = struct.Struct("!ii").pack
"""A dimension's length and lower bound."""
_NULL = b"\xff\xff\xff\xff"
"""An element's length -1: NULL."""
_LITTLE = sys.byteorder == "little"


_KEPT_LENGTHS = 4096
"""Lengths below this have their prefix kept once made; a longer one's is
made each time, so a tenant's payloads of every size up to the limit
cannot grow the tables without bound."""


class _Lengths(dict):
    """Length → its 4-byte big-endian prefix, made on first use (kept below :data:`_KEPT_LENGTHS`)."""

    def __missing__(self, length: int) -> bytes:
        prefix = struct.pack("!i", length)
        if length < _KEPT_LENGTHS:
            self[length] = prefix
        return prefix


class _TextLengths(dict):
    """Length → its prefix as four Latin-1 characters (joined with ASCII text, then encoded once)."""

    def __missing__(self, length: int) -> str:
        prefix = struct.pack("!i", length).decode("latin-1")
        if length < _KEPT_LENGTHS:
            self[length] = prefix
        return prefix


_LENGTHS = _Lengths()
_TEXT_LENGTHS = _TextLengths()


class PackedArray:
    """A column of values sent as one binary array parameter (see the module docstring)."""

    __slots__ = ("values",)

    def __init__(self, values: list) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.values!r})"


class TextArray(PackedArray):
    """``TEXT[]``: str or None elements."""


class ByteaArray(PackedArray):
    """``BYTEA[]``: bytes or None elements."""


class IntegerArray(PackedArray):
    """``INTEGER[]``: int or None elements, each within 32 bits."""


class BigintArray(PackedArray):
    """``BIGINT[]``: int or None elements, each within 64 bits."""


def _framed(values: list, element_oid: int, body: bytes, has_null: bool) -> bytes:
    if not values:
        return _HEAD(0, 0, element_oid)
    return _HEAD(1, 1 if has_null else 0, element_oid) + _DIMENSION(len(values), 1) + body


def pack_text(values: list, encoding: str = "utf-8") -> bytes:
    """``values`` (str or None) as a binary ``text[]`` of one dimension."""
    try:
        joined = "".join(values)
    except TypeError:  # a None (NULL) among them, or not a str
        parts = [_NULL if value is None else _LENGTHS[len(encoded := _text(value).encode(encoding))] + encoded
                 for value in values]
        return _framed(values, 25, b"".join(parts), None in values)
    if joined.isascii() and encoding.replace("_", "-").lower() in ("utf-8", "utf8"):
        # One character a byte: each length is the string's, and the whole
        # column (prefixes as Latin-1 characters) is encoded in one call.
        return _framed(values, 25, _prefixed(values, _TEXT_LENGTHS, "").encode("latin-1"), False)
    encoded = [value.encode(encoding) for value in values]
    return _framed(values, 25, _prefixed(encoded, _LENGTHS, b""), False)


def _prefixed(values: list, prefixes: dict, empty):
    """``values`` (str or bytes), each after its length's prefix, joined:
    one join with the prefix between them where every length is the same
    (a column of ids), else one join of the pairs."""
    if not values:
        return empty
    lengths = set(map(len, values))
    if len(lengths) == 1:
        prefix = prefixes[lengths.pop()]
        return prefix + prefix.join(values)
    return empty.join(chain.from_iterable(zip(map(prefixes.__getitem__, map(len, values)), values)))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise psycopg.DataError(f"an array of text holds {type(value).__name__} {value!r}")
    return value


def pack_bytea(values: list) -> bytes:
    """``values`` (bytes, bytearray, memoryview or None) as a binary ``bytea[]`` of one dimension."""
    if set(map(type, values)) - {bytes}:
        values = [None if value is None else _bytes(value) for value in values]
    if None in values:
        parts = [_NULL if value is None else _LENGTHS[len(value)] + value for value in values]
        return _framed(values, 17, b"".join(parts), True)
    return _framed(values, 17, _prefixed(values, _LENGTHS, b""), False)


def _bytes(value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise psycopg.DataError(f"an array of bytea holds {type(value).__name__} {value!r}")
    return bytes(value)


def pack_integers(values: list, size: int) -> bytes:
    """``values`` (int or None) as a binary ``int4[]`` (``size`` 4) or
    ``int8[]`` (8) of one dimension; psycopg.DataError if one is not an
    int or does not fit."""
    element_oid, code = (23, "i") if size == 4 else (20, "q")
    has_null = None in values
    try:
        packed = array(code, [0 if value is None else value for value in values] if has_null else values)
    except (OverflowError, TypeError) as error:
        raise psycopg.DataError(f"an array of {8 * size}-bit integers holds a value it cannot: {error}") from None
    if _LITTLE:
        packed.byteswap()
    raw = packed.tobytes()
    if has_null:
        return _framed(values, element_oid, _with_nulls(values, raw, size), True)
    count, stride = len(values), size + 4
    body = bytearray(stride * count)  # each element: its length 0x000000<size>, then its big-endian bytes
    body[3::stride] = bytes((size,)) * count
    for offset in range(size):
        body[4 + offset::stride] = raw[offset::size]
    return _framed(values, element_oid, bytes(body), False)


def _with_nulls(values: list, raw: bytes, size: int) -> bytes:
    prefix = _LENGTHS[size]
    return b"".join(
        _NULL if value is None else prefix + raw[index * size:(index + 1) * size] for index, value in enumerate(values)
    )


class _PackedDumper(Dumper):
    format = Format.BINARY

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        self._encoding = conn_encoding(self.connection)


class TextArrayDumper(_PackedDumper):
    oid = 1009  # text[]

    def dump(self, obj: TextArray) -> bytes:
        return pack_text(obj.values, self._encoding)


class ByteaArrayDumper(_PackedDumper):
    oid = 1001  # bytea[]

    def dump(self, obj: ByteaArray) -> bytes:
        return pack_bytea(obj.values)


class IntegerArrayDumper(_PackedDumper):
    oid = 1007  # int4[]

    def dump(self, obj: IntegerArray) -> bytes:
        return pack_integers(obj.values, 4)


class BigintArrayDumper(_PackedDumper):
    oid = 1016  # int8[]

    def dump(self, obj: BigintArray) -> bytes:
        return pack_integers(obj.values, 8)


_DUMPERS = (
    (TextArray, TextArrayDumper), (ByteaArray, ByteaArrayDumper),
    (IntegerArray, IntegerArrayDumper), (BigintArray, BigintArrayDumper),
)


def register(adapters: Any) -> None:
    """Register the wrappers' dumpers on ``adapters`` (psycopg's global
    ``psycopg.adapters``, a connection's or a cursor's)."""
    for cls, dumper in _DUMPERS:
        adapters.register_dumper(cls, dumper)


register(psycopg.adapters)
