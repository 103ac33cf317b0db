"""Compile encoders and decoders from the generated field tables.

For each (struct class, version, flexible) the first use writes the Python source
of one straight-line decoder and one encoder, compiles it, and caches the pair.
This keeps the generated modules declarative (one class per struct plus a field
table, STYLE.md 3) while the hot path runs code with no per-field interpretation.

Invariants of compiled decoders:

* every length read from the input is checked against the bytes left before
  anything is allocated, so a hostile length can neither allocate nor loop;
* ``records`` fields decode to a ``memoryview`` into the input (no copy), other
  ``bytes`` fields to ``bytes``;
* any short or malformed input raises :class:`DecodeError` and nothing else.

Compiled encoders append to a ``bytearray``; a ``records`` value that is large,
or is not a buffer at all (:class:`~odradek.wire.schema.ExternalRecords`), is
emitted as a separate part so it is never copied.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from odradek.common.intern import Interner
from odradek.wire import primitives as p
from odradek.wire.primitives import Buffer, DecodeError, EncodeError
from odradek.wire.schema import FieldDef, Message, Struct, in_range

S = TypeVar("S", bound=Struct)

Decoder = Callable[[Buffer, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray, list[Any]], None]

INLINE_RECORDS_MAX = 16384

_FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
}

def _uuid_of(key: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=key)


_UUIDS: Interner[bytes, uuid.UUID] = Interner(_uuid_of)
"""Decoded UUIDs by their 16 bytes, shared: a UUID is immutable, and the few
topic and directory ids of 100k metadata records or a Fetch's topic ids come
back again and again (a lookup is a fraction of building one). Bounded as
every :class:`Interner` is, so random ids cannot grow it."""


_BASE_NS: dict[str, Any] = {
    "_uuid": _UUIDS,
    "_uv": p.read_uvarint,
    "_wuv": p.write_uvarint,
    "_DecodeError": DecodeError,
    "_EncodeError": EncodeError,
    "_unpack": struct.unpack_from,
    "_pack": struct.pack,
    "_INLINE_MAX": INLINE_RECORDS_MAX,
    "_BUFTYPES": (bytes, bytearray, memoryview),
}
for _code, (_fmt, _size) in _FIXED.items():
    _BASE_NS[f"_r_{_code}"] = struct.Struct(">" + _fmt).unpack_from
    _BASE_NS[f"_w_{_code}"] = struct.Struct(">" + _fmt).pack

_decoders: dict[tuple[type, int, bool], Decoder] = {}
_encoders: dict[tuple[type, int, bool], Encoder] = {}
_min_sizes: dict[tuple[type, int, bool], int] = {}


def _field_flexible(f: FieldDef, version: int, flexible: bool) -> bool:
    return flexible if f.use_message_flexible else in_range(version, f.flexible)


def _min_size(cls: type[Struct], version: int, flexible: bool) -> int:
    key = (cls, version, flexible)
    if key in _min_sizes:
        return _min_sizes[key]
    total = 1 if flexible else 0
    for f in cls.FIELDS:
        if not in_range(version, f.versions) or in_range(version, f.tagged):
            continue
        compact = _field_flexible(f, version, flexible)
        if f.array:
            total += 1 if compact else 4
        elif f.kind in _FIXED:
            total += _FIXED[f.kind][1]
        elif f.kind == "bool":
            total += 1
        elif f.kind == "uuid":
            total += 16
        elif f.kind == "string":
            total += 1 if compact else 2
        elif f.kind in ("bytes", "records"):
            total += 1 if compact else 4
        elif f.kind == "struct":
            assert f.struct is not None
            nullable = in_range(version, f.nullable)
            total += 1 if nullable else _min_size(f.struct, version, flexible)
    _min_sizes[key] = total
    return total


class _Source:
    """A tiny line buffer with indentation, for generated code."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 1
        self.counter = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def tmp(self) -> str:
        self.counter += 1
        return f"_t{self.counter}"


