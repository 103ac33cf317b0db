"""One module per API, named by key, imported on the first request of its API.

``SERVED`` maps each API key to its module (``kNN_name``, in this package) and
the versions it serves, inclusive. ApiVersions is answered from this table
(:func:`odradek.broker.net.registry.advertised`), so a broker starts without
importing 50 handler modules and the message classes they use (about half of
``odradek serve``'s start-up); :func:`odradek.broker.net.registry.registration`
imports a module when its API is first requested. Each module still declares
its versions with ``@handler(key, versions)``, and registration refuses a
module whose versions differ from its row here
(``tests/unit/broker/test_registry.py`` imports them all and checks both ways).
``python -m tools.handler_table`` rewrites the table from the modules.
Nothing else belongs in this file: importing one handler imports this package.
"""

SERVED: dict[int, tuple[str, tuple[int, int]]] = {
    0: ("k00_produce", (0, 12)),
    1: ("k01_fetch", (4, 17)),
    2: ("k02_list_offsets", (1, 10)),
    3: ("k03_metadata", (0, 13)),
    8: ("k08_offset_commit", (2, 9)),
    9: ("k09_offset_fetch", (1, 9)),
    10: ("k10_find_coordinator", (0, 6)),
    11: ("k11_join_group", (0, 9)),
    12: ("k12_heartbeat", (0, 4)),
    13: ("k13_leave_group", (0, 5)),
    14: ("k14_sync_group", (0, 5)),
    15: ("k15_describe_groups", (0, 6)),
    16: ("k16_list_groups", (0, 5)),
    17: ("k17_sasl_handshake", (0, 1)),
    18: ("k18_api_versions", (0, 4)),
    19: ("k19_create_topics", (0, 7)),
    20: ("k20_delete_topics", (0, 6)),
    21: ("k21_delete_records", (0, 2)),
    22: ("k22_init_producer_id", (0, 5)),
    23: ("k23_offset_for_leader_epoch", (0, 4)),
    24: ("k24_add_partitions_to_txn", (0, 5)),
    25: ("k25_add_offsets_to_txn", (0, 4)),
    26: ("k26_end_txn", (0, 5)),
    27: ("k27_write_txn_markers", (1, 1)),
    28: ("k28_txn_offset_commit", (0, 5)),
    29: ("k29_describe_acls", (1, 3)),
    30: ("k30_create_acls", (1, 3)),
    31: ("k31_delete_acls", (1, 3)),
    32: ("k32_describe_configs", (0, 4)),
    33: ("k33_alter_configs", (0, 2)),
    34: ("k34_alter_replica_log_dirs", (1, 2)),
    35: ("k35_describe_log_dirs", (1, 4)),
    36: ("k36_sasl_authenticate", (0, 2)),
    37: ("k37_create_partitions", (0, 3)),
    42: ("k42_delete_groups", (0, 2)),
    43: ("k43_elect_leaders", (0, 2)),
    44: ("k44_incremental_alter_configs", (0, 1)),
    45: ("k45_alter_partition_reassignments", (0, 0)),
    46: ("k46_list_partition_reassignments", (0, 0)),
    47: ("k47_offset_delete", (0, 0)),
    48: ("k48_describe_client_quotas", (0, 1)),
    49: ("k49_alter_client_quotas", (0, 1)),
    50: ("k50_describe_user_scram_credentials", (0, 0)),
    51: ("k51_alter_user_scram_credentials", (0, 0)),
    52: ("k52_vote", (0, 2)),
    53: ("k53_begin_quorum_epoch", (0, 1)),
    54: ("k54_end_quorum_epoch", (0, 1)),
    55: ("k55_describe_quorum", (0, 2)),
    56: ("k56_alter_partition", (0, 3)),
    57: ("k57_update_features", (0, 2)),
    58: ("k58_envelope", (0, 0)),
    59: ("k59_fetch_snapshot", (0, 1)),
    60: ("k60_describe_cluster", (0, 2)),
    61: ("k61_describe_producers", (0, 0)),
    62: ("k62_broker_registration", (0, 4)),
    63: ("k63_broker_heartbeat", (0, 1)),
    65: ("k65_describe_transactions", (0, 0)),
    66: ("k66_list_transactions", (0, 1)),
    67: ("k67_allocate_producer_ids", (0, 0)),
    68: ("k68_consumer_group_heartbeat", (0, 1)),
    69: ("k69_consumer_group_describe", (0, 1)),
    75: ("k75_describe_topic_partitions", (0, 0)),
    80: ("k80_add_raft_voter", (0, 0)),
    81: ("k81_remove_raft_voter", (0, 0)),
    82: ("k82_update_raft_voter", (0, 0)),
}
