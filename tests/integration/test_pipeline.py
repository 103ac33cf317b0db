"""The request pipeline with a real broker and real clients: a stage added
before dispatch (as SASL and ACLs will be) refuses one API and the client gets
Kafka's error; the context tells each stage who sent a request and on which
listener; every request is counted in the broker's metrics."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.net.pipeline import Call, Proceed
from odradek.common.metrics import render
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import create_topics_response as ct


class RefuseCreateTopics:
    """A test-only authorizer: CreateTopics is refused for every topic."""

    name = "refuse-create"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str | None]] = []

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        ctx = call.ctx
        self.seen.append((ctx.principal, ctx.listener, ctx.security_protocol, ctx.client_id))
        if call.api_key == 19:
            return ct.CreateTopicsResponse(topics=[
                ct.CreatableTopicResult(t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                        error_message="refused by a test stage")
                for t in call.request.body.topics])
        return await proceed(call)


@pytest.fixture
def refusing() -> Any:
    stage = RefuseCreateTopics()
    with Broker(stages=[(stage, "dispatch")], **{"auto.create.topics.enable": "false"}) as b:
        yield b, stage


def test_a_stage_before_dispatch_refuses_an_api_and_a_real_client_sees_the_error(
        refusing: Any) -> None:
    broker, stage = refusing
    assert broker.app.server.pipeline.names() == [
        "metrics", "version", "authenticate", "authorize", "quota", "refuse-create", "dispatch"]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("denied", 1, 1)])["denied"].result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "denied" not in admin.list_topics(timeout=10).topics
    # Other APIs go through: the broker's own topic creation, then a produce.
    broker.create_topic("allowed")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "pipe"})
    producer.produce("allowed", b"v")
    assert producer.flush(10) == 0
    # Each stage sees the principal, the listener and its protocol.
    assert ("User:ANONYMOUS", "PLAINTEXT", "PLAINTEXT", "pipe") in stage.seen
    assert {s[:3] for s in stage.seen} == {("User:ANONYMOUS", "PLAINTEXT", "PLAINTEXT")}


def test_kafka_python_sees_the_refusal_too(refusing: Any) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import TopicAuthorizationFailedError

    broker, _ = refusing
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics([KNewTopic("denied", 1, 1)])
    finally:
        admin.close()


def test_every_request_is_counted_by_api_with_its_errors() -> None:
    with Broker(**{"auto.create.topics.enable": "false"}) as broker:
        broker.create_topic("t")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(5):
            producer.produce("t", str(i).encode())
        assert producer.flush(10) == 0
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        with pytest.raises(KafkaException):
            admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)  # exists
        metrics = broker.app.metrics.families
        requests = metrics["kafka_network_requestmetrics_requests_total"]
        assert "odradek_requests_total" not in metrics  # one request counter, Kafka's
        assert sum(v for _, _, (api, _), v in requests.samples() if api == "Produce") >= 1
        assert sum(v for _, _, (api, _), v in requests.samples() if api == "ApiVersions") >= 2
        assert metrics["odradek_request_errors_total"].get(  # type: ignore[union-attr]
            "CreateTopics", "TOPIC_ALREADY_EXISTS") == 1
        text = render(broker.app.metrics)
        assert '# TYPE odradek_request_latency_seconds histogram' in text
        assert 'odradek_request_latency_seconds_count{api="Produce"}' in text