def _default_expr(f: FieldDef, ns: dict[str, Any], idx: int) -> str:
    if f.default is None:
        return "None"
    if f.array:
        return "[]"
    if f.kind == "struct":
        ns[f"_S{idx}"] = f.struct
        return f"_S{idx}()"
    ns[f"_D{idx}"] = f.default
    return f"_D{idx}"


# -- decoder generation ------------------------------------------------------


def _emit_read_uvarint(src: _Source, n: str) -> None:
    # Nearly every compact length and tag count fits in one byte, and records
    # up to 16 KiB in two: read those inline rather than call read_uvarint.
    # Past the end, buf[pos] raises IndexError, which decode_from reports as DecodeError.
    src(f"{n} = buf[pos]")
    src(f"if {n} < 128:")
    src("    pos += 1")
    src("elif (_b := buf[pos + 1]) < 128:")
    src(f"    {n} = ({n} & 127) | (_b << 7)")
    src("    pos += 2")
    src("else:")
    src(f"    {n}, pos = _uv(buf, pos)")


def _emit_read_length(src: _Source, n: str, compact: bool, width: str) -> None:
    if compact:
        _emit_read_uvarint(src, n)
        src(f"{n} -= 1")
    else:
        src(f"{n}, = _r_{width}(buf, pos)")
        src(f"pos += {4 if width == 'int32' else 2}")


def _emit_null_or_fail(src: _Source, n: str, target: str, nullable: bool, what: str) -> None:
    src(f"if {n} < 0:")
    if nullable:
        src(f"    {target} = None")
    else:
        src(f"    raise _DecodeError('null or negative length in non-nullable {what}')")


def _emit_read_scalar(
    src: _Source, f: FieldDef, target: str, compact: bool, nullable: bool, ns: dict[str, Any]
) -> None:
    t = f.kind
    if t in _FIXED:
        src(f"{target}, = _r_{t}(buf, pos)")
        src(f"pos += {_FIXED[t][1]}")
    elif t == "bool":
        src(f"{target} = buf[pos] != 0")
        src("pos += 1")
    elif t == "uuid":
        src("if pos + 16 > blen: raise _DecodeError('short input reading uuid')")
        src(f"{target} = _uuid(bytes(buf[pos:pos + 16]))")
        src("pos += 16")
    elif t in ("string", "bytes", "records"):
        n = src.tmp()
        _emit_read_length(src, n, compact, "int16" if t == "string" else "int32")
        _emit_null_or_fail(src, n, target, nullable, f.kafka_name)
        src(f"elif pos + {n} > blen:")
        src(f"    raise _DecodeError('{f.kafka_name}: length ' + str({n}) + ' overruns input')")
        src("else:")
        if t == "string":
            src(f"    {target} = str(buf[pos:pos + {n}], 'utf-8')")
        elif t == "bytes":
            src(f"    {target} = bytes(buf[pos:pos + {n}])")
        else:
            src(f"    {target} = mv[pos:pos + {n}]")
        src(f"    pos += {n}")
    else:
        raise AssertionError(f"unknown scalar type {t}")


