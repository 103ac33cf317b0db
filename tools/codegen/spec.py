"""Read Kafka's JSON message specs into a small model.

The specs are JSON with ``//`` line comments. Only names, types, versions,
defaults and tags are kept; the ``about`` prose is dropped on purpose so none of
it reaches the generated code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_VERSION = 0x7FFF


class SpecError(ValueError):
    """A spec file the generator does not understand."""


def strip_comments(text: str) -> str:
    """Remove ``//`` comments that are outside JSON strings."""
    out: list[str] = []
    i = 0
    n = len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
            out.append(c)
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_versions(text: str | None) -> tuple[int, int] | None:
    """``"3+"`` → (3, MAX), ``"1-4"`` → (1, 4), ``"2"`` → (2, 2), ``"none"``/None → None."""
    if text is None:
        return None
    text = text.strip()
    if text in ("", "none"):
        return None
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    if "-" in text:
        lo, hi = text.split("-", 1)
        return int(lo), int(hi)
    return int(text), int(text)


@dataclass
class FieldSpec:
    name: str
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    default: str | None
    ignorable: bool
    flexible: tuple[int, int] | None
    has_flexible_override: bool
    fields: list[FieldSpec] = field(default_factory=list)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type[:1].isupper()


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid_versions: tuple[int, int]
    flexible_versions: tuple[int, int] | None
    fields: list[FieldSpec]
    common_structs: dict[str, list[FieldSpec]]
    listeners: list[str]
    source: str


_PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64",
    "bool", "string", "bytes", "uuid", "records",
}


def _parse_field(raw: dict[str, object], where: str) -> FieldSpec:
    name = str(raw["name"])
    ftype = str(raw["type"])
    element = ftype[2:] if ftype.startswith("[]") else ftype
    if not element[:1].isupper() and element not in _PRIMITIVES:
        raise SpecError(f"{where}.{name}: unknown type {ftype}")
    # A tagged field may omit "versions": it then exists in its tagged versions.
    versions = parse_versions(_opt_str(raw.get("versions", raw.get("taggedVersions"))))
    if versions is None:
        raise SpecError(f"{where}.{name}: field with no versions")
    tag = raw.get("tag")
    default = raw.get("default")
    sub = raw.get("fields", [])
    assert isinstance(sub, list)
    return FieldSpec(
        name=name,
        type=ftype,
        versions=versions,
        nullable=parse_versions(_opt_str(raw.get("nullableVersions"))),
        tagged=parse_versions(_opt_str(raw.get("taggedVersions"))),
        tag=int(str(tag)) if tag is not None else None,
        default=None if default is None else str(default),
        ignorable=bool(raw.get("ignorable", False)),
        flexible=parse_versions(_opt_str(raw.get("flexibleVersions"))),
        has_flexible_override="flexibleVersions" in raw,
        fields=[_parse_field(f, f"{where}.{name}") for f in sub],
    )


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def load_spec(
    path: Path, amend: Callable[[dict[str, Any]], str | None] | None = None
) -> MessageSpec:
    """Parse one spec file. ``amend`` may edit the parsed JSON first (the
    project's overlays, :mod:`tools.codegen.overlay`) and returns the name of
    what it applied, which the generated module's header then cites."""
    try:
        raw = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path.name}: {exc}") from exc
    source = path.name
    applied = amend(raw) if amend is not None else None
    if applied is not None:
        source = f"{path.name} and {applied}"
    name = str(raw["name"])
    valid = parse_versions(str(raw["validVersions"]))
    if valid is None:
        raise SpecError(f"{path.name}: no valid versions")
    common = {
        str(cs["name"]): [_parse_field(f, f"{name}.{cs['name']}") for f in cs["fields"]]
        for cs in raw.get("commonStructs", [])
    }
    api_key = raw.get("apiKey")
    return MessageSpec(
        name=name,
        type=str(raw["type"]),
        api_key=int(api_key) if api_key is not None else None,
        valid_versions=valid,
        flexible_versions=parse_versions(str(raw.get("flexibleVersions", "none"))),
        fields=[_parse_field(f, name) for f in raw["fields"]],
        common_structs=common,
        listeners=[str(x) for x in raw.get("listeners", [])],
        source=source,
    )


def snake_case(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()
