"""Render a :class:`MessageSpec` as a Python module of slotted dataclasses.

Output per spec: one class per struct (common structs first, nested structs
before the struct that holds them, the message class last), each with a
``FIELDS`` table of :class:`odradek.wire.schema.FieldDef`. Names, types,
versions, defaults and tags only; no prose from the spec.
"""

from __future__ import annotations

import keyword

from tools.codegen.spec import MAX_VERSION, FieldSpec, MessageSpec, SpecError, snake_case

RESERVED = {"encode", "encode_parts", "decode", "decode_from", "is_flexible"}

_PY_TYPES = {
    "int8": "int", "int16": "int", "int32": "int", "int64": "int",
    "uint16": "int", "uint32": "int", "float64": "float", "bool": "bool",
    "string": "str", "bytes": "bytes", "uuid": "_uuid.UUID", "records": "_RecordsData",
}


def attr_name(kafka_name: str) -> str:
    name = snake_case(kafka_name)
    if keyword.iskeyword(name) or name in RESERVED:
        name += "_"
    return name


def _versions(v: tuple[int, int] | None) -> str:
    if v is None:
        return "None"
    return f"({v[0]}, {'_MAX' if v[1] == MAX_VERSION else v[1]})"


def _is_nullable(f: FieldSpec) -> bool:
    return f.nullable is not None or f.default == "null" or f.type == "records"


def _py_default(f: FieldSpec) -> str:
    """The Python literal of a field's default (for FieldDef.default)."""
    if f.default == "null" or (f.type == "records" and f.default is None):
        return "None"
    if f.is_array or f.is_struct:
        return "()"
    t = f.type
    raw = f.default
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return str(int(raw, 0)) if raw not in (None, "") else "0"
    if t == "float64":
        return repr(float(raw)) if raw not in (None, "") else "0.0"
    if t == "bool":
        return "True" if (raw or "").lower() == "true" else "False"
    if t == "string":
        return repr(raw or "")
    if t == "bytes":
        return "b''"
    if t == "uuid":
        return "_ZERO_UUID"
    raise SpecError(f"no default for type {t}")


def _annotation(f: FieldSpec) -> str:
    element = f.element_type
    base = element if f.is_struct else _PY_TYPES[element]
    ann = f"list[{base}]" if f.is_array else base
    if _is_nullable(f):
        ann += " | None"
    return ann


def _dataclass_default(f: FieldSpec) -> str:
    d = _py_default(f)
    if d == "()":
        factory = "list" if f.is_array else f.element_type
        return f"_field(default_factory={factory})"
    return d


class _Renderer:
    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.classes: list[str] = []
        self.defined: set[str] = set()

    def struct_class(self, f: FieldSpec) -> str:
        name = f.element_type
        if f.fields:
            if name in self.defined:
                raise SpecError(f"{self.spec.source}: struct {name} defined twice")
            self.emit(name, f.fields, None)
        elif name in self.spec.common_structs:
            if name not in self.defined:
                self.emit(name, self.spec.common_structs[name], None)
        else:
            raise SpecError(f"{self.spec.source}: struct {name} has no definition")
        return name

    def emit(self, name: str, fields: list[FieldSpec], top: MessageSpec | None) -> None:
        self.defined.add(name)
        for f in fields:
            if f.is_struct:
                self.struct_class(f)
        base = "_Message" if top else "_Struct"
        lines = ["", "", "@_dataclass(slots=True)", f"class {name}({base}):"]
        seen: set[str] = set()
        for f in fields:
            attr = attr_name(f.name)
            if attr in seen:
                raise SpecError(f"{self.spec.source}: duplicate field {attr} in {name}")
            seen.add(attr)
            lines.append(f"    {attr}: {_annotation(f)} = {_dataclass_default(f)}")
        if top:
            lines.append("")
            lines.append(f"    API_KEY = {top.api_key if top.api_key is not None else -1}")
            lines.append(f"    MESSAGE_TYPE = {top.type!r}")
            lines.append(f"    VALID_VERSIONS = {_versions(top.valid_versions)}")
        lines.append(f"    FLEXIBLE_VERSIONS = {_versions(self.spec.flexible_versions)}")
        lines.append("    FIELDS = (")
        for f in fields:
            lines.append(f"        {self.field_def(f)},")
        lines.append("    )")
        self.classes.append("\n".join(lines))

    def field_def(self, f: FieldSpec) -> str:
        ftype = "struct" if f.is_struct else f.element_type
        args = [repr(attr_name(f.name)), repr(f.name), repr(ftype), _versions(f.versions)]
        args.append(f"default={_py_default(f)}")
        if f.is_array:
            args.append("array=True")
        if f.is_struct:
            args.append(f"struct={f.element_type}")
        if f.nullable is not None:
            args.append(f"nullable={_versions(f.nullable)}")
        if f.tagged is not None:
            if f.tag is None:
                raise SpecError(f"{self.spec.source}: tagged field {f.name} has no tag")
            args.append(f"tagged={_versions(f.tagged)}")
            args.append(f"tag={f.tag}")
        if f.ignorable:
            args.append("ignorable=True")
        if f.has_flexible_override:
            args.append(f"flexible={_versions(f.flexible)}")
            args.append("use_message_flexible=False")
        return f"_F({', '.join(args)})"


HEADER = '''\
# Generated by tools/codegen from {source}. Do not edit.
from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass as _dataclass
from dataclasses import field as _field

from odradek.wire.primitives import ZERO_UUID as _ZERO_UUID
from odradek.wire.schema import MAX_VERSION as _MAX
from odradek.wire.schema import FieldDef as _F
from odradek.wire.schema import Message as _Message
from odradek.wire.schema import RecordsData as _RecordsData
from odradek.wire.schema import Struct as _Struct

__all__ = [{exports}]
'''


def render_module(spec: MessageSpec) -> str:
    r = _Renderer(spec)
    r.emit(spec.name, spec.fields, spec)
    body = "\n".join(r.classes)
    exports = ", ".join(repr(n) for n in sorted(r.defined))
    header = HEADER.format(source=spec.source, exports=exports)
    return header + body + "\n"
