"""``post_json`` (the alert webhook's POST) against a real socket sink that
never gives a whole answer: it drips its status line a byte at a time, or
answers ``100 Continue`` for ever, each within the per-operation timeout.
The POST ends with TimeoutError (a retryable failure) instead of holding
its sender, and the server's stop, for as long as the sink likes. A sink
that answers is read as before."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from tickwheel_server.alerts.webhook import post_json

HANG_GUARD = 60.0
"""Only turns a hang (the bug) into a failure; the POSTs end at their 0.5 s timeout."""

ANSWERS = {
    "/drip": (b"", b"H", 0.05),
    "/continues": (b"", b"HTTP/1.1 100 Continue\r\n\r\n", 0.05),
    "/ok": (b"HTTP/1.1 204 No Content\r\n\r\n", b"", 0.0),
}


@pytest.fixture
def sink() -> Iterator[int]:
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)

    def answer(sock: socket.socket) -> None:
        with sock, contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, block, pause = ANSWERS[data.split(b" ")[1].decode()]
            sock.sendall(head)
            while block and not stop.is_set():
                sock.sendall(block)
                stop.wait(pause)

    def accept() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(sock,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()


@pytest.mark.parametrize("path", ["/drip", "/continues"])
async def test_a_sink_that_never_gives_a_whole_answer_is_cut_off_at_the_timeout(sink: int, path: str) -> None:
    with pytest.raises(TimeoutError, match="no whole answer within 0.5 s"):
        await asyncio.wait_for(post_json(f"http://127.0.0.1:{sink}{path}", b"{}", {}, 0.5), HANG_GUARD)


async def test_a_sink_that_answers_is_read(sink: int) -> None:
    assert await post_json(f"http://127.0.0.1:{sink}/ok", b"{}", {}, 5.0) == 204
