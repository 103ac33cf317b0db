"""The connectors shipped with Odradek Connect."""

BUILTIN: dict[str, str] = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector":
        "odradek.connect.connectors.file:FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector":
        "odradek.connect.connectors.file:FileStreamSinkConnector",
}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
