"""The request pipeline's stages, with fakes for what is around them (no broker,
no sockets): order, the version gate, metrics, quotas, forwarding."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from odradek.broker.net.context import ANONYMOUS, RequestContext
from odradek.broker.net.forward import ForwardToController
from odradek.broker.net.pipeline import (
    Authenticate,
    Authorize,
    Call,
    Dispatch,
    Pipeline,
    Proceed,
    RequestMetrics,
    VersionGate,
    error_codes,
)
from odradek.broker.net.registry import CloseConnection, Deferred, Registration
from odradek.broker.ports import NotControllerError
from odradek.common.metrics import Registry
from odradek.wire.errors import ErrorCode
from odradek.wire.frames import Request
from odradek.wire.messages import create_topics_request as ctq
from odradek.wire.messages import create_topics_response as cts
from odradek.wire.messages import produce_response as pr
from odradek.wire.messages.request_header import RequestHeader


def call(api_key: int, version: int, body: Any = None, reg: Registration | None = None,
         listener: str = "PLAINTEXT") -> Call:
    header = RequestHeader(request_api_key=api_key, request_api_version=version)
    ctx = RequestContext(cast(Any, None), version, header, "test", 10, listener=listener)
    return Call(Request(api_key, version, 1, header, body, 10), reg, ctx)


def registration(api_key: int, answer: Any, versions: tuple[int, int] = (0, 5),
                 rejected: tuple[int, int] | None = None) -> Registration:
    async def handle(ctx: RequestContext, body: Any) -> Any:
        return answer(body) if callable(answer) else answer

    return Registration(api_key, versions[0], versions[1], handle, rejected,
                        (lambda body, code: ("refused", code)) if rejected else None)


class Recorder:
    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    async def __call__(self, c: Call, proceed: Proceed) -> Any:
        self.seen.append(f"{self.name}>")
        answer = await proceed(c)
        self.seen.append(f"<{self.name}")
        return answer


def test_stages_run_in_order_and_a_stage_added_before_another_runs_just_before_it() -> None:
    seen: list[str] = []
    pipeline = Pipeline([Recorder("a", seen), Recorder("c", seen), Dispatch()])
    pipeline.add(Recorder("b", seen), before="c")
    assert pipeline.names() == ["a", "b", "c", "dispatch"]
    assert asyncio.run(pipeline.run(call(3, 1, reg=registration(3, "ok")))) == "ok"
    assert seen == ["a>", "b>", "c>", "<c", "<b", "<a"]
    pipeline.remove("b")
    seen.clear()
    asyncio.run(pipeline.run(call(3, 1, reg=registration(3, "ok"))))
    assert seen == ["a>", "c>", "<c", "<a"]


def test_a_pipeline_ends_in_dispatch_and_names_are_unique() -> None:
    with pytest.raises(ValueError, match="dispatch"):
        Pipeline([Authenticate()])
    pipeline = Pipeline([Authorize(), Dispatch()])
    with pytest.raises(ValueError, match="already"):
        pipeline.add(Authorize(), before="dispatch")
    with pytest.raises(ValueError, match="no stage 'nope'"):
        pipeline.add(Authenticate(), before="nope")
    with pytest.raises(ValueError, match="cannot be removed"):
        pipeline.remove("dispatch")


def test_a_stage_can_refuse_without_calling_the_handler() -> None:
    handled: list[Any] = []

    class Refuse:
        name = "refuse"

        async def __call__(self, c: Call, proceed: Proceed) -> Any:
            if c.api_key == 19:
                return "refused"
            return await proceed(c)

    pipeline = Pipeline([Refuse(), Dispatch()])
    reg = registration(19, lambda body: handled.append(body) or "created")
    assert asyncio.run(pipeline.run(call(19, 5, "req", reg))) == "refused"
    assert handled == []
    assert asyncio.run(pipeline.run(call(3, 5, "req", registration(3, "meta")))) == "meta"


def test_the_version_gate() -> None:
    gate = Pipeline([VersionGate(lambda: "v0 unsupported"), Dispatch()])
    # Not served: the connection closes, except ApiVersions (a v0 answer, KIP-511).
    with pytest.raises(CloseConnection, match="api 3 v9 not served"):
        asyncio.run(gate.run(call(3, 9, reg=registration(3, "x"))))
    with pytest.raises(CloseConnection, match="api 99 v0 not served"):
        asyncio.run(gate.run(call(99, 0)))
    c = call(18, 9, reg=registration(18, "x", versions=(0, 4)))
    assert asyncio.run(gate.run(c)) == "v0 unsupported" and c.response_version == 0
    # Advertised to be refused (Produce v0-2): the API's own UNSUPPORTED_VERSION body.
    reg = registration(0, "x", versions=(0, 12), rejected=(0, 2))
    assert asyncio.run(gate.run(call(0, 1, reg=reg))) == ("refused", 35)
    assert asyncio.run(gate.run(call(0, 9, reg=reg))) == "x"


def test_the_context_carries_principal_listener_and_protocol() -> None:
    c = call(3, 1, listener="CLIENT")
    assert (c.ctx.principal, c.ctx.listener, c.ctx.security_protocol) == (
        ANONYMOUS, "CLIENT", "PLAINTEXT")


def test_error_codes_are_found_at_every_depth() -> None:
    body = pr.ProduceResponse(responses=[
        pr.TopicProduceResponse("a", [pr.PartitionProduceResponse(0, 0),
                                      pr.PartitionProduceResponse(1, 6)]),
        pr.TopicProduceResponse("b", [pr.PartitionProduceResponse(0, 3)])])
    assert sorted(error_codes(body)) == [3, 6]
    assert error_codes(pr.ProduceResponse()) == []


def test_metrics_count_requests_bytes_errors_and_time_each_phase_by_api() -> None:
    registry = Registry()
    ticks = iter([1.25, 1.5])  # started, returned
    metrics = RequestMetrics(registry, clock=lambda: next(ticks))
    answer = cts.CreateTopicsResponse(topics=[
        cts.CreatableTopicResult("t", error_code=ErrorCode.TOPIC_ALREADY_EXISTS)])
    pipeline = Pipeline([metrics, Dispatch()])
    c = call(19, 5, ctq.CreateTopicsRequest(), registration(19, answer))
    c.received = 1.0
    asyncio.run(pipeline.run(c))
    assert metrics.by_version.get("CreateTopics", "5") == 1
    assert metrics.request_bytes.get("CreateTopics") == 10
    assert metrics.errors.get("CreateTopics", "TOPIC_ALREADY_EXISTS") == 1
    assert metrics.latency.count("CreateTopics") == 0  # timed once its answer is written
    metrics.sent(c, 1.75, 2.0)
    assert metrics.latency.series[("CreateTopics",)][-1] == 1.0
    assert {p: h.series[("CreateTopics",)][-1] for p, h in metrics.phases.items()} == {
        "queue": 0.25, "local": 0.25, "remote": 0.0, "response_queue": 0.25, "send": 0.25}

    # A deferred answer's wait is remote time; its errors are counted when decided.
    ticks = iter([10.0, 10.5, 12.0])  # started, returned, decided

    async def deferred() -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        d = call(0, 9, None, registration(0, Deferred(fut)))
        d.received = 9.0
        out = await pipeline.run(d)
        assert isinstance(out, Deferred)
        fut.set_result(pr.ProduceResponse(responses=[pr.TopicProduceResponse(
            "a", [pr.PartitionProduceResponse(0, ErrorCode.NOT_ENOUGH_REPLICAS)])]))
        await out.answer
        metrics.sent(d, 12.0, 12.5)

    asyncio.run(deferred())
    assert metrics.latency.count("Produce") == 1
    assert metrics.latency.series[("Produce",)][-1] == 3.5
    assert {p: h.series[("Produce",)][-1] for p, h in metrics.phases.items()} == {
        "queue": 1.0, "local": 0.5, "remote": 1.5, "response_queue": 0.0, "send": 0.5}
    assert metrics.errors.get("Produce", "NOT_ENOUGH_REPLICAS") == 1
    assert "odradek_requests_total" not in registry.families


class FakeQuorum:
    def __init__(self, leader: bool) -> None:
        self.is_leader = leader
        self.changes: asyncio.Queue[bool] = asyncio.Queue()

    async def view_change(self, timeout_s: float) -> bool:
        try:
            self.is_leader = await asyncio.wait_for(self.changes.get(), timeout_s)
        except TimeoutError:
            return False
        return True


class FakeChannel:
    """The controller's end: opens each Envelope (the forward stage always sends
    one, KIP-590) and answers the next of ``answers`` inside an Envelope (the
    last one to every request after it)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.sent: list[Any] = []
        self.principals: list[str] = []

    async def request(self, body: Any, version: int) -> Any:
        from odradek.broker.control.controller_channel import ControllerUnavailable
        from odradek.wire import envelope
        from odradek.wire.frames import parse_request
        from odradek.wire.messages.envelope_request import EnvelopeRequest
        from odradek.wire.messages.envelope_response import EnvelopeResponse

        assert isinstance(body, EnvelopeRequest) and version == envelope.ENVELOPE_VERSION
        inner = parse_request(memoryview(body.request_data))
        self.sent.append(inner.body)
        self.principals.append(envelope.principal_of(body))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]  # the last stays
        if answer is ControllerUnavailable:
            raise ControllerUnavailable("no controller yet")
        return EnvelopeResponse(response_data=envelope.response_data(
            inner.api_key, inner.api_version, inner.correlation_id, answer))


