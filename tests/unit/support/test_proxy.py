"""The test proxy forwards on descriptors past 1024, as a long test process has."""

from __future__ import annotations

import resource
import socket

import pytest

from tests.support.proxy import Proxy


def test_proxy_forwards_both_ways_when_descriptors_are_past_1024() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"the descriptor limit here is {soft}")
    filler = [socket.socket() for _ in range(1100)]  # push new descriptors past 1024
    upstream = socket.create_server(("127.0.0.1", 0))
    proxy = Proxy().start(f"127.0.0.1:{upstream.getsockname()[1]}")
    try:
        client = socket.create_connection(("127.0.0.1", int(proxy.address.rsplit(":")[1])))
        client.settimeout(5)
        server, _ = upstream.accept()
        server.settimeout(5)
        assert client.fileno() > 1024
        client.sendall(b"request")
        assert server.recv(16) == b"request"
        server.sendall(b"response")
        assert client.recv(16) == b"response"
        client.close()
        server.close()
    finally:
        proxy.close()
        upstream.close()
        for s in filler:
            s.close()
