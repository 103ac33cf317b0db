"""AlterPartition (key 56), versions 0–3: a leader asks the controller to change
an ISR (KIP-497).

Behaviour: on the active controller, every partition of the request is decided
on the same image (``odradek.metadata.partition_changes.alter_partition``:
Kafka's checks and error codes, in Kafka's order) and the accepted changes are
committed through the metadata quorum in one write; each partition is answered
with its error, or with the leader, leader epoch, ISR and partition epoch as
committed. A sender whose broker epoch is stale gets STALE_BROKER_EPOCH for
the whole request; any node that is not the active controller answers
NOT_CONTROLLER, and the leader asks again.

Version notes: v1 ``leader_recovery_state`` (KIP-704, always 0 here: no
unclean recovery state is kept); v2 topics by id (KIP-841); v3
``new_isr_with_epochs`` (KIP-903), whose broker epochs are checked.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import NotControllerError
from odradek.metadata import partition_changes as pc
from odradek.metadata.image import MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import alter_partition_response as apr
from odradek.wire.messages.alter_partition_request import AlterPartitionRequest

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(56, (0, 3), access=ACCESS)
async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> apr.AlterPartitionResponse:
    state = ctx.broker
    v = ctx.api_version
    answers: list[apr.TopicData] = []

    def decide(image: MetadataImage) -> Outcome:
        answers.clear()
        checked = pc.check_broker_epoch(image, request.broker_id, request.broker_epoch)
        if checked.error:
            return checked
        records: list[Any] = []
        for topic in request.topics:
            key = topic.topic_id if v >= 2 else topic.topic_name
            out: list[apr.PartitionData] = []
            for p in topic.partitions:
                if v >= 3:
                    isr = [b.broker_id for b in p.new_isr_with_epochs]
                    epochs = {b.broker_id: b.broker_epoch for b in p.new_isr_with_epochs}
                else:
                    isr, epochs = list(p.new_isr), {}
                outcome, after = pc.alter_partition(
                    image, request.broker_id, request.broker_epoch, key, p.partition_index,
                    p.leader_epoch, p.partition_epoch, isr, epochs)
                if outcome.error or after is None:
                    out.append(apr.PartitionData(partition_index=p.partition_index,
                                                 error_code=outcome.error))
                    continue
                records.extend(outcome.records)
                out.append(apr.PartitionData(
                    partition_index=p.partition_index, leader_id=after.leader,
                    leader_epoch=after.leader_epoch, isr=after.isr,
                    partition_epoch=after.partition_epoch))
            answers.append(apr.TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id,
                                         partitions=out))
        return Outcome(records=records)

    try:
        outcome = await state.write(decide)
    except NotControllerError:
        return apr.AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    if outcome.error:
        return apr.AlterPartitionResponse(error_code=outcome.error)
    return apr.AlterPartitionResponse(topics=answers)
