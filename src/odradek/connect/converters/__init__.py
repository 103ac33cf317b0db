"""Converters between Connect data and Kafka record bytes (Kafka's ``Converter``)."""

BUILTIN: dict[str, str] = {
    "org.apache.kafka.connect.storage.StringConverter":
        "odradek.connect.converters.simple:StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter":
        "odradek.connect.converters.simple:ByteArrayConverter",
}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
