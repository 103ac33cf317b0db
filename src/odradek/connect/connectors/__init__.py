"""The connectors shipped with Odradek Connect."""

BUILTIN: dict[str, str] = {}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