def _emit_read_field(
    src: _Source, f: FieldDef, target: str, version: int, flexible: bool, ns: dict[str, Any]
) -> None:
    compact = _field_flexible(f, version, flexible)
    nullable = in_range(version, f.nullable)
    if f.array:
        n = src.tmp()
        _emit_read_length(src, n, compact, "int32")
        _emit_null_or_fail(src, n, target, nullable, f.kafka_name)
        if f.kind in _FIXED:
            code, size = _FIXED[f.kind]
            src(f"elif {n} * {size} > blen - pos:")
            src(f"    raise _DecodeError('{f.kafka_name}: array overruns input')")
            src("else:")
            src(f"    {target} = list(_unpack('>' + str({n}) + '{code}', buf, pos))")
            src(f"    pos += {n} * {size}")
            return
        if f.kind == "struct":
            assert f.struct is not None
            min_elem = _min_size(f.struct, version, flexible)
        else:
            min_elem = 1
        bound = "blen - pos" if min_elem > 0 else "1048576"
        src(f"elif {n} > {bound}:")
        src(f"    raise _DecodeError('{f.kafka_name}: array length ' + str({n}) + ' too large')")
        src("else:")
        src(f"    {target} = []")
        src(f"    for _ in range({n}):")
        src.level += 2
        elem = src.tmp()
        if f.kind == "struct":
            assert f.struct is not None
            fn = _decoder_name(f.struct, version, flexible, ns)
            src(f"{elem}, pos = {fn}(buf, pos)")
        else:
            _emit_read_scalar(src, f, elem, compact, False, ns)
        src(f"{target}.append({elem})")
        src.level -= 2
        return
    if f.kind == "struct":
        assert f.struct is not None
        fn = _decoder_name(f.struct, version, flexible, ns)
        if nullable:
            marker = src.tmp()
            src(f"{marker}, = _r_int8(buf, pos)")
            src("pos += 1")
            src(f"if {marker} < 0:")
            src(f"    {target} = None")
            src("else:")
            src(f"    {target}, pos = {fn}(buf, pos)")
        else:
            src(f"{target}, pos = {fn}(buf, pos)")
        return
    _emit_read_scalar(src, f, target, compact, nullable, ns)


def _decoder_name(cls: type[Struct], version: int, flexible: bool, ns: dict[str, Any]) -> str:
    name = f"_dec_{cls.__name__}"
    ns[name] = _get_decoder(cls, version, flexible)
    return name


def _build_decoder(cls: type[Struct], version: int, flexible: bool) -> Decoder:
    ns: dict[str, Any] = dict(_BASE_NS)
    ns["_cls"] = cls
    src = _Source()
    src("blen = len(buf)")
    if any(f.kind == "records" for f in cls.FIELDS):
        src("mv = memoryview(buf)")
    args: list[str] = []
    tagged: list[tuple[FieldDef, str]] = []
    for idx, f in enumerate(cls.FIELDS):
        var = f"f{idx}"
        args.append(var)
        if not in_range(version, f.versions):
            src(f"{var} = {_default_expr(f, ns, idx)}")
        elif in_range(version, f.tagged):
            src(f"{var} = {_default_expr(f, ns, idx)}")
            tagged.append((f, var))
        else:
            _emit_read_field(src, f, var, version, flexible, ns)
    if flexible:
        _emit_read_uvarint(src, "_nt")
        src("if _nt:")
        src.level += 1
        src("if _nt > blen - pos: raise _DecodeError('too many tagged fields')")
        src("for _ in range(_nt):")
        src("    _tag, pos = _uv(buf, pos)")
        src("    _sz, pos = _uv(buf, pos)")
        src("    _end = pos + _sz")
        src("    if _end > blen: raise _DecodeError('tagged field overruns input')")
        kw = "if"
        for f, var in tagged:
            src(f"    {kw} _tag == {f.tag}:")
            src.level += 2
            _emit_read_field(src, f, var, version, flexible, ns)
            src("if pos != _end: raise _DecodeError('tagged field size mismatch')")
            src.level -= 2
            kw = "elif"
        src("    else:" if tagged else "    if True:")
        src("        pos = _end")
        src.level -= 1
    src(f"return _cls({', '.join(args)}), pos")
    body = "\n".join(src.lines)
    code = f"def _decode(buf, pos):\n{body}\n"
    exec(compile(code, f"<decode {cls.__name__} v{version}>", "exec"), ns)
    fn: Decoder = ns["_decode"]
    return fn


def _get_decoder(cls: type[Struct], version: int, flexible: bool) -> Decoder:
    key = (cls, version, flexible)
    fn = _decoders.get(key)
    if fn is None:
        fn = _decoders[key] = _build_decoder(cls, version, flexible)
    return fn


# -- encoder generation ------------------------------------------------------


def _emit_write_length(src: _Source, expr: str, compact: bool, width: str) -> None:
    if compact:
        n = src.tmp()
        src(f"{n} = {expr} + 1")
        src(f"if {n} < 128:")
        src(f"    out.append({n})")
        src("else:")
        src(f"    _wuv(out, {n})")
    else:
        src(f"out += _w_{width}({expr})")


