"""Single message transforms and predicates (Kafka's ``connect/transforms``)."""

BUILTIN: dict[str, str] = {}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
