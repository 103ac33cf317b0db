"""The brokers a client is told about come from the metadata image's registrations,
and a broker built with seeded ids names topics the same way on every run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from confluent_kafka.admin import AdminClient

from odradek.broker.app import BrokerApp
from odradek.broker.config import BrokerConfig
from odradek.common.ids import SeededIds
from odradek.metadata import controller
from odradek.testing.broker import Broker
from odradek.wire.internal.register_broker_record import RegisterBrokerRecord


def _brokers(bootstrap: str) -> list[tuple[int, str, int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return sorted((b.id, b.host, b.port) for b in md.brokers.values())


def test_a_restarted_broker_registers_its_new_port(tmp_path: Path) -> None:
    ports = []
    for _ in range(2):
        with Broker(data_dir=str(tmp_path)) as broker:
            host, port = broker.bootstrap_servers.split(":")
            assert _brokers(broker.bootstrap_servers) == [(1, host, int(port))]
            state = broker.app.state
            assert state is not None
            registrations = [r for r in state.metadata.replay()
                             if isinstance(r, RegisterBrokerRecord)]
            ports.append(int(port))
    assert len(registrations) == 2  # one per start, journaled
    assert [r.end_points[0].port for r in registrations] == ports
    assert registrations[1].broker_epoch > registrations[0].broker_epoch


async def _topic_id(data_dir: Path, seed: int) -> str:
    config = BrokerConfig.from_sources(
        None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir),
               "cluster.id": "seeded-cluster-id-000"})
    app = BrokerApp(config, ids=SeededIds(seed))
    await app.start()
    try:
        state = app.state
        assert state is not None
        outcome = await state.write(lambda image: controller.create_topic(
            image, "t", 1, -1, {}, node_id=1, default_partitions=1,
            topic_id=state.ids.uuid()))
        assert not outcome.error
        return str(state.image.topics["t"].topic_id)
    finally:
        await app.stop()


def test_seeded_ids_give_the_same_topic_id_on_every_run(tmp_path: Path) -> None:
    first = asyncio.run(_topic_id(tmp_path / "a", 21))
    second = asyncio.run(_topic_id(tmp_path / "b", 21))
    other = asyncio.run(_topic_id(tmp_path / "c", 22))
    assert first == second
    assert first != other


def test_a_node_still_replaying_metadata_never_says_a_topic_is_unknown() -> None:
    """A cluster node that has not caught up with the metadata log may not know
    a topic that exists: it answers LEADER_NOT_AVAILABLE (clients retry) and
    creates nothing; once caught up, the same request is answered as usual."""
    from odradek.wire.errors import ErrorCode
    from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from tests.support.rawclient import RawClient

    with Broker() as broker:
        state = broker.app.state
        assert state is not None
        broker.create_topic("known", partitions=1)
        raw = RawClient(broker.bootstrap_servers)
        try:
            def ask(name: str) -> tuple[int, int]:
                request = MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                          allow_auto_topic_creation=True)
                topic = raw.request(request, 12).topics[0]
                return topic.error_code, len(topic.partitions)

            state.metadata_ready = False  # as while a restarted node replays the log
            assert ask("not-yet") == (ErrorCode.LEADER_NOT_AVAILABLE, 0)
            assert ask("known") == (0, 1)
            assert "not-yet" not in state.image.topics
            state.metadata_ready = True
            assert ask("not-yet") == (0, 1)  # auto-created (auto.create.topics.enable)
        finally:
            raw.close()