def _emit_null(src: _Source, compact: bool, width: str) -> None:
    if compact:
        src("out.append(0)")
    else:
        src(f"out += _w_{width}(-1)")


def _emit_write_scalar(src: _Source, f: FieldDef, v: str, compact: bool, nullable: bool) -> None:
    t = f.kind
    if t in _FIXED:
        src(f"out += _w_{t}({v})")
        return
    if t == "bool":
        # Every other type fails on None by itself; a bool would quietly become false.
        src(f"if {v} is None: raise _EncodeError('null in non-nullable bool {f.kafka_name}')")
        src(f"out.append(1 if {v} else 0)")
        return
    if t == "uuid":
        src(f"out += {v}.bytes")
        return
    width = "int16" if t == "string" else "int32"
    if nullable:
        src(f"if {v} is None:")
        src.level += 1
        _emit_null(src, compact, width)
        src.level -= 1
        src("else:")
        src.level += 1
    if t == "string":
        b = src.tmp()
        src(f"{b} = {v}.encode('utf-8')")
        _emit_write_length(src, f"len({b})", compact, width)
        src(f"out += {b}")
    elif t == "bytes":
        _emit_write_length(src, f"len({v})", compact, width)
        src(f"out += {v}")
    else:  # records
        _emit_write_length(src, f"len({v})", compact, width)
        src(f"if isinstance({v}, _BUFTYPES) and len({v}) <= _INLINE_MAX:")
        src(f"    out += {v}")
        src("else:")
        src("    parts.append(bytes(out))")
        src("    out.clear()")
        src(f"    parts.append({v})")
    if nullable:
        src.level -= 1


def _emit_write_field(
    src: _Source, f: FieldDef, v: str, version: int, flexible: bool, ns: dict[str, Any]
) -> None:
    compact = _field_flexible(f, version, flexible)
    nullable = in_range(version, f.nullable)
    if f.array:
        if nullable:
            src(f"if {v} is None:")
            src.level += 1
            _emit_null(src, compact, "int32")
            src.level -= 1
            src("else:")
            src.level += 1
        _emit_write_length(src, f"len({v})", compact, "int32")
        if f.kind in _FIXED:
            code, _ = _FIXED[f.kind]
            src(f"out += _pack('>' + str(len({v})) + '{code}', *{v})")
        else:
            elem = src.tmp()
            src(f"for {elem} in {v}:")
            src.level += 1
            if f.kind == "struct":
                assert f.struct is not None
                fn = _encoder_name(f.struct, version, flexible, ns)
                src(f"{fn}({elem}, out, parts)")
            else:
                _emit_write_scalar(src, f, elem, compact, False)
            src.level -= 1
        if nullable:
            src.level -= 1
        return
    if f.kind == "struct":
        assert f.struct is not None
        fn = _encoder_name(f.struct, version, flexible, ns)
        if nullable:
            src(f"if {v} is None:")
            src("    out += b'\\xff'")
            src("else:")
            src("    out += b'\\x01'")
            src(f"    {fn}({v}, out, parts)")
        else:
            src(f"{fn}({v}, out, parts)")
        return
    _emit_write_scalar(src, f, v, compact, nullable)


def _encoder_name(cls: type[Struct], version: int, flexible: bool, ns: dict[str, Any]) -> str:
    name = f"_enc_{cls.__name__}"
    ns[name] = _get_encoder(cls, version, flexible)
    return name


def _emit_non_default_test(f: FieldDef, v: str, idx: int, ns: dict[str, Any]) -> str:
    if f.default is None:
        return f"{v} is not None"
    if f.array:
        return f"{v}"
    if f.kind == "struct":
        # One default instance per compiled encoder, only ever compared with, so
        # each encode does not build a fresh struct per tagged or absent field.
        assert f.struct is not None
        ns[f"_DS{idx}"] = f.struct()
        return f"{v} != _DS{idx}"
    return f"{v} != {_default_expr(f, ns, idx)}"


