"""Every command that talks to a broker, pointed at a port that is not one.

A port that speaks HTTP (it answers a Kafka request with an HTTP error, as a
web server does), one that says nothing at all, one that speaks SSH (its
banner is no Kafka frame), and a closed port: each command ends within 5 s
with one line naming the address and a non-zero exit, never a traceback or
"unexpected error" (issue 32; it took 10 s and printed "unexpected error:
TimeoutError").
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import free_port

# Each command must fail within a wall-clock bound: run alone (tests/conftest.py),
# and out of the fast tier (about 80 s of connect timeouts).
pytestmark = [pytest.mark.timing, pytest.mark.slow]

COMMANDS = [
    ["topics", "list"], ["topics", "describe", "t"], ["topics", "create", "t"],
    ["topics", "alter", "t", "--partitions", "3"], ["topics", "delete", "t"],
    ["topics", "reassign", "--list"],
    ["produce", "t"], ["consume", "t", "--timeout-ms", "1000"],
    ["groups", "list"], ["groups", "describe", "g"], ["groups", "delete", "g"],
    ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest"],
    ["transactions", "list"], ["transactions", "describe", "x"],
    ["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0"],
    ["transactions", "find-hanging"],
    ["configs", "describe", "--topic", "t"], ["configs", "describe", "--broker", "1"],
    ["configs", "alter", "--broker-defaults", "--add-config", "log.retention.ms=1"],
    ["quotas", "describe"], ["quotas", "alter", "--client-id", "c",
                             "--add-config", "producer_byte_rate=1000"],
    ["cluster", "describe"], ["leaders", "elect", "--type", "preferred"],
    ["acls", "list"], ["acls", "add", "--allow-principal", "User:a", "--topic", "t"],
    ["acls", "remove", "--topic", "t"],
    ["console", "--listen", "127.0.0.1:0"],
]


def _server(reply: bytes | None) -> tuple[socket.socket, int]:
    """A listener that answers each connection with ``reply`` once it has read
    something (None: never answers)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)

    def run() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            def talk(c: socket.socket = conn) -> None:
                try:
                    if reply is not None and reply.startswith(b"SSH"):
                        c.sendall(reply)
                    c.recv(4096)
                    if reply is not None and not reply.startswith(b"SSH"):
                        c.sendall(reply)
                    time.sleep(30)
                except OSError:
                    pass
                finally:
                    c.close()
            threading.Thread(target=talk, daemon=True).start()
    threading.Thread(target=run, daemon=True).start()
    return sock, sock.getsockname()[1]


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, int]]:
    http = _server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    silent = _server(None)
    ssh = _server(b"SSH-2.0-OpenSSH_9.2p1\r\n")
    yield {"http": http[1], "silent": silent[1], "ssh": ssh[1], "closed": free_port()}
    for s, _ in (http, silent, ssh):
        s.close()


@pytest.mark.parametrize("kind", ["http", "silent", "ssh", "closed"])
def test_every_command_fails_in_one_line_within_5_s(ports: dict[str, int], kind: str) -> None:
    address = f"127.0.0.1:{ports[kind]}"
    # A silent port costs each command its whole connect timeout (4 s): every
    # command goes through the same connect, so three of them show it.
    commands = COMMANDS[:: len(COMMANDS) // 3] if kind == "silent" else COMMANDS
    for command in commands:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "odradek", *command,
                               "--bootstrap-server", address],
                              input="x\n", capture_output=True, text=True, timeout=30)
        took = time.monotonic() - started
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0, (command, done)
        assert len(lines) == 1, (command, done.stderr)
        assert address in lines[0], (command, lines)
        assert "unexpected error" not in lines[0] and "Traceback" not in done.stderr, (
            command, lines)
        assert took < 5, (command, took)
