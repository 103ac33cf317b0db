"""Connect's distributed mode, the pure core: no I/O, no threads, no clocks.

- :mod:`.protocol` — the ``connect`` group protocol's JoinGroup metadata and
  SyncGroup assignment bytes (eager v0, compatible v1, sessioned v2);
- :mod:`.assignor` — KIP-415 incremental cooperative assignment, run by the
  group leader; time is passed in;
- :mod:`.configstate` — the config topic as a state machine (records in,
  snapshots and change events out) and the encoders of its records;
- :mod:`.statusrecords` — the status topic's keys and values and the latest
  status per connector and task.

The I/O side (the Kafka-backed logs, the distributed herder and its
JoinGroup/SyncGroup loop) lives in :mod:`odradek.connect.runtime` and feeds
these with bytes and records.
"""
