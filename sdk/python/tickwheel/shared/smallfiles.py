"""A small file read whole, never past its bound: /dev/zero, or a FIFO written to without end, is refused, not read forever.

The files an operator names to a command (a PEM certificate or key, a
token, a config, ``tickwheel dev``'s credentials) hold kilobytes; read
with ``Path.read_bytes`` they were read to their end, and one without end
(``--ca-cert /dev/zero``, a FIFO whose writer never stops) held the
command and its memory until it was killed. A FIFO that no one writes to
waits, as stdin does: what is bounded is what is read, not how long.
"""

from __future__ import annotations

import errno
import os

MAX_SMALL_FILE_BYTES = 4 * 1024 * 1024
"""What such a file may hold: a PEM bundle of every public CA is about 0.2 MiB."""


def read_small(path: str | os.PathLike[str], limit: int = MAX_SMALL_FILE_BYTES) -> bytes:
    """``path``'s bytes, at most ``limit``. ``OSError`` as ``open`` raises it,
    or (``errno.EFBIG``, its ``filename`` the path, its ``strerror`` saying
    so) for a file holding more, having read ``limit`` and one byte: a file
    without end is refused as soon as that much has come."""
    with open(path, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"more than {limit} bytes, larger than such a file is (no end?)", os.fspath(path))
    return data
