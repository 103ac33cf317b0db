"""NOT_CONTROLLER answers for every forwarded admin API, per item, at every version."""

from __future__ import annotations

import pytest

from odradek.broker.controller_channel import FORWARDED_APIS, not_controller_response
from odradek.wire import api
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import alter_client_quotas_request as acq
from odradek.wire.messages import alter_configs_request as ac
from odradek.wire.messages import alter_partition_reassignments_request as apr
from odradek.wire.messages import create_partitions_request as cp
from odradek.wire.messages import create_topics_request as ct
from odradek.wire.messages import delete_topics_request as dt
from odradek.wire.messages import describe_quorum_request as dq
from odradek.wire.messages import elect_leaders_request as el
from odradek.wire.messages import incremental_alter_configs_request as iac
from odradek.wire.messages import list_partition_reassignments_request as lpr

REQUESTS = {
    19: ct.CreateTopicsRequest([ct.CreatableTopic("a", 1, 1), ct.CreatableTopic("b", 2, 1)]),
    20: dt.DeleteTopicsRequest(topic_names=["a", "b"]),
    33: ac.AlterConfigsRequest([ac.AlterConfigsResource(2, "a", [])]),
    37: cp.CreatePartitionsRequest([cp.CreatePartitionsTopic("a", 3, None)]),
    43: el.ElectLeadersRequest(1, [el.TopicPartitions("a", [0, 1])]),
    45: apr.AlterPartitionReassignmentsRequest(topics=[apr.ReassignableTopic(
        "a", [apr.ReassignablePartition(0, [1, 2])])]),
    46: lpr.ListPartitionReassignmentsRequest(topics=None),
    44: iac.IncrementalAlterConfigsRequest([iac.AlterConfigsResource(2, "a", [])]),
    49: acq.AlterClientQuotasRequest([acq.EntryData([acq.EntityData("client-id", "x")], [])]),
    55: dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata", [dq.PartitionData(0)])]),
}


def test_every_forwarded_api_has_a_request_here() -> None:
    assert set(REQUESTS) == FORWARDED_APIS


@pytest.mark.parametrize("api_key", sorted(FORWARDED_APIS))
def test_not_controller_for_each_item_at_each_version(api_key: int) -> None:
    response = not_controller_response(api_key, REQUESTS[api_key])
    lo, hi = api.APIS[api_key][3]
    for version in range(lo, hi + 1):
        decoded = type(response).decode(memoryview(response.encode(version)), version)
        items: list | None  # type: ignore[type-arg]
        if api_key == 45:  # per partition, inside each topic
            items = [p for t in decoded.responses for p in t.partitions]
        elif api_key == 43:
            items = [p for t in decoded.replica_election_results for p in t.partition_result]
        else:
            items = (getattr(decoded, "topics", None) or getattr(decoded, "responses", None)
                     or getattr(decoded, "results", None) or getattr(decoded, "entries", None))
        codes = [i.error_code for i in items] if items else [decoded.error_code]
        assert codes and all(c == ErrorCode.NOT_CONTROLLER for c in codes)
    if api_key in (19, 20):
        assert len(items or []) == 2
