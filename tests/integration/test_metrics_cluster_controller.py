"""The controller's and the metadata quorum's metrics across real nodes: a
controller-only node and three brokers, each node's /metrics scraped.

The quorum: every node reports the same leader and epoch, the controller
``leader``, the brokers ``observer`` (they are not voters), with high
watermarks that follow the leader's. Elections: killing brokers makes the
active controller elect new leaders, counted as clean; a partition left
without a leader and then given one from outside its ISR (an unclean
ElectLeaders) is counted as unclean."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.cluster import LocalCluster, wait_for
from tests.integration.test_metrics_endpoint import get, scrape
from tests.support.cluster import running

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RAFT = "kafka_server_raftmetrics_"
ELECTIONS = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
UNCLEAN = "kafka_controller_controllerstats_uncleanleaderelections_total"
LEADERS = "kafka_server_replicamanager_leadercount"
OFFLINE = "kafka_controller_kafkacontroller_offlinepartitionscount"
CONTROLLER = 1


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, controllers=1, brokers=3, metrics=True, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000",
        "replica.lag.time.max.ms": "5000"})
    with running(c):
        yield c


def _ready(cluster: LocalCluster, node: int) -> None:
    wait_for(f"node {node} ready", lambda: get(cluster.metrics_url(node, "/readyz"))[0] == 200,
             90)


def test_quorum_state_and_leader_elections_across_nodes(cluster: LocalCluster) -> None:
    for node in cluster.nodes:
        _ready(cluster, node)

    def state_of(m: dict[str, float]) -> str:
        (state,) = [k.split('"')[1] for k, v in m.items()
                    if k.startswith(RAFT + "current_state{") and v == 1]
        return state

    # The quorum as each node sees it: one leader, the rest observers, one epoch,
    # high watermarks that reach the leader's.
    leader = scrape(cluster.metrics_url(CONTROLLER))
    assert state_of(leader) == "leader"
    assert leader[RAFT + "current_leader"] == CONTROLLER == leader[RAFT + "current_vote"]
    assert leader["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    for node in (2, 3, 4):
        m = wait_for(f"node {node} at the leader's high watermark", lambda node=node: (
            m if (m := scrape(cluster.metrics_url(node)))[RAFT + "high_watermark"]
            >= leader[RAFT + "high_watermark"] else None), 60)
        assert state_of(m) == "observer"
        assert m[RAFT + "current_leader"] == CONTROLLER
        assert m[RAFT + "current_epoch"] == leader[RAFT + "current_epoch"]
        assert m[RAFT + "log_end_offset"] >= m[RAFT + "high_watermark"] > 0
        assert m["kafka_controller_kafkacontroller_activecontrollercount"] == 0
        assert m[ELECTIONS] == 0

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    spread, narrow = f"spread-{uuid.uuid4().hex[:6]}", f"narrow-{uuid.uuid4().hex[:6]}"
    done = admin.create_topics([
        NewTopic(spread, 3, 3),
        NewTopic(narrow, 1, replica_assignment=[[3, 4]]),  # led by 3, followed by 4
    ])
    for f in done.values():
        f.result(60)

    def controller() -> dict[str, float]:
        return scrape(cluster.metrics_url(CONTROLLER))

    def leaders(nodes: list[int]) -> float:
        return sum(scrape(cluster.metrics_url(n))[LEADERS] for n in nodes)

    wait_for("every partition led", lambda: leaders([2, 3, 4]) == 4, 60)
    before = controller()[ELECTIONS]

    # Broker 4 goes: the partitions it led get new leaders, from their ISRs.
    cluster.kill(4)
    wait_for("broker 4's partitions led elsewhere", lambda: leaders([2, 3]) == 4, 60)
    after = wait_for("clean elections counted", lambda: (
        m if (m := controller())[ELECTIONS] > before else None), 30)
    assert after[UNCLEAN] == 0
    assert after["kafka_controller_controllerstats_leaderelectionrateandtimems"
                 '{quantile="0.99"}'] > 0

    # Broker 3 goes too: the narrow topic's partition, whose ISR is [3] now,
    # has no leader (unclean election is off).
    cluster.kill(3)
    wait_for("the narrow partition offline", lambda: controller()[OFFLINE] == 1, 60)
    cluster.start(4)
    _ready(cluster, 4)
    assert controller()[OFFLINE] == 1  # 4 is back, but not in the ISR: still no leader
    elected = controller()[ELECTIONS]

    # An unclean ElectLeaders gives it 4, from outside its ISR.
    result = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(narrow, 0)]).result(60)
    assert all(err is None for err in result.values()), result
    final = wait_for("the unclean election counted", lambda: (
        m if (m := controller())[UNCLEAN] == 1 else None), 30)
    assert final[OFFLINE] == 0
    assert final[ELECTIONS] >= elected + 1
