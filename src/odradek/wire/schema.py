"""The runtime side of the generated messages: field tables and base classes.

Each generated struct is a slotted dataclass with one attribute per Kafka field
(snake_case) and a ``FIELDS`` table saying, per field, its type, the versions it
exists in, the versions it may be null in, whether it is tagged (and its tag),
its default and whether it is ignorable. Encoders and decoders are compiled from
that table once per (class, version) by :mod:`odradek.wire.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, TypeAlias

from odradek.wire.primitives import Buffer, DecodeError

MAX_VERSION = 0x7FFF

Versions: TypeAlias = tuple[int, int]
"""An inclusive version range; ``(3, MAX_VERSION)`` is Kafka's ``3+``."""


class ExternalRecords(Protocol):
    """A records value the encoder does not copy (e.g. a slice of a segment file).

    Encoding such a value splits the output into parts; the transport writes it.
    """

    def __len__(self) -> int: ...


RecordsData: TypeAlias = "Buffer | ExternalRecords"


def in_range(version: int, versions: Versions | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


@dataclass(frozen=True, slots=True)
class FieldDef:
    """One field of a generated struct.

    ``kind`` is one of int8, int16, int32, int64, uint16, uint32, float64, bool,
    string, bytes, uuid, records or struct; ``array`` marks ``[]type``.
    ``default`` is the Python default, ``None`` for a null default, and ``()``
    for arrays and structs whose default is an empty list / a fresh struct.
    ``flexible`` overrides the message's flexible versions for this field when
    ``use_message_flexible`` is false (Kafka uses it to keep
    RequestHeader.ClientId a non-compact string).
    """

    name: str
    kafka_name: str
    kind: str
    versions: Versions
    default: Any
    array: bool = False
    struct: type[Struct] | None = None
    nullable: Versions | None = None
    tagged: Versions | None = None
    tag: int | None = None
    ignorable: bool = False
    flexible: Versions | None = None
    use_message_flexible: bool = True


class Struct:
    """Base of every generated struct. Subclasses are slotted dataclasses."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[FieldDef, ...]] = ()
    FLEXIBLE_VERSIONS: ClassVar[Versions | None] = None

    def encode(self, version: int) -> bytes:
        """Encode to one bytes object (copies external records, if any, by len only)."""
        from odradek.wire.codec import encode

        return encode(self, version)

    def encode_parts(self, version: int) -> list[Any]:
        """Encode to a list of buffers and external records values, in order."""
        from odradek.wire.codec import encode_parts

        return encode_parts(self, version)

    @classmethod
    def decode(cls, buf: Buffer, version: int) -> Self:
        """Decode a whole buffer; trailing bytes raise :class:`DecodeError`."""
        from odradek.wire.codec import decode_from

        value, pos = decode_from(cls, buf, 0, version)
        if pos != len(buf):
            raise DecodeError(f"{len(buf) - pos} trailing bytes after {cls.__name__}")
        return value

    @classmethod
    def decode_from(cls, buf: Buffer, pos: int, version: int) -> tuple[Self, int]:
        from odradek.wire.codec import decode_from

        return decode_from(cls, buf, pos, version)


class Message(Struct):
    """A top-level message: a request, a response, a header or a data record."""

    __slots__ = ()
    API_KEY: ClassVar[int] = -1
    MESSAGE_TYPE: ClassVar[str] = ""
    VALID_VERSIONS: ClassVar[Versions] = (0, 0)

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return in_range(version, cls.FLEXIBLE_VERSIONS)
