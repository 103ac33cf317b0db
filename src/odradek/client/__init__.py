"""A small async Kafka client over odradek.wire (CLI, replica fetchers, tests)."""