def _build_encoder(cls: type[Struct], version: int, flexible: bool) -> Encoder:
    ns: dict[str, Any] = dict(_BASE_NS)
    src = _Source()
    tagged: list[tuple[int, FieldDef]] = []
    for idx, f in enumerate(cls.FIELDS):
        v = f"obj.{f.name}"
        if not in_range(version, f.versions):
            if not f.ignorable:
                src(f"if {_emit_non_default_test(f, v, idx, ns)}:")
                src(
                    f"    raise _EncodeError('{cls.__name__}.{f.name} "
                    f"is not supported in version {version}')"
                )
            continue
        if in_range(version, f.tagged):
            tagged.append((idx, f))
            continue
        local = f"v{idx}"
        src(f"{local} = {v}")
        _emit_write_field(src, f, local, version, flexible, ns)
    if flexible:
        if not tagged:
            src("out.append(0)")
        else:
            src("_tags = []")
            for idx, f in sorted(tagged, key=lambda it: it[1].tag or 0):
                local = f"v{idx}"
                src(f"{local} = obj.{f.name}")
                src(f"if {_emit_non_default_test(f, local, idx, ns)}:")
                src("    _outer = out")
                src("    out = bytearray()")
                src.level += 1
                _emit_write_field(src, f, local, version, flexible, ns)
                src(f"_tags.append(({f.tag}, out))")
                src("out = _outer")
                src.level -= 1
            src("if not _tags:")
            src("    out.append(0)")
            src("else:")
            src("    _wuv(out, len(_tags))")
            src("    for _tag, _data in _tags:")
            src("        _wuv(out, _tag)")
            src("        _wuv(out, len(_data))")
            src("        out += _data")
    if not src.lines:
        src("pass")
    body = "\n".join(src.lines)
    code = f"def _encode(obj, out, parts):\n{body}\n"
    exec(compile(code, f"<encode {cls.__name__} v{version}>", "exec"), ns)
    fn: Encoder = ns["_encode"]
    return fn


def _get_encoder(cls: type[Struct], version: int, flexible: bool) -> Encoder:
    key = (cls, version, flexible)
    fn = _encoders.get(key)
    if fn is None:
        fn = _encoders[key] = _build_encoder(cls, version, flexible)
    return fn


# -- public entry points -----------------------------------------------------


def _flexible_for(cls: type[Struct], version: int) -> bool:
    if issubclass(cls, Message):
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise UnsupportedVersion(f"{cls.__name__} has no version {version}")
    return in_range(version, cls.FLEXIBLE_VERSIONS)


class UnsupportedVersion(DecodeError, EncodeError):
    """The message has no such version."""


def decoder_for(cls: type[Struct], version: int) -> Decoder:
    return _get_decoder(cls, version, _flexible_for(cls, version))


def encoder_for(cls: type[Struct], version: int) -> Encoder:
    return _get_encoder(cls, version, _flexible_for(cls, version))


def decode_from(cls: type[S], buf: Buffer, pos: int, version: int) -> tuple[S, int]:
    fn = decoder_for(cls, version)
    try:
        value, end = fn(buf, pos)
    except DecodeError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, RecursionError) as exc:
        raise DecodeError(f"malformed {cls.__name__} v{version}: {exc}") from exc
    return value, end


def encode_into(obj: Struct, version: int, out: bytearray, parts: list[Any]) -> None:
    fn = encoder_for(type(obj), version)
    try:
        fn(obj, out, parts)
    except EncodeError:
        raise
    except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode {type(obj).__name__} v{version}: {exc}") from exc


def encode_parts(obj: Struct, version: int) -> list[Any]:
    out = bytearray()
    parts: list[Any] = []
    encode_into(obj, version, out, parts)
    if out or not parts:
        parts.append(bytes(out))
    return parts


def encode(obj: Struct, version: int) -> bytes:
    parts = encode_parts(obj, version)
    if len(parts) == 1:
        single: bytes = parts[0]
        return single
    try:
        return b"".join(parts)
    except TypeError as exc:
        raise EncodeError("external records cannot be joined; use encode_parts") from exc
