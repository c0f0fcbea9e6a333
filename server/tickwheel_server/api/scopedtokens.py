"""Page tokens bound to the listing and the filter that made them (ListApiKeys, ListWorkerCredentials)."""

from __future__ import annotations

import hashlib
from datetime import datetime

from tickwheel.shared.ids import from_us, to_us

from ..errors import InvalidArgument
from . import convert

_CHECK_CHARS = 16
"""Hex characters of the check a token carries (a digest of the listing, the
filter and the key): a token edited by hand, or made by another listing or
for another filter, does not match it."""
_REFUSED = "not a page token of this listing: ask for the first page again"


def _check(listing: str, scope: str, key: str) -> str:
    digest = hashlib.sha256("\0".join((listing, scope, key)).encode()).hexdigest()
    return digest[:_CHECK_CHARS]


def scoped_page_token(listing: str, scope: str, key: tuple[datetime, str] | None) -> str:
    """The opaque token of the page that continues after ``key`` = (created
    instant, id) in ``listing`` (the RPC's name) under the filter ``scope``
    (the request's tenant, possibly empty); empty for ``None`` (the last page)."""
    if key is None:
        return ""
    position = f"{to_us(key[0])}:{key[1]}"
    return convert.page_token(f"{listing}:{_check(listing, scope, position)}:{position}")


def parse_scoped_page_token(token: str, listing: str, scope: str) -> tuple[datetime, str] | None:
    """The (created instant, id) a page continues after; None for the first
    page. INVALID_ARGUMENT ``page_token`` for a token this server did not
    make for ``listing`` under ``scope``: another RPC's or another tenant's,
    or one altered."""
    text = convert.parse_page_token(token)
    if not token:
        return None
    named, _, rest = text.partition(":")
    check, _, position = rest.partition(":")
    micros, _, ident = position.partition(":")
    if named != listing or not ident or check != _check(listing, scope, position):
        raise InvalidArgument.field("page_token", _REFUSED)
    try:
        return from_us(int(micros)), ident
    except (ValueError, OverflowError):
        raise InvalidArgument.field("page_token", _REFUSED) from None