CREATE = ctq.CreateTopicsRequest(topics=[ctq.CreatableTopic("t", 1, 1)])
CREATED = cts.CreateTopicsResponse(topics=[cts.CreatableTopicResult("t", error_code=0)])


def forwarding(quorum: FakeQuorum, channel: FakeChannel, wait_s: float = 1.0) -> Pipeline:
    return Pipeline([ForwardToController(quorum, cast(Any, channel),
                                         frozenset({"CONTROLLER"}), wait_s), Dispatch()])


def test_forwarding_sends_controller_apis_to_the_controller_and_others_to_the_handler() -> None:
    async def run() -> None:
        channel = FakeChannel([CREATED])
        pipeline = forwarding(FakeQuorum(leader=False), channel)
        answer = await pipeline.run(call(19, 5, CREATE, registration(19, "local")))
        assert [(t.name, t.error_code) for t in answer.topics] == [("t", 0)]
        assert await pipeline.run(call(3, 12, None, registration(3, "metadata"))) == "metadata"
        # DescribeQuorum on the controller listener is answered here.
        assert await pipeline.run(call(55, 1, None, registration(55, "quorum"),
                                       listener="CONTROLLER")) == "quorum"
        assert channel.sent == [CREATE]
        assert channel.principals == ["User:ANONYMOUS"]  # the client's, in the envelope

    asyncio.run(run())


