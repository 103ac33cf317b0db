"""Generates odradek.wire.messages from Kafka's JSON message specs."""
