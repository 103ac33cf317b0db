"""Which of a controller decision's records elect a partition leader, for
Kafka's ``ControllerStats`` (``LeaderElectionRateAndTimeMs``,
``UncleanLeaderElectionsPerSec``).

An *election* is a PartitionChangeRecord that names a leader (not -1, not -2
"no change") other than the partition's leader in the image the decision was
made on: a failover when a leader is fenced, a partition whose ISR comes back
after it had no leader, a preferred or unclean ElectLeaders, a reassignment
handing over. It is *unclean* when the new leader was not in the partition's
ISR (the rule :mod:`odradek.metadata.partition_changes` applies with
``unclean.leader.election.enable``). A new partition's first leader
(PartitionRecord) is an assignment, not an election, and a record keeping
the same leader (a reassignment fencing dropped replicas) is none either.
Pure: the image is only read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.metadata.image import MetadataImage
from odradek.wire.internal.partition_change_record import PartitionChangeRecord


def count_elections(image: MetadataImage, records: Iterable[Any]) -> tuple[int, int]:
    """(elections, of which unclean) among ``records``, decided on ``image``
    (module docstring). A record for a partition the image does not hold counts
    as nothing."""
    elections = unclean = 0
    for record in records:
        if not isinstance(record, PartitionChangeRecord) or record.leader < 0:
            continue
        name = image.by_id.get(record.topic_id)
        topic = image.topics.get(name) if name is not None else None
        p = topic.partitions.get(record.partition_id) if topic is not None else None
        if p is None or record.leader == p.leader:
            continue
        elections += 1
        if record.leader not in p.isr:
            unclean += 1
    return elections, unclean
