"""A blocking socket client over odradek.wire.frames, for protocol-level tests."""

from __future__ import annotations

import socket
from typing import Any

from odradek.wire.frames import ClientConnection
from odradek.wire.schema import Message


class RawClient:
    def __init__(self, bootstrap: str, timeout_s: float = 10.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.conn = ClientConnection("raw-test")

    def request(self, body: Message, version: int) -> Any:
        self.sock.sendall(self.conn.send(body, version))
        while True:
            got = self.conn.next_response()
            if got is not None:
                return got[1]
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.conn.receive_data(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def is_closed_by_peer(self) -> bool:
        """True when the broker closes the connection (reads until EOF or timeout)."""
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (TimeoutError, ConnectionResetError):
            return False

    def close(self) -> None:
        self.sock.close()
