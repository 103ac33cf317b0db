"""Single message transforms and predicates (Kafka's ``connect/transforms``)."""

_T = "org.apache.kafka.connect.transforms."
_M = "odradek.connect.transforms."

BUILTIN: dict[str, str] = {
    **{f"{_T}{name}${side}": f"{_M}{module}:{name}{side}"
       for name, module in (("InsertField", "fields"), ("ReplaceField", "fields"),
                            ("MaskField", "fields"), ("ExtractField", "shape"),
                            ("HoistField", "shape"), ("Flatten", "shape"),
                            ("SetSchemaMetadata", "shape"), ("Cast", "cast"),
                            ("TimestampConverter", "timestamps"), ("HeaderFrom", "headers"))
       for side in ("Key", "Value")},
    f"{_T}ValueToKey": f"{_M}fields:ValueToKey",
    f"{_T}RegexRouter": f"{_M}routing:RegexRouter",
    f"{_T}TimestampRouter": f"{_M}timestamps:TimestampRouter",
    f"{_T}Filter": f"{_M}routing:Filter",
    f"{_T}InsertHeader": f"{_M}headers:InsertHeader",
    f"{_T}DropHeaders": f"{_M}headers:DropHeaders",
    f"{_T}predicates.TopicNameMatches": f"{_M}predicates:TopicNameMatches",
    f"{_T}predicates.HasHeaderKey": f"{_M}predicates:HasHeaderKey",
    f"{_T}predicates.RecordIsTombstone": f"{_M}predicates:RecordIsTombstone",
}
"""Kafka's class name -> ``"python.module:Class"`` of each plugin here (imported
only when used). The plugin lookup also accepts the simple name and the Python path."""
