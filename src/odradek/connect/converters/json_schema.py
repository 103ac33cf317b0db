"""Connect schemas as Kafka's ``JsonConverter`` writes them in the envelope's
``schema`` field (the format is in :mod:`odradek.connect.converters.json`)."""

from __future__ import annotations

import decimal
import math
from typing import Any

from odradek.connect import data as d
from odradek.connect.converters.json_data import from_json, to_json
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Field, Schema

_JSON_TYPE = {d.FLOAT32: "float", d.FLOAT64: "double"}
_CONNECT_TYPE = {"boolean": d.BOOLEAN, "int8": d.INT8, "int16": d.INT16, "int32": d.INT32,
                 "int64": d.INT64, "float": d.FLOAT32, "double": d.FLOAT64,
                 "bytes": d.BYTES, "string": d.STRING, "array": d.ARRAY, "map": d.MAP,
                 "struct": d.STRUCT}

def schema_to_json(schema: Schema, *, numeric_decimals: bool = False) -> dict[str, Any]:
    """Kafka's JSON form of ``schema``."""
    out: dict[str, Any] = {"type": _JSON_TYPE.get(schema.type, schema.type)}
    if schema.type == d.ARRAY:
        assert schema.value_schema is not None
        out["items"] = schema_to_json(schema.value_schema, numeric_decimals=numeric_decimals)
    elif schema.type == d.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        out["keys"] = schema_to_json(schema.key_schema, numeric_decimals=numeric_decimals)
        out["values"] = schema_to_json(schema.value_schema,
                                       numeric_decimals=numeric_decimals)
    elif schema.type == d.STRUCT:
        out["fields"] = [{**schema_to_json(f.schema, numeric_decimals=numeric_decimals),
                          "field": f.name} for f in schema.fields]
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = to_json(schema, schema.default, numeric_decimals=numeric_decimals)
    return out


def schema_from_json(node: Any) -> Schema:
    """The Connect schema of Kafka's schema JSON ``node``."""
    if not isinstance(node, dict):
        raise DataError(f"Schema must be a JSON object: {node!r}")
    type_name = node.get("type")
    if not isinstance(type_name, str):
        raise DataError("Schema must contain 'type' field")
    t = _CONNECT_TYPE.get(type_name)
    if t is None:
        raise DataError(f"Unknown schema type: {type_name}")
    fields: tuple[Field, ...] = ()
    key_schema = value_schema = None
    if t == d.ARRAY:
        if "items" not in node:
            raise DataError("Array schema did not specify the element type")
        value_schema = schema_from_json(node["items"])
    elif t == d.MAP:
        if "keys" not in node or "values" not in node:
            raise DataError("Map schema did not specify the key and value types")
        key_schema = schema_from_json(node["keys"])
        value_schema = schema_from_json(node["values"])
    elif t == d.STRUCT:
        raw_fields = node.get("fields")
        if not isinstance(raw_fields, list):
            raise DataError("Struct schema's \"fields\" argument is not an array.")
        built = []
        for i, f in enumerate(raw_fields):
            if not isinstance(f, dict) or not isinstance(f.get("field"), str):
                raise DataError("Struct schema's field name not specified properly")
            built.append(Field(f["field"], i, schema_from_json(f)))
        fields = tuple(built)
    optional = node.get("optional", False)
    version = node.get("version")
    params = node.get("parameters")
    if not isinstance(optional, bool) or (version is not None and (
            not isinstance(version, int) or isinstance(version, bool))):
        raise DataError("Invalid schema: 'optional' must be a boolean, 'version' an integer")
    if params is not None and (not isinstance(params, dict) or not all(
            isinstance(v, str) for v in params.values())):
        raise DataError("Schema parameters must be a map of strings")
    name, doc = node.get("name"), node.get("doc")
    if (name is not None and not isinstance(name, str)) or (
            doc is not None and not isinstance(doc, str)):
        raise DataError("Invalid schema: 'name' and 'doc' must be strings")
    schema = Schema(t, optional=optional, name=name, version=version, doc=doc,
                    parameters=params or None, fields=fields, key_schema=key_schema,
                    value_schema=value_schema)
    if node.get("default") is not None:
        default = from_json(schema, _decimals(node["default"]))
        schema = Schema(t, optional=optional, default=default, name=name, version=version,
                        doc=doc, parameters=params or None, fields=fields,
                        key_schema=key_schema, value_schema=value_schema)
    return schema


def _decimals(node: Any) -> Any:
    """Floats in an already-parsed tree as Decimal (what :func:`loads` gives)."""
    if isinstance(node, float):
        return decimal.Decimal(repr(node)) if math.isfinite(node) else node
    if isinstance(node, list):
        return [_decimals(v) for v in node]
    if isinstance(node, dict):
        return {k: _decimals(v) for k, v in node.items()}
    return node
