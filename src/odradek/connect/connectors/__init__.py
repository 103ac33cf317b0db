"""The connectors shipped with Odradek Connect."""

BUILTIN: dict[str, str] = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector":
        "odradek.connect.connectors.file:FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector":
        "odradek.connect.connectors.file:FileStreamSinkConnector",
    # PostgreSQL (Odradek's own; no Kafka class names to match).
    "odradek.connect.connectors.postgres.PostgresSinkConnector":
        "odradek.connect.connectors.postgres.sink:PostgresSinkConnector",
    "odradek.connect.connectors.postgres.PostgresSourceConnector":
        "odradek.connect.connectors.postgres.polling:PostgresSourceConnector",
    "odradek.connect.connectors.postgres.PostgresCdcSourceConnector":
        "odradek.connect.connectors.postgres.cdc:PostgresCdcSourceConnector",
}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
