"""Converters between Connect data and Kafka record bytes (Kafka's ``Converter``)."""

BUILTIN: dict[str, str] = {
    "org.apache.kafka.connect.storage.StringConverter":
        "odradek.connect.converters.simple:StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter":
        "odradek.connect.converters.simple:ByteArrayConverter",
    "org.apache.kafka.connect.json.JsonConverter":
        "odradek.connect.converters.json:JsonConverter",
    "org.apache.kafka.connect.converters.ShortConverter":
        "odradek.connect.converters.numbers:ShortConverter",
    "org.apache.kafka.connect.converters.IntegerConverter":
        "odradek.connect.converters.numbers:IntegerConverter",
    "org.apache.kafka.connect.converters.LongConverter":
        "odradek.connect.converters.numbers:LongConverter",
    "org.apache.kafka.connect.converters.FloatConverter":
        "odradek.connect.converters.numbers:FloatConverter",
    "org.apache.kafka.connect.converters.DoubleConverter":
        "odradek.connect.converters.numbers:DoubleConverter",
    "org.apache.kafka.connect.storage.SimpleHeaderConverter":
        "odradek.connect.converters.header:SimpleHeaderConverter",
}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
