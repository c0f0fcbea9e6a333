"""A TCP forwarder to etcd that a test can cut and restore: a server (or a
lease store) reaching etcd through it loses every connection at once.

Two kinds of cut:

* :meth:`EtcdProxy.cut`: every connection is closed (the client sees a reset
  or an end of stream at once) and new ones are closed as soon as accepted;
* :meth:`EtcdProxy.blackhole`: nothing is closed and nothing gets through,
  as when a network path dies silently or a middlebox loses its connection
  state. The connections open then, and those opened during the blackhole,
  stay silent forever (their bytes are swallowed, no reset is ever sent):
  only connections opened after :meth:`EtcdProxy.restore` work.
"""

from __future__ import annotations

import socket
import threading


class EtcdProxy:
    """A TCP forwarder to etcd that can be cut (every connection closed, new
    ones closed at once) or blackholed (every connection silent), and
    restored."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._open = threading.Event()
        self._open.set()
        self._silent = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._dead: set[socket.socket] = set()  # blackholed: read and never forwarded
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._silent:
                self._swallow(client)
                continue
            if not self._open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    if source in self._dead:
                        continue
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(source, sink)

    def _swallow(self, client: socket.socket) -> None:
        """Accept ``client``'s bytes and never answer (nor close it)."""
        with self._lock:
            self._dead.add(client)
            self._sockets.add(client)

        def drain() -> None:
            try:
                while client.recv(65536):
                    pass
            except OSError:
                pass

        threading.Thread(target=drain, daemon=True).start()

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with self._lock:
                self._sockets.discard(sock)
                self._dead.discard(sock)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            sockets = list(self._sockets)
        self._drop(*sockets)

    def blackhole(self) -> None:
        """From now until :meth:`restore`, nothing gets through and nothing
        is closed; the connections open now stay silent for good."""
        with self._lock:
            self._silent = True
            self._dead |= self._sockets

    def restore(self) -> None:
        self._silent = False
        self._open.set()

    def close(self) -> None:
        self._listener.close()
        self.cut()
