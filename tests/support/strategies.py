"""Hypothesis strategies derived from the generated field tables.

``message_strategy(cls, version)`` draws instances whose fields that exist in
``version`` are random and valid for it, and whose other fields keep their
defaults, so ``decode(encode(x, v), v) == x`` must hold.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from typing import Any

from hypothesis import strategies as st

import odradek.wire.internal as internal_pkg
import odradek.wire.messages as messages_pkg
from odradek.wire.schema import FieldDef, Message, Struct, in_range

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

_SMALL_LIST = 3


def _scalar(f: FieldDef) -> st.SearchStrategy[Any]:
    t = f.kind
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    raise AssertionError(t)


def _field(f: FieldDef, version: int, depth: int) -> st.SearchStrategy[Any]:
    if f.kind == "struct":
        assert f.struct is not None
        elem = struct_strategy(f.struct, version, depth + 1)
    else:
        elem = _scalar(f)
    value = st.lists(elem, max_size=_SMALL_LIST if depth < 3 else 1) if f.array else elem
    if in_range(version, f.nullable):
        value = st.none() | value
    return value


def struct_strategy(cls: type[Struct], version: int, depth: int = 0) -> st.SearchStrategy[Any]:
    kwargs = {
        f.name: _field(f, version, depth)
        for f in cls.FIELDS
        if in_range(version, f.versions)
    }
    return st.builds(cls, **kwargs)


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    return struct_strategy(cls, version)


def all_message_classes() -> list[type[Message]]:
    """Every generated top-level message class, requests, responses and records."""
    out: list[type[Message]] = []
    for pkg in (messages_pkg, internal_pkg):
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name == "api_table":
                continue
            module = importlib.import_module(f"{pkg.__name__}.{info.name}")
            for name in module.__all__:
                obj = getattr(module, name)
                if isinstance(obj, type) and issubclass(obj, Message) and obj is not Message:
                    out.append(obj)
    return sorted(out, key=lambda c: c.__module__)


def all_message_versions() -> list[tuple[type[Message], int]]:
    return [
        (cls, v)
        for cls in all_message_classes()
        for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
    ]
