"""A TCP proxy on 127.0.0.1 that can hold back the broker's replies.

While ``hold_responses`` is set, bytes from the broker are buffered instead of
forwarded, so the client's requests time out and it retries them, although
the broker already processed them. Releasing sends the held bytes on.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from types import TracebackType


class Proxy:
    def __init__(self, upstream: str = "") -> None:
        """``upstream`` may be set later with :meth:`start` (bind first, so the
        broker can advertise the proxy's address)."""
        self.upstream = ("", 0)
        if upstream:
            host, port = upstream.rsplit(":", 1)
            self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.hold_responses = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self.connections = 0

    def start(self, upstream: str = "") -> Proxy:
        if upstream:
            host, port = upstream.rsplit(":", 1)
            self.upstream = (host, int(port))
        self._spawn(self._accept)
        return self

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                # The broker refused or was slow: this client sees its connection
                # close and reconnects; the proxy keeps accepting (a dead accept
                # thread left every later connection hanging).
                client.close()
                continue
            self._sockets += [client, server]
            self.connections += 1
            self._spawn(self._pump, client, server, False)
            self._spawn(self._pump, server, client, True)

    def _pump(self, src: socket.socket, dst: socket.socket, from_broker: bool) -> None:
        # Blocking sockets polled with poll(): a timeout set on a socket would also
        # apply to the other pump's sendall on it and cut large responses. Not
        # select(): it refuses descriptors past 1024, which a long test process has.
        held = b""
        poller = select.poll()
        try:
            poller.register(src, select.POLLIN)
        except (OSError, ValueError):
            return
        while not self._stop.is_set():
            if from_broker and held and not self.hold_responses.is_set():
                try:
                    dst.sendall(held)
                except OSError:
                    return
                held = b""
            try:
                if not poller.poll(100):
                    continue
                data = src.recv(65536)
            except (OSError, ValueError):
                break
            if not data:
                break
            if from_broker and self.hold_responses.is_set():
                held += data
                continue
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for s in self._sockets:
            s.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
