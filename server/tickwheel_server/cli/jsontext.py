"""JSON text a user's file or flag holds, read strictly and written back
exactly. Pure: no I/O.

:func:`loads` refuses what the standard parser lets through or dies on:
``NaN`` and ``Infinity`` (no JSON holds them; Go's and JavaScript's
parsers refuse the text), a key given twice in one object (the parser
keeps the last silently), nesting past :data:`MAX_DEPTH` (CPython's parser
raises RecursionError, not ValueError, about a thousand levels down). A
number with a fraction or an exponent is kept as a ``Decimal``, exactly as
written, so that :func:`dumps` writes back the number written: as Python
writes the float when the float is that number (the text every earlier
version sent), with its digits when no float is (a float kept 17 digits:
``12345678901234567890.12`` became ``1.2345678901234567e+19``, ``1e400``
became ``Infinity``).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

__all__ = ["MAX_DEPTH", "JsonError", "dumps", "loads", "nesting"]

MAX_DEPTH = 64
"""Nesting of a document (its objects and arrays, the outermost counted)."""


class JsonError(ValueError):
    """JSON text refused: ``reason``, and ``key``, the top-level key of the
    object whose value is at fault ("" when the text is not an object, or
    for a fault of the text as a whole)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


class _Twice(dict):  # type: ignore[type-arg]
    """An object as read that gave ``twice`` twice."""

    def __init__(self, pairs: list[tuple[str, Any]], twice: str) -> None:
        super().__init__(pairs)
        self.twice = twice


class _Constant:
    """``NaN``, ``Infinity`` or ``-Infinity`` as read: refused by the check,
    which knows under which key it stands."""

    def __init__(self, name: str) -> None:
        self.name = name


class _Inexact(Exception):
    """A Decimal no float is: :func:`dumps` writes its digits itself."""


def loads(text: str) -> Any:
    """The one JSON value ``text`` holds. Raises :class:`JsonError` for text
    that is not JSON, nests deeper than :data:`MAX_DEPTH`, holds ``NaN`` or
    ``Infinity`` or gives a key twice in one object."""
    suspect = []  # a key twice or a constant seen: the walk below finds where

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(items)
        if len(value) == len(items):
            return value
        suspect.append(True)
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                break
            seen.add(key)
        return _Twice(items, key)

    def constant(name: str) -> _Constant:
        suspect.append(True)
        return _Constant(name)

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_float=Decimal, parse_constant=constant)
    except RecursionError:
        raise JsonError("", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise JsonError("", f"not valid JSON: {error}") from None
    if suspect or text.count("[") + text.count("{") > MAX_DEPTH:  # fewer brackets cannot nest deeper
        _check(value)
    return value


def _check(value: Any) -> None:
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, key = stack.pop()
        if depth > MAX_DEPTH:
            raise JsonError(key, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, _Constant):
            raise JsonError(key, f"{item.name} is not JSON (no JSON number is infinite or not a number)")
        if isinstance(item, dict):
            if isinstance(item, _Twice):
                raise JsonError(key or item.twice, f"the key {item.twice[:60]!r} is given twice")
            stack.extend((child, depth + 1, key or name) for name, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, depth + 1, key) for child in item)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (what :func:`loads` returns, or plain
    dicts, lists and scalars): a ``Decimal`` as written, a string with a
    lone surrogate (valid in JSON text, not in UTF-8) escaped, so that the
    text always encodes. Raises ValueError for a float NaN or infinity,
    TypeError for a value JSON has no form for; the caller bounds the
    nesting (at most :data:`MAX_DEPTH`)."""
    try:  # the common case, in C: every Decimal a float
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_as_float)
        text.encode("utf-8")
        return text
    except (_Inexact, UnicodeEncodeError):
        return _dumps(value)


def _as_float(value: Any) -> float:
    if isinstance(value, Decimal):
        approximate = float(value)
        text = repr(approximate)
        if text == str(value) or (math.isfinite(approximate) and Decimal(text) == value):  # the first, cheaper
            return approximate
        raise _Inexact
    raise TypeError(f"{type(value).__name__} is not JSON")


def _dumps(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(str(k))}:{_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Decimal):
        return _number(value)
    return json.dumps(value, allow_nan=False)


def _number(value: Decimal) -> str:
    """A float's text where the float is the number (``1.50`` as ``1.5``,
    as before Decimals were kept), the digits as written where it is not."""
    if not value.is_finite():
        raise ValueError(f"{value} is not JSON")
    try:
        return repr(_as_float(value))
    except _Inexact:
        return str(value)


def _string(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    try:
        quoted.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)
    return quoted


def nesting(value: Any) -> int:
    """How deeply ``value``'s lists and dicts nest (1 for a scalar), without
    recursing; the count stops past :data:`MAX_DEPTH`."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest
