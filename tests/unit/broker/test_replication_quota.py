"""The replication quota (broker/replica/throttle.py) against a fake broker view."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.broker.config import BrokerConfig
from odradek.broker.replica.throttle import FOLLOWER, LEADER, ReplicationQuota
from odradek.metadata.image import MetadataImage, TopicImage


@dataclass
class _View:
    config: BrokerConfig
    image: MetadataImage
    node_id: int = 1
    on_config_change: list[Callable[[set[str]], None]] = field(default_factory=list)
    clock: Any = None
    partitions: Any = None


def _view(rate: int, lists: dict[str, str]) -> _View:
    config = BrokerConfig.from_sources({"node.id": "1", "leader.replication.throttled.rate":
                                        str(rate), "replication.quota.window.num": "2"})
    image = MetadataImage()
    image.topics["t"] = TopicImage(name="t", topic_id=uuid.uuid4(), configs=lists)
    return _View(config, image)


def test_only_listed_partitions_of_this_broker_are_throttled() -> None:
    view = _view(1000, {"leader.replication.throttled.replicas": "0:1,1:2,2:1"})
    quota = ReplicationQuota(view, LEADER)  # type: ignore[arg-type]
    assert [quota.is_throttled("t", p) for p in range(3)] == [True, False, True]
    assert not quota.is_throttled("other", 0)
    follower = ReplicationQuota(view, FOLLOWER)  # type: ignore[arg-type]
    assert not follower.is_throttled("t", 0)


def test_the_quota_is_exceeded_over_the_rate_and_recovers() -> None:
    """2 windows of 1 s: the rate is measured over at least 1 s."""
    quota = ReplicationQuota(_view(1000, {}), LEADER)  # type: ignore[arg-type]
    quota.record(1000, 0)
    assert not quota.exceeded(0)  # 1000 B over 1 s: at the bound, not over it
    quota.record(500, 100)
    assert quota.exceeded(200)
    assert not quota.exceeded(2100)  # the samples aged out


def test_no_rate_is_no_limit_and_a_new_rate_applies_at_once() -> None:
    view = _view(0, {})
    quota = ReplicationQuota(view, LEADER)  # type: ignore[arg-type]
    quota.record(10**9, 0)
    assert not quota.exceeded(1)
    changed = view.config.set_dynamic({"leader.replication.throttled.rate": "1000"}, {})
    for hook in view.on_config_change:
        hook(changed)
    assert quota.exceeded(1)
