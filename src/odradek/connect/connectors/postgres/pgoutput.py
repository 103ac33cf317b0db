"""A decoder of ``pgoutput`` messages, protocol version 1 (PostgreSQL's
"Logical Replication Message Formats").

Integers are big-endian; a String is NUL-terminated UTF-8; LSNs are Int64;
timestamps are Int64 microseconds since 2000-01-01 UTC. Messages, by first byte:

- ``B`` Begin: final LSN (of the commit record), commit timestamp, xid (Int32);
- ``C`` Commit: flags (Int8), commit LSN, end LSN, commit timestamp;
- ``O`` Origin: LSN, name;
- ``R`` Relation: relation id (Int32), namespace, name, replica identity (Int8),
  Int16 columns, each flags (Int8; 1 = part of the replica identity), name,
  type OID (Int32), type modifier (Int32);
- ``Y`` Type: type OID, namespace, name;
- ``I`` Insert: relation id, ``N`` + TupleData (the new row);
- ``U`` Update: relation id, optionally ``K`` (key columns) or ``O`` (the whole
  old row, REPLICA IDENTITY FULL) + TupleData, then ``N`` + TupleData;
- ``D`` Delete: relation id, ``K`` or ``O`` + TupleData;
- ``T`` Truncate: Int32 relations, option bits (Int8; 1 CASCADE, 2 RESTART
  IDENTITY), relation ids;
- ``M`` Message: flags, LSN, prefix, Int32 length, bytes.

TupleData: Int16 columns, each ``n`` (null), ``u`` (unchanged TOASTed value,
not sent) or ``t`` + Int32 length + the value's text form.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass

PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
UNCHANGED = object()
"""A TOASTed value the update did not change (pgoutput does not send it)."""

Tuple = list[str | object | None]
"""A row's columns: text, None (null) or :data:`UNCHANGED`."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    typmod: int
    key: bool


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    commit_ts: int
    """Microseconds since the Unix epoch."""
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int


@dataclass(frozen=True, slots=True)
class Origin:
    lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class Relation:
    relid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class Type:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    relid: int
    new: Tuple


@dataclass(frozen=True, slots=True)
class Update:
    relid: int
    old: Tuple | None
    """The old row (``O``) or its key columns (``K``, others None); None if not sent."""
    new: Tuple


@dataclass(frozen=True, slots=True)
class Delete:
    relid: int
    old: Tuple


@dataclass(frozen=True, slots=True)
class Truncate:
    options: int
    relids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Message:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Decoded = Begin | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate | Message

_PG_TO_UNIX_US = 946_684_800_000_000


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def i8(self) -> int:
        return self._take(">b")

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def u32(self) -> int:
        return self._take(">I")

    def i64(self) -> int:
        return self._take(">q")

    def u64(self) -> int:
        return self._take(">Q")

    def byte(self) -> str:
        c = chr(self.buf[self.pos])
        self.pos += 1
        return c

    def string(self) -> str:
        end = self.buf.index(b"\0", self.pos)
        s = self.buf[self.pos:end].decode()
        self.pos = end + 1
        return s

    def bytes_(self, n: int) -> bytes:
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def ts(self) -> int:
        return self.i64() + _PG_TO_UNIX_US

    def tuple_(self) -> Tuple:
        out: Tuple = []
        for _ in range(self.i16()):
            kind = self.byte()
            if kind == "n":
                out.append(None)
            elif kind == "u":
                out.append(UNCHANGED)
            elif kind == "t":
                out.append(self.bytes_(self.i32()).decode())
            else:
                raise ValueError(f"pgoutput: unknown tuple column kind {kind!r}")
        return out


def decode(payload: bytes) -> Decoded:
    """One pgoutput message (the payload of an XLogData message)."""
    r = _Reader(payload)
    kind = r.byte()
    if kind == "B":
        return Begin(r.u64(), r.ts(), r.u32())
    if kind == "C":
        return Commit(r.i8(), r.u64(), r.u64(), r.ts())
    if kind == "O":
        return Origin(r.u64(), r.string())
    if kind == "R":
        relid, ns, name, ident = r.u32(), r.string(), r.string(), chr(r.i8())
        cols = []
        for _ in range(r.i16()):
            flags = r.i8()
            cols.append(Column(r.string(), r.u32(), r.i32(), bool(flags & 1)))
        return Relation(relid, ns, name, ident, tuple(cols))
    if kind == "Y":
        return Type(r.u32(), r.string(), r.string())
    if kind == "I":
        relid = r.u32()
        if r.byte() != "N":
            raise ValueError("pgoutput: Insert without N")
        return Insert(relid, r.tuple_())
    if kind == "U":
        relid = r.u32()
        old: Tuple | None = None
        tag = r.byte()
        if tag in ("K", "O"):
            old = r.tuple_()
            tag = r.byte()
        if tag != "N":
            raise ValueError("pgoutput: Update without N")
        return Update(relid, old, r.tuple_())
    if kind == "D":
        relid = r.u32()
        if r.byte() not in ("K", "O"):
            raise ValueError("pgoutput: Delete without K or O")
        return Delete(relid, r.tuple_())
    if kind == "T":
        n, options = r.i32(), r.i8()
        return Truncate(options, tuple(r.u32() for _ in range(n)))
    if kind == "M":
        flags, lsn, prefix = r.i8(), r.u64(), r.string()
        return Message(bool(flags & 1), lsn, prefix, r.bytes_(r.i32()))
    raise ValueError(f"pgoutput: unknown message type {kind!r}")


def lsn_str(lsn: int) -> str:
    """``X/Y`` as PostgreSQL writes an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_int(text: str) -> int:
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)