def test_forwarding_waits_for_a_controller_then_sends_it_the_request() -> None:
    async def run() -> None:
        from odradek.broker.control.controller_channel import ControllerUnavailable

        quorum = FakeQuorum(leader=False)
        channel = FakeChannel([ControllerUnavailable, CREATED])
        pipeline = forwarding(quorum, channel, wait_s=30)
        task = asyncio.ensure_future(pipeline.run(call(19, 5, CREATE, registration(19, "x"))))
        await asyncio.sleep(0.01)
        assert not task.done() and len(channel.sent) == 1  # waiting for a leader, not polling
        quorum.changes.put_nowait(False)  # another node leads now
        answer = await task
        assert answer.topics[0].name == "t" and len(channel.sent) == 2

    asyncio.run(run())


def test_forwarding_with_no_controller_in_time_answers_not_controller() -> None:
    async def run() -> None:
        from odradek.broker.control.controller_channel import ControllerUnavailable

        async def not_here(ctx: RequestContext, body: Any) -> Any:
            raise NotControllerError(-1)

        create = ctq.CreateTopicsRequest(topics=[ctq.CreatableTopic("t", 1, 1)])
        pipeline = forwarding(FakeQuorum(leader=False), FakeChannel([ControllerUnavailable]),
                              wait_s=0.05)
        answer = await pipeline.run(call(19, 5, create, Registration(19, 0, 7, not_here)))
        assert [(t.name, t.error_code) for t in answer.topics] == [
            ("t", ErrorCode.NOT_CONTROLLER)]

    asyncio.run(run())


def test_a_controller_that_became_leader_while_waiting_decides_itself() -> None:
    async def run() -> None:
        from odradek.broker.control.controller_channel import ControllerUnavailable

        quorum = FakeQuorum(leader=False)
        pipeline = forwarding(quorum, FakeChannel([ControllerUnavailable]), wait_s=30)
        task = asyncio.ensure_future(pipeline.run(call(19, 5, CREATE,
                                                       registration(19, "decided here"))))
        await asyncio.sleep(0.01)
        quorum.changes.put_nowait(True)
        assert await task == "decided here"

    asyncio.run(run())


def test_a_refusing_controller_is_asked_again_without_a_change_of_view() -> None:
    """A controller elected but not yet active refuses the envelope (NOT_CONTROLLER)
    and the quorum's view will not change: the request goes to it again after
    RETRY_S, not only at the next change of leader."""
    async def run() -> None:
        from odradek.broker.control.controller_channel import ControllerUnavailable

        channel = FakeChannel([ControllerUnavailable, ControllerUnavailable, CREATED])
        pipeline = forwarding(FakeQuorum(leader=False), channel, wait_s=30)
        answer = await asyncio.wait_for(
            pipeline.run(call(19, 5, CREATE, registration(19, "local"))), 5)
        assert [(t.name, t.error_code) for t in answer.topics] == [("t", 0)]
        assert len(channel.sent) == 3

    asyncio.run(run())
