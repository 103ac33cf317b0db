"""The endpoint's HTTP server over real sockets on 127.0.0.1: routes, limits and
deadlines (odradek.broker.observe.server and .endpoint)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.observe.endpoint import MetricsEndpoint
from odradek.broker.observe.http import MAX_HEAD_BYTES
from odradek.common.metrics import Registry


async def _exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, then read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    return out


def _run(test: Callable[[MetricsEndpoint], Awaitable[None]], *, read_timeout_s: float = 10.0,
         ready: str | None = None) -> None:
    registry = Registry()
    registry.counter("things_total", "Things").inc()

    async def main() -> None:
        endpoint = MetricsEndpoint(registry, lambda: ready, "127.0.0.1", 0,
                                   read_timeout_s=read_timeout_s)
        await endpoint.start()
        try:
            await test(endpoint)
        finally:
            await endpoint.stop()
    asyncio.run(main())


def test_routes_answer_and_a_keep_alive_connection_serves_several_requests() -> None:
    async def test(ep: MetricsEndpoint) -> None:
        out = await _exchange(ep.http.port,
                              b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                              b"GET /healthz HTTP/1.1\r\n\r\n"
                              b"HEAD /readyz HTTP/1.1\r\n\r\n"
                              b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n")
        parts = out.split(b"HTTP/1.1 ")[1:]
        assert [p.split(b"\r\n", 1)[0] for p in parts] == [
            b"200 OK", b"200 OK", b"200 OK", b"404 Not Found"]
        assert b"text/plain; version=0.0.4" in parts[0] and b"things_total 1\n" in parts[0]
        assert parts[1].endswith(b"\r\n\r\nok\n")
        assert parts[2].endswith(b"\r\n\r\n")            # HEAD: no body
        assert b"Content-Length: 6\r\n" in parts[2]      # of "ready\n"
    _run(test)


def test_openmetrics_when_asked_for() -> None:
    async def test(ep: MetricsEndpoint) -> None:
        out = await _exchange(ep.http.port, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n"
                              b"Accept: application/openmetrics-text; version=1.0.0\r\n\r\n")
        assert b"application/openmetrics-text; version=1.0.0" in out
        assert b"# TYPE things counter\n" in out and out.endswith(b"# EOF\n")
    _run(test)


def test_readyz_is_503_with_the_reason_until_ready() -> None:
    async def test(ep: MetricsEndpoint) -> None:
        out = await _exchange(ep.http.port, b"GET /readyz HTTP/1.0\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert out.endswith(b"\r\n\r\nstarting: metadata\n")
    _run(test, ready="starting: metadata")


def test_other_methods_are_405_and_close() -> None:
    async def test(ep: MetricsEndpoint) -> None:
        out = await _exchange(ep.http.port, b"DELETE /metrics HTTP/1.1\r\n\r\n"
                              b"GET /healthz HTTP/1.1\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
        assert b"Allow: GET, HEAD\r\n" in out and out.count(b"HTTP/1.1 ") == 1
    _run(test)


@pytest.mark.parametrize(("data", "status"), [
    (b"GET /" + b"a" * MAX_HEAD_BYTES + b" HTTP/1.1\r\n\r\n", b"431"),
    (b"GET / HTTP/1.1\r\n" + b"X-Big: " + b"b" * MAX_HEAD_BYTES + b"\r\n\r\n", b"431"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"400"),  # TLS to HTTP
    (b"GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"400"),
])
def test_oversized_or_malformed_requests_are_refused_and_closed(data: bytes, status: bytes
                                                                ) -> None:
    async def test(ep: MetricsEndpoint) -> None:
        out = await _exchange(ep.http.port, data)
        assert out.startswith(b"HTTP/1.1 " + status)
        assert b"Connection: close\r\n" in out
    _run(test)


def test_a_slow_client_is_timed_out_and_others_are_served_meanwhile() -> None:
    async def test(ep: MetricsEndpoint) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", ep.http.port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHo")  # and nothing more
        await writer.drain()
        # Served while the slow one hangs.
        out = await _exchange(ep.http.port, b"GET /healthz HTTP/1.0\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 200 OK")
        answer = await asyncio.wait_for(reader.read(), 30)
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        writer.close()
    _run(test, read_timeout_s=0.5)


def test_connections_beyond_the_cap_are_closed_on_accept() -> None:
    async def test(ep: MetricsEndpoint) -> None:
        ep.http.max_connections = 2
        held = [await asyncio.open_connection("127.0.0.1", ep.http.port) for _ in range(2)]
        for _ in range(200):  # both accepted
            if len(ep.http._conns) == 2:
                break
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", ep.http.port)
        assert await asyncio.wait_for(reader.read(), 30) == b""
        assert ep.http.refused == 1
        for _, w in [*held, (reader, writer)]:
            w.close()
    _run(test)


@pytest.mark.parametrize("value", ["9100", "host:", "host:99999", "a b:9", ":x"])
def test_a_bad_listener_value_stops_the_start_naming_the_key(value: str, tmp_path: object
                                                              ) -> None:
    with pytest.raises(ConfigError, match=r"^odradek\.metrics\.listener: "):
        BrokerConfig.from_sources({"log.dirs": str(tmp_path)},
                                  {"odradek.metrics.listener": value})


def test_listener_values() -> None:
    def get(v: str) -> tuple[str, int] | None:
        return BrokerConfig.from_sources({"log.dirs": "/tmp/x"},
                                         {"odradek.metrics.listener": v}).metrics_listener()
    assert get("") is None
    assert get("127.0.0.1:9100") == ("127.0.0.1", 9100)
    assert get(":9100") == ("", 9100)
    assert get("[::1]:0") == ("::1", 0)
