"""A raw HTTP/2 client for hostile-transport tests: frames written by hand,
so it can do what no gRPC client does (ignore the server's stream limit)."""

from __future__ import annotations

import asyncio
import struct
from typing import NamedTuple

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY = 0, 1, 3, 4, 7
END_STREAM, END_HEADERS = 0x1, 0x4
SETTINGS_MAX_CONCURRENT_STREAMS = 3


class Frame(NamedTuple):
    kind: int
    flags: int
    stream: int
    payload: bytes


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK literal header, not indexed (names and values under 127 bytes)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes((len(n),)) + n + bytes((len(v),)) + v


def unary_request(stream: int, authority: str, path: str, message: bytes = b"") -> bytes:
    """The HEADERS and the one DATA frame (ending the stream) of a gRPC call of ``path``."""
    headers = b"".join(_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
        ("content-type", "application/grpc"), ("te", "trailers"),
    ))  # fmt: skip
    body = b"\x00" + struct.pack(">I", len(message)) + message
    return frame(HEADERS, END_HEADERS, stream, headers) + frame(DATA, END_STREAM, stream, body)


async def connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that has sent the client preface and empty SETTINGS."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(PREFACE + frame(SETTINGS, 0, 0))
    await writer.drain()
    return reader, writer


async def next_frame(reader: asyncio.StreamReader) -> Frame | None:
    """The next frame the server sends, or None once it closed the connection."""
    try:
        head = await reader.readexactly(9)
        payload = await reader.readexactly(int.from_bytes(head[:3], "big"))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return Frame(head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload)


def settings(payload: bytes) -> dict[int, int]:
    """A SETTINGS frame's values by identifier."""
    return {int.from_bytes(payload[i : i + 2], "big"): int.from_bytes(payload[i + 2 : i + 6], "big")
            for i in range(0, len(payload), 6)}  # fmt: skip
