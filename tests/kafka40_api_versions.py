"""Kafka 4.0's API version ranges: what Odradek must cover (issue 18).

Where the facts come from:

- ``BROKER``: the ApiVersions answer of a Kafka 4.0.0 broker's client listener
  (default features), as captured by kafka-python 3.0.12 from a real broker
  (``kafka/protocol/broker_version_data.py``, ``BROKER_API_VERSIONS[(4, 0)]``,
  "copied from brokers via api_versions_response"). Cross-checked: the maxima
  equal franz-go's protocol definitions as updated for Kafka 4.0
  (``generate/definitions``, commit 314bf487 of April 2025) and the
  ``validVersions`` of Kafka 4.0's JSON specs as kafka-python vendors them;
  the minima are KIP-896's removals (Produce v0–2 stay advertised for
  librdkafka, KAFKA-18659).
- ``CONTROLLER_MAX``: APIs only a controller listener serves (Raft, broker
  registration, AlterPartition, producer id blocks); a broker's answer does
  not list them, so only their Kafka 4.0 maxima are recorded, from the same
  franz-go definitions. Odradek serves them from version 0.
"""

from __future__ import annotations

from typing import Final

BROKER: Final[dict[int, tuple[int, int]]] = {
    0: (0, 12),    # Produce (v0-2 advertised, rejected: KAFKA-18659)
    1: (4, 17),    # Fetch
    2: (1, 10),    # ListOffsets
    3: (0, 13),    # Metadata
    8: (2, 9),     # OffsetCommit
    9: (1, 9),     # OffsetFetch
    10: (0, 6),    # FindCoordinator
    11: (2, 9),    # JoinGroup
    12: (0, 4),    # Heartbeat
    13: (0, 5),    # LeaveGroup
    14: (0, 5),    # SyncGroup
    15: (0, 6),    # DescribeGroups
    16: (0, 5),    # ListGroups
    17: (0, 1),    # SaslHandshake
    18: (0, 4),    # ApiVersions
    19: (2, 7),    # CreateTopics
    20: (1, 6),    # DeleteTopics
    21: (0, 2),    # DeleteRecords
    22: (0, 5),    # InitProducerId
    23: (2, 4),    # OffsetForLeaderEpoch
    24: (0, 5),    # AddPartitionsToTxn
    25: (0, 4),    # AddOffsetsToTxn
    26: (0, 5),    # EndTxn
    27: (1, 1),    # WriteTxnMarkers
    28: (0, 5),    # TxnOffsetCommit
    29: (1, 3),    # DescribeAcls
    30: (1, 3),    # CreateAcls
    31: (1, 3),    # DeleteAcls
    32: (1, 4),    # DescribeConfigs
    33: (0, 2),    # AlterConfigs
    34: (1, 2),    # AlterReplicaLogDirs
    35: (1, 4),    # DescribeLogDirs
    36: (0, 2),    # SaslAuthenticate
    37: (0, 3),    # CreatePartitions
    38: (1, 3),    # CreateDelegationToken
    39: (1, 2),    # RenewDelegationToken
    40: (1, 2),    # ExpireDelegationToken
    41: (1, 3),    # DescribeDelegationToken
    42: (0, 2),    # DeleteGroups
    43: (0, 2),    # ElectLeaders
    44: (0, 1),    # IncrementalAlterConfigs
    45: (0, 0),    # AlterPartitionReassignments
    46: (0, 0),    # ListPartitionReassignments
    47: (0, 0),    # OffsetDelete
    48: (0, 1),    # DescribeClientQuotas
    49: (0, 1),    # AlterClientQuotas
    50: (0, 0),    # DescribeUserScramCredentials
    51: (0, 0),    # AlterUserScramCredentials
    55: (0, 2),    # DescribeQuorum
    57: (0, 2),    # UpdateFeatures
    60: (0, 2),    # DescribeCluster
    61: (0, 0),    # DescribeProducers
    64: (0, 0),    # UnregisterBroker
    65: (0, 0),    # DescribeTransactions
    66: (0, 1),    # ListTransactions
    68: (0, 1),    # ConsumerGroupHeartbeat
    69: (0, 1),    # ConsumerGroupDescribe
    74: (0, 0),    # ListClientMetricsResources
    75: (0, 0),    # DescribeTopicPartitions
    80: (0, 0),    # AddRaftVoter
    81: (0, 0),    # RemoveRaftVoter
}
"""API key -> (min, max) of a Kafka 4.0 broker's ApiVersions answer."""

CONTROLLER_MAX: Final[dict[int, int]] = {
    52: 2,   # Vote (v2: pre-vote, KIP-996)
    53: 1,   # BeginQuorumEpoch
    54: 1,   # EndQuorumEpoch
    56: 3,   # AlterPartition
    58: 0,   # Envelope (a broker's forwarded request, KIP-590)
    59: 1,   # FetchSnapshot
    62: 4,   # BrokerRegistration
    63: 1,   # BrokerHeartbeat
    67: 0,   # AllocateProducerIds
    82: 0,   # UpdateRaftVoter (KIP-853)
}
"""API key -> the highest version a Kafka 4.0 controller serves."""
