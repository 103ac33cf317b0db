"""The controller quorum's voter set, as KIP-853 keeps it: in the metadata log.

A voter is ``(node id, directory id)`` plus the endpoints others reach it on
and the ``kraft.version`` range it supports; a voter tells the leader when
either changes (UpdateRaftVoter, :func:`odradek.raft.membership.check_update`).
With ``kraft.version`` 1 the voter set is a control record of the log, Kafka's
``VotersRecord`` (control type 6), next to a ``KRaftVersionRecord`` (type 5);
a node's voter set is the **latest** VotersRecord in its log, uncommitted ones
included (KIP-853). A log without one (``kraft.version`` 0) uses the static
``controller.quorum.voters`` (directory ids unknown: :data:`NO_DIRECTORY`).

In the core a control entry's record is its value prefixed by a tag
(:data:`VOTERS_TAG`, :data:`KRAFT_VERSION_TAG`; the LeaderChange record is
``b"leader-change"``); :mod:`odradek.raft.codec` turns the tag into the control
key on disk and back. Record bodies, big-endian, flexible (tagged fields
empty), as the specs say::

    VotersRecord:       Version int16 (0), Voters compact array of
                        [VoterId int32, VoterDirectoryId uuid,
                         Endpoints compact array of [Name compact string,
                           Host compact string, Port uint16, tags],
                         KRaftVersionFeature [Min int16, Max int16, tags], tags], tags
    KRaftVersionRecord: Version int16 (0), KRaftVersion int16, tags

A snapshot's payload is opaque to the core, so the core frames it
(:func:`frame_snapshot`): ``b"ODVS" | u32 length | VotersRecord body | payload``;
an unframed payload (written before voters lived in the log) has no voter set.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.wire.primitives import (
    read_compact_string,
    read_int16,
    read_int32,
    read_uint16,
    read_uuid,
    read_uvarint,
    write_int16,
    write_int32,
    write_uint16,
    write_uuid,
    write_uvarint,
)

SUPPORTED_KRAFT_VERSIONS = (0, 1)
"""The ``kraft.version`` range this release supports (min, max), inclusive."""
NO_DIRECTORY = uuid.UUID(int=0)
"""The directory id of a static voter (Kafka's ``Uuid.ZERO_UUID``)."""
VOTERS_TAG = b"kraft.voters\x00"
KRAFT_VERSION_TAG = b"kraft.version\x00"
VOTERS_CONTROL_TYPE = 6
KRAFT_VERSION_CONTROL_TYPE = 5
_FRAME = b"ODVS"


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    directory_id: uuid.UUID = NO_DIRECTORY
    endpoints: tuple[Endpoint, ...] = ()
    kraft_versions: tuple[int, int] = SUPPORTED_KRAFT_VERSIONS
    """(min, max) ``kraft.version`` the voter supports (the record's KRaftVersionFeature)."""

    @property
    def key(self) -> tuple[int, uuid.UUID]:
        return self.node_id, self.directory_id


@dataclass(frozen=True, slots=True)
class VoterSet:
    """Voters sorted by id; at most one voter per node id."""

    voters: tuple[Voter, ...]

    @staticmethod
    def of(voters: Iterable[Voter]) -> VoterSet:
        return VoterSet(tuple(sorted(voters, key=lambda v: v.node_id)))

    @staticmethod
    def static(ids: Iterable[int]) -> VoterSet:
        return VoterSet.of(Voter(i) for i in ids)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.node_id for v in self.voters)

    def get(self, node_id: int) -> Voter | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    def has(self, node_id: int, directory_id: uuid.UUID) -> bool:
        v = self.get(node_id)
        return v is not None and v.directory_id == directory_id

    def adding(self, voter: Voter) -> VoterSet:
        return VoterSet.of([*(v for v in self.voters if v.node_id != voter.node_id), voter])

    def updating(self, voter: Voter) -> VoterSet:
        """The set with ``voter`` in place of the voter of its id (same ids)."""
        assert voter.node_id in self.ids
        return self.adding(voter)

    def removing(self, node_id: int) -> VoterSet:
        return VoterSet.of(v for v in self.voters if v.node_id != node_id)


