"""Kafka Connect's group protocol: JoinGroup metadata and SyncGroup assignments.

Workers of one Connect cluster join a classic group with protocol type
``"connect"``; the broker treats these bytes as opaque, so they only have to
agree with other workers (Java ones included). Protocol names and versions,
newest first in a JoinGroup: ``sessioned`` (v2, signed internal REST calls),
``compatible`` (v1, incremental cooperative, KIP-415), ``default`` (v0, eager).

Encoding: Kafka's ``Struct`` encoding, big-endian. ``int16``/``int32``/``int64``
are two's complement; a string is an ``int16`` byte length then UTF-8 (never
null here); nullable bytes are an ``int32`` length, ``-1`` meaning null; an
array is an ``int32`` count (``-1`` = null, read as empty) then its items.

Metadata (JoinGroup, one per protocol offered)::

    v0:    version int16 | url string | config_offset int64
    v1/v2: version int16 | url string | config_offset int64
           | allocation nullable bytes     (null: the worker runs nothing;
                                            else an assignment as below, with
                                            its own version header)

Assignment (SyncGroup, one per member)::

    v0:    version int16 | error int16 | leader string | leader_url string
           | config_offset int64 | assignment [connector string, tasks [int32]]
    v1/v2: the same, then revoked [connector string, tasks [int32]]
           | delay int32

In ``assignment``/``revoked`` the task id ``-1`` names the connector instance
itself; this module maps it to :attr:`Assignment.connectors` (and
``revoked_connectors``), so a :class:`ConnectorTaskId` always has a task
number >= 0. Encoders write one entry per connector, connectors sorted by
name, ``-1`` first then the task numbers ascending; decoders accept any order
(Java workers write connectors in hash order) and return them sorted.

``delay`` (ms) is how long a worker waits before it rejoins to pick up work
held back for a member that left (KIP-415's scheduled rebalance).

Decoders raise :class:`ValueError` (only that) on anything malformed:
short input, negative lengths, bad UTF-8, task ids below -1, trailing bytes
after a version this module knows. A version above 2 is read with the v1/v2
layout and trailing bytes are ignored, as Kafka does for newer peers.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CONNECT_PROTOCOL_TYPE = "connect"

EAGER = 0
COMPATIBLE = 1
SESSIONED = 2
#: Protocol name of each version, as offered in JoinGroup.
PROTOCOL_NAMES: dict[int, str] = {
    EAGER: "default", COMPATIBLE: "compatible", SESSIONED: "sessioned",
}
#: The ``connect.protocol`` worker setting's values and the protocols each offers.
_OFFERS: dict[str, list[tuple[str, int]]] = {
    "sessioned": [("sessioned", SESSIONED), ("compatible", COMPATIBLE)],
    "compatible": [("compatible", COMPATIBLE), ("default", EAGER)],
    "eager": [("default", EAGER)],
    "default": [("default", EAGER)],
}

NO_ERROR = 0
CONFIG_MISMATCH = 1

#: Task id that stands for the connector instance in the encoded assignment.
CONNECTOR_TASK = -1


@dataclass(frozen=True, order=True)
class ConnectorTaskId:
    """One task of a connector; ``task`` >= 0 (the connector itself is kept apart)."""

    connector: str
    task: int


@dataclass(frozen=True)
class Assignment:
    """A SyncGroup assignment: what a member starts and stops.

    ``connectors``/``tasks`` are the work newly given to the member in this
    round (incremental protocols) or all of its work (eager); the member stops
    ``revoked_*`` before it rejoins. As a worker's *allocation* (in its
    metadata) the same class lists everything it runs and nothing revoked.
    """

    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[ConnectorTaskId, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[ConnectorTaskId, ...] = ()
    delay_ms: int = 0


@dataclass(frozen=True)
class WorkerState:
    """JoinGroup metadata: where the worker's REST API is, how far it has read
    the config topic, and (v1+) what it runs now."""

    url: str
    config_offset: int
    allocation: Assignment | None = None


def protocols(connect_protocol: str) -> list[tuple[str, int]]:
    """The (name, version) pairs a worker offers for ``connect.protocol``, newest first.

    Raises ValueError for a value Kafka does not know.
    """
    try:
        return list(_OFFERS[connect_protocol.strip().lower()])
    except KeyError:
        raise ValueError(f"connect.protocol must be one of eager, compatible, sessioned; "
                         f"got {connect_protocol!r}") from None


def version_of(protocol_name: str) -> int:
    """The version of a protocol name chosen by the coordinator (``sessioned`` -> 2)."""
    for version, name in PROTOCOL_NAMES.items():
        if name == protocol_name:
            return version
    raise ValueError(f"unknown Connect protocol {protocol_name!r}")


# -- encoding -----------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def _check_version(version: int) -> None:
    if not 0 <= version <= 0x7FFF:
        raise ValueError(f"bad Connect protocol version {version}")


def _entries(connectors: tuple[str, ...], tasks: tuple[ConnectorTaskId, ...]) -> bytes:
    by_connector: dict[str, list[int]] = {}
    for name in connectors:
        by_connector.setdefault(name, []).append(CONNECTOR_TASK)
    for task in tasks:
        if task.task < 0:
            raise ValueError(f"task id {task.task} of {task.connector!r} is negative")
        by_connector.setdefault(task.connector, []).append(task.task)
    out = [_I32.pack(len(by_connector))]
    for name in sorted(by_connector):
        ids = sorted(set(by_connector[name]))
        out.append(_string(name))
        out.append(_I32.pack(len(ids)))
        out.extend(_I32.pack(i) for i in ids)
    return b"".join(out)


def _assignment_body(a: Assignment, version: int) -> bytes:
    head = (_I16.pack(a.error) + _string(a.leader) + _string(a.leader_url)
            + _I64.pack(a.config_offset) + _entries(a.connectors, a.tasks))
    if version == EAGER:
        if a.revoked_connectors or a.revoked_tasks or a.delay_ms:
            raise ValueError("the eager protocol (v0) has no revocations or delay")
        return head
    return head + _entries(a.revoked_connectors, a.revoked_tasks) + _I32.pack(a.delay_ms)


def encode_assignment(a: Assignment, version: int) -> bytes:
    """The SyncGroup bytes of ``a`` for protocol ``version`` (0, 1 or 2).

    Raises ValueError if a number does not fit its field.
    """
    _check_version(version)
    try:
        return _I16.pack(version) + _assignment_body(a, version)
    except struct.error as exc:
        raise ValueError(f"assignment field out of range: {exc}") from None


def encode_metadata(state: WorkerState, version: int) -> bytes:
    """The JoinGroup metadata of ``state`` for protocol ``version``.

    v0 has no allocation field, so the allocation is left out there. Raises
    ValueError if a number does not fit its field.
    """
    _check_version(version)
    try:
        body = _I16.pack(version) + _string(state.url) + _I64.pack(state.config_offset)
    except struct.error as exc:
        raise ValueError(f"metadata field out of range: {exc}") from None
    if version == EAGER:
        return body
    if state.allocation is None:
        return body + _I32.pack(-1)
    allocation = encode_assignment(state.allocation, version)
    return body + _I32.pack(len(allocation)) + allocation


# -- decoding -----------------------------------------------------------------


class _Reader:
    """A cursor over bytes whose every short read raises ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"truncated Connect protocol data at byte {self.pos} "
                             f"(need {n}, have {len(self.data) - self.pos})")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ValueError(f"negative string length {n} at byte {self.pos - 2}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"string is not UTF-8: {exc}") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise ValueError(f"negative bytes length {n}")
        return self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n < -1:
            raise ValueError(f"negative array count {n}")
        # Each item takes at least 4 bytes: refuse counts the data cannot hold.
        if n > (len(self.data) - self.pos) // 4:
            raise ValueError(f"array count {n} exceeds the data left")
        return max(n, 0)

    def version(self) -> int:
        v = self.i16()
        if v < 0:
            raise ValueError(f"unsupported Connect protocol version {v}")
        return v

    def end(self, version: int) -> None:
        if version <= SESSIONED and self.pos != len(self.data):
            raise ValueError(f"{len(self.data) - self.pos} trailing bytes after "
                             f"Connect protocol v{version} data")


def _read_entries(r: _Reader) -> tuple[tuple[str, ...], tuple[ConnectorTaskId, ...]]:
    connectors: list[str] = []
    tasks: list[ConnectorTaskId] = []
    for _ in range(r.count()):
        name = r.string()
        for _ in range(r.count()):
            task = r.i32()
            if task == CONNECTOR_TASK:
                connectors.append(name)
            elif task < 0:
                raise ValueError(f"bad task id {task} for connector {name!r}")
            else:
                tasks.append(ConnectorTaskId(name, task))
    return tuple(sorted(connectors)), tuple(sorted(tasks))


def _read_assignment(r: _Reader, version: int) -> Assignment:
    error = r.i16()
    leader = r.string()
    leader_url = r.string()
    config_offset = r.i64()
    connectors, tasks = _read_entries(r)
    if version == EAGER:
        return Assignment(error, leader, leader_url, config_offset, connectors, tasks)
    revoked_connectors, revoked_tasks = _read_entries(r)
    delay_ms = r.i32()
    return Assignment(error, leader, leader_url, config_offset, connectors, tasks,
                      revoked_connectors, revoked_tasks, delay_ms)


def decode_assignment(data: bytes) -> Assignment:
    """The assignment in SyncGroup bytes; raises ValueError if malformed."""
    r = _Reader(data)
    version = r.version()
    a = _read_assignment(r, version)
    r.end(version)
    return a


def decode_metadata(data: bytes) -> tuple[int, WorkerState]:
    """(version, worker state) of JoinGroup metadata; raises ValueError if malformed."""
    r = _Reader(data)
    version = r.version()
    url = r.string()
    config_offset = r.i64()
    allocation: Assignment | None = None
    if version != EAGER:
        raw = r.nullable_bytes()
        if raw is not None:
            allocation = decode_assignment(raw)
    r.end(version)
    return version, WorkerState(url, config_offset, allocation)
