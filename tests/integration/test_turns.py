"""A connection's turn on the event loop is bounded, and its answers of one turn
go out together (odradek.broker.net.turns, KafkaConnection._write/_flush):
with a real broker and a raw socket pipelining requests in one send."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from odradek.broker.net import server as server_module
from odradek.broker.net.pipeline import Call, Proceed
from odradek.broker.net.turns import MAX_REQUESTS_PER_TURN
from odradek.testing.broker import Broker
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.api_versions_response import ApiVersionsResponse
from tests.support.rawclient import RawClient

PIPELINED = 300


class TurnCounter:
    """A stage noting, for each request, the event-loop turn it was dispatched in
    (a callback re-scheduling itself with ``call_soon`` runs once per turn)."""

    name = "turns"

    def __init__(self) -> None:
        self.turn = 0
        self.started = False
        self.seen: list[tuple[str, int]] = []

    def _tick(self) -> None:
        self.turn += 1
        asyncio.get_running_loop().call_soon(self._tick)

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        if not self.started:
            self.started = True
            asyncio.get_running_loop().call_soon(self._tick)
        self.seen.append((call.ctx.client_host, self.turn))  # host:port
        return await proceed(call)


def pipelined_answers(client: RawClient, count: int) -> list[tuple[int, Any]]:
    client.send_raw(b"".join(client.conn.send(ApiVersionsRequest(), 0) for _ in range(count)))
    answers: list[tuple[int, Any]] = []
    while len(answers) < count:
        while (got := client.conn.next_response()) is not None:
            answers.append(got)
        if len(answers) < count:
            chunk = client.sock.recv(1 << 16)
            assert chunk, "connection closed"
            client.conn.receive_data(chunk)
    return answers


def test_a_pipelined_backlog_is_served_a_bounded_number_per_turn_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[int] = []
    real_write_parts = server_module.write_parts

    def counting_write_parts(transport: Any, parts: list[Any]) -> None:
        writes.append(len(parts))
        real_write_parts(transport, parts)

    monkeypatch.setattr(server_module, "write_parts", counting_write_parts)
    counter = TurnCounter()
    with Broker(stages=[(counter, "dispatch")], **{"queued.max.requests": "1000"}) as broker:
        client = RawClient(broker.bootstrap_servers)
        try:
            counter.seen.clear()
            writes.clear()
            answers = pipelined_answers(client, PIPELINED)
        finally:
            client.close()
    assert [corr for corr, _ in answers] == list(range(PIPELINED))
    assert all(isinstance(a, ApiVersionsResponse) and a.error_code == 0 for _, a in answers)
    per_turn = Counter(counter.seen)
    assert sum(per_turn.values()) == PIPELINED
    assert max(per_turn.values()) <= MAX_REQUESTS_PER_TURN
    # One send per turn that made answers, not one per answer (each answer is
    # one part: its encoded bytes).
    assert sum(writes) == PIPELINED
    assert len(writes) <= len(per_turn) < PIPELINED // 4