def encode_voters(voters: VoterSet) -> bytes:
    out = bytearray()
    write_int16(out, 0)
    write_uvarint(out, len(voters.voters) + 1)
    for v in voters.voters:
        write_int32(out, v.node_id)
        write_uuid(out, v.directory_id)
        write_uvarint(out, len(v.endpoints) + 1)
        for e in v.endpoints:
            for text in (e.name, e.host):
                raw = text.encode()
                write_uvarint(out, len(raw) + 1)
                out += raw
            write_uint16(out, e.port)
            write_uvarint(out, 0)
        write_int16(out, v.kraft_versions[0])
        write_int16(out, v.kraft_versions[1])
        write_uvarint(out, 0)  # KRaftVersionFeature's tags
        write_uvarint(out, 0)  # the voter's tags
    write_uvarint(out, 0)
    return bytes(out)


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def decode_voters(buf: bytes) -> VoterSet:
    """A VotersRecord body (DecodeError if damaged)."""
    _, pos = read_int16(buf, 0)
    n, pos = read_uvarint(buf, pos)
    voters = []
    for _ in range(max(0, n - 1)):
        node_id, pos = read_int32(buf, pos)
        dir_id, pos = read_uuid(buf, pos)
        m, pos = read_uvarint(buf, pos)
        endpoints = []
        for _ in range(max(0, m - 1)):
            name, pos = read_compact_string(buf, pos)
            host, pos = read_compact_string(buf, pos)
            port, pos = read_uint16(buf, pos)
            pos = _skip_tags(buf, pos)
            endpoints.append(Endpoint(name, host, port))
        low, pos = read_int16(buf, pos)  # KRaftVersionFeature min, max
        high, pos = read_int16(buf, pos)
        pos = _skip_tags(buf, pos)
        pos = _skip_tags(buf, pos)
        voters.append(Voter(node_id, dir_id, tuple(endpoints), (low, high)))
    return VoterSet.of(voters)


def voters_record(voters: VoterSet) -> bytes:
    """The core's record for a VotersRecord (tag + body)."""
    return VOTERS_TAG + encode_voters(voters)


def kraft_version_record(version: int) -> bytes:
    out = bytearray(KRAFT_VERSION_TAG)
    write_int16(out, 0)
    write_int16(out, version)
    write_uvarint(out, 0)
    return bytes(out)


def frame_snapshot(voters: VoterSet | None, payload: bytes) -> bytes:
    if voters is None:
        return payload
    body = encode_voters(voters)
    return _FRAME + struct.pack(">I", len(body)) + body + payload


def unframe_snapshot(data: bytes) -> tuple[VoterSet | None, bytes]:
    """(voter set, the shell's payload) of a snapshot's payload."""
    if not data.startswith(_FRAME):
        return None, data
    (size,) = struct.unpack_from(">I", data, 4)
    return decode_voters(data[8 : 8 + size]), data[8 + size :]


class VoterHistory:
    """The voter sets a node's log holds, by the offset of their record.

    :meth:`latest` is the set in force (uncommitted changes included); a log
    without a VotersRecord falls back on ``static``. Truncation drops the
    changes it cuts; a snapshot's voter set becomes the base."""

    def __init__(self, static: VoterSet) -> None:
        self.static = static
        self._base: VoterSet | None = None
        self._changes: list[tuple[int, VoterSet]] = []

    def latest(self) -> VoterSet:
        if self._changes:
            return self._changes[-1][1]
        return self._base or self.static

    def previous(self) -> VoterSet:
        """The set before the latest change in the log."""
        if len(self._changes) > 1:
            return self._changes[-2][1]
        return self._base or self.static

    @property
    def kraft_version(self) -> int:
        return 1 if self._changes or self._base is not None else 0

    def last_change_offset(self) -> int:
        """The offset of the newest VotersRecord in the log (-1: none past the snapshot)."""
        return self._changes[-1][0] if self._changes else -1

    def at(self, end: int) -> VoterSet | None:
        """The voter set of the log cut at ``end`` (None: the static one)."""
        found = self._base
        for offset, voters in self._changes:
            if offset < end:
                found = voters
        return found

    def observe(self, offset: int, records: Iterable[bytes]) -> None:
        for i, record in enumerate(records):
            if record.startswith(VOTERS_TAG):
                self._changes.append((offset + i, decode_voters(record[len(VOTERS_TAG):])))

    def truncate(self, end: int) -> None:
        self._changes = [(o, v) for o, v in self._changes if o < end]

    def reset(self, base: VoterSet | None, start: int) -> None:
        """The log now starts at ``start`` with a snapshot holding ``base``."""
        self._changes = [(o, v) for o, v in self._changes if o >= start]
        self._base = base
