"""Secrets given to Tickwheel's commands: read from files, warned about on the command line.

A command-line argument is visible to every local user for the life of the
process (``ps``, ``/proc/PID/cmdline``), and often lands in shell history.
Every secret a Tickwheel command takes (the admin token, an API key, a
worker credential, a store URL's password, a webhook URL's token) can come
from a file (``--…-file``) or the environment instead; when one arrives as a
flag anyway it still works, and the command warns once, naming the safer
ways (:func:`flag_warning`).
"""

from __future__ import annotations

import urllib.parse

MAX_SECRET_BYTES = 64 * 1024


def read_secret_file(path: str, option: str) -> str:
    """The secret in ``path``: its text without surrounding whitespace (a
    trailing newline is usual). ValueError naming ``option`` when the file
    cannot be read, is empty, is not UTF-8 text or is larger than
    :data:`MAX_SECRET_BYTES`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as error:
        raise ValueError(f"{option}: cannot read {path!r}: {error.strerror or error}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise ValueError(f"{option}: {path!r} is larger than {MAX_SECRET_BYTES} bytes; it should hold one secret")
    try:
        secret = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{option}: {path!r} is not UTF-8 text") from None
    if not secret:
        raise ValueError(f"{option}: {path!r} is empty")
    if "\n" in secret or "\r" in secret:
        raise ValueError(f"{option}: {path!r} holds more than one line; it should hold the secret alone")
    return secret


def flag_warning(option: str, *safer: str) -> str:
    """The warning for a secret given as ``option`` on the command line."""
    return (
        f"{option} on the command line is visible to every local user (ps, /proc) and may stay in shell history; "
        f"prefer {' or '.join(safer)}"
    )


def url_has_password(url: str) -> bool:
    """The URL carries a password (``scheme://user:password@host/...``)."""
    try:
        return urllib.parse.urlsplit(url).password is not None
    except ValueError:
        return False


def url_may_carry_token(url: str) -> bool:
    """The URL has a query, or a path beyond ``/``: where webhook services put their tokens."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return False
    return bool(parts.query) or parts.path not in ("", "/") or parts.password is not None
