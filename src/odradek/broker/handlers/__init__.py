"""One module per API, named by key; importing this package registers them all."""

import odradek.broker.handlers.k00_produce
import odradek.broker.handlers.k01_fetch
import odradek.broker.handlers.k02_list_offsets
import odradek.broker.handlers.k03_metadata
import odradek.broker.handlers.k08_offset_commit
import odradek.broker.handlers.k09_offset_fetch
import odradek.broker.handlers.k10_find_coordinator
import odradek.broker.handlers.k11_join_group
import odradek.broker.handlers.k12_heartbeat
import odradek.broker.handlers.k13_leave_group
import odradek.broker.handlers.k14_sync_group
import odradek.broker.handlers.k15_describe_groups
import odradek.broker.handlers.k16_list_groups
import odradek.broker.handlers.k18_api_versions
import odradek.broker.handlers.k19_create_topics
import odradek.broker.handlers.k20_delete_topics
import odradek.broker.handlers.k21_delete_records
import odradek.broker.handlers.k22_init_producer_id
import odradek.broker.handlers.k24_add_partitions_to_txn
import odradek.broker.handlers.k25_add_offsets_to_txn
import odradek.broker.handlers.k26_end_txn
import odradek.broker.handlers.k27_write_txn_markers
import odradek.broker.handlers.k28_txn_offset_commit
import odradek.broker.handlers.k32_describe_configs
import odradek.broker.handlers.k33_alter_configs
import odradek.broker.handlers.k35_describe_log_dirs
import odradek.broker.handlers.k37_create_partitions
import odradek.broker.handlers.k42_delete_groups
import odradek.broker.handlers.k44_incremental_alter_configs
import odradek.broker.handlers.k47_offset_delete
import odradek.broker.handlers.k48_describe_client_quotas
import odradek.broker.handlers.k49_alter_client_quotas
import odradek.broker.handlers.k60_describe_cluster
import odradek.broker.handlers.k61_describe_producers
import odradek.broker.handlers.k65_describe_transactions
import odradek.broker.handlers.k66_list_transactions  # noqa: F401
