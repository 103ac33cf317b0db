"""The bootstrap metadata ``odradek storage format`` writes and a new cluster's
first active controller applies: ``bootstrap.checkpoint`` (Kafka's
``kafka-storage.sh format`` file), and the older ``bootstrap.records``.

``bootstrap.checkpoint`` in ``metadata.log.dir`` (or the first of ``log.dirs``)
is a metadata snapshot in Kafka's format, at snapshot id (end offset 0, epoch
0): Kafka RecordBatch v2 batches back to back (:mod:`odradek.wire.records`),
each with ``partitionLeaderEpoch`` 0, no compression, timestamps the time of
writing, producer id/epoch/sequence -1:

1. a control batch at base offset 0 holding one record: key = control key
   (version int16 0, type int16 3: SNAPSHOT_HEADER), value = SnapshotHeaderRecord
   v0 (``Version`` int16 0, ``LastContainedLogTimestamp`` int64, no tagged
   fields: one 0 byte);
2. one data batch at base offset 1: one record per metadata record, null key,
   the value framed as the metadata log frames it
   (:func:`odradek.broker.control.journal.encode_record`: frame version,
   api key, version, body), offsets 1, 2, ...;
3. a control batch at the next offset holding one record: key = control key
   (0, type 4: SNAPSHOT_FOOTER), value = SnapshotFooterRecord v0 (``Version``
   int16 0, no tagged fields).

Its records, in order: the ``metadata.version`` FeatureLevelRecord first, then
the other finalized features at their levels (``transaction.version`` 2 unless
``--feature`` names another; a level of 0 is left out, as "off"), then the SCRAM
credentials of ``--add-scram`` (KIP-900). A file without its footer, with a
damaged batch or without ``metadata.version`` is refused
(:func:`read_bootstrap` raises ValueError). The file is written as
``bootstrap.checkpoint.tmp``, fsynced and renamed.

The first active controller of a cluster whose log holds no
``metadata.version`` yet writes these records as they are, as its first
(:func:`odradek.metadata.controller.finalize_features`); a single node writes
them with its first registration. They are written once, into an empty log.

``bootstrap.records`` (an older Odradek's ``format``, read only when there is
no ``bootstrap.checkpoint``): the records ``--add-scram`` and ``--feature``
named, each as :func:`~odradek.broker.control.journal.encode_record` frames it,
preceded by its size as a big-endian int32; the controller then adds the
default feature levels those records leave out. A node formatted with neither
file starts from the defaults (:mod:`odradek.metadata.features`).

``--add-scram`` values, as kafka-storage.sh takes them:
``SCRAM-SHA-256=[name=alice,password=alice-secret]`` with optional
``iterations=`` (4096), ``salt=`` (base64, else 16 random bytes); a value may
be double-quoted.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from odradek.broker.control.journal import decode_record, encode_record
from odradek.metadata import features
from odradek.wire import scram
from odradek.wire.internal.feature_level_record import FeatureLevelRecord
from odradek.wire.records import Record, build_batch, decode_batch

if TYPE_CHECKING:
    from odradek.wire.internal.user_scram_credential_record import UserScramCredentialRecord

BOOTSTRAP_CHECKPOINT: Final = "bootstrap.checkpoint"
BOOTSTRAP_FILE: Final = "bootstrap.records"
"""The older format's file name (read when there is no checkpoint)."""
SNAPSHOT_HEADER_TYPE: Final = 3
SNAPSHOT_FOOTER_TYPE: Final = 4
_I32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")


def bootstrap_records(levels: dict[str, int], extra: list[Any] | None = None) -> list[Any]:
    """What ``storage format`` writes: the new cluster's feature levels with
    ``levels`` (``--feature``) over the defaults, ``metadata.version`` first, then
    ``extra`` (the SCRAM credentials)."""
    return [*features.new_cluster_records(levels), *(extra or [])]


def encode_checkpoint(records: list[Any], now_ms: int) -> bytes:
    """``records`` as a bootstrap snapshot file (the module's format)."""
    header = build_batch(
        [Record(0, now_ms, _CONTROL_KEY.pack(0, SNAPSHOT_HEADER_TYPE),
                struct.pack(">hqB", 0, now_ms, 0))],
        base_offset=0, control=True, partition_leader_epoch=0)
    data = build_batch(
        [Record(1 + i, now_ms, None, encode_record(r)) for i, r in enumerate(records)],
        base_offset=1, partition_leader_epoch=0) if records else b""
    end = 1 + len(records)
    footer = build_batch(
        [Record(end, now_ms, _CONTROL_KEY.pack(0, SNAPSHOT_FOOTER_TYPE),
                struct.pack(">hB", 0, 0))],
        base_offset=end, control=True, partition_leader_epoch=0)
    return header + data + footer


def decode_checkpoint(data: bytes) -> list[Any]:
    """The metadata records of a bootstrap snapshot file; ValueError (one line)
    if it is damaged, torn (no footer) or holds no ``metadata.version``."""
    out: list[Any] = []
    pos, seen_header, seen_footer = 0, False, False
    view = memoryview(data)
    while pos < len(data):
        if seen_footer:
            raise ValueError("bytes after the snapshot footer")
        header, records = decode_batch(view, pos)
        pos += header.size
        if header.is_control:
            types = [_control_type(r.key) for r in records]
            if not seen_header:
                if types[:1] != [SNAPSHOT_HEADER_TYPE]:
                    raise ValueError("it does not begin with a snapshot header")
                seen_header = True
            elif SNAPSHOT_FOOTER_TYPE in types:
                seen_footer = True
            continue
        if not seen_header:
            raise ValueError("it does not begin with a snapshot header")
        out.extend(decode_record(bytes(r.value)) for r in records if r.value is not None)
    if not seen_footer:
        raise ValueError("no snapshot footer (a torn file)")
    if not any(isinstance(r, FeatureLevelRecord) and r.name == features.METADATA_VERSION
               for r in out):
        raise ValueError("no metadata.version FeatureLevelRecord")
    for r in out:
        if isinstance(r, FeatureLevelRecord) and (
                problem := features.check_level(r.name, r.feature_level)):
            raise ValueError(problem)
    return out


def _control_type(key: Any) -> int:
    if key is None or len(key) < _CONTROL_KEY.size:
        return -1
    return int(_CONTROL_KEY.unpack_from(bytes(key[:_CONTROL_KEY.size]))[1])


def write_bootstrap(directory: Path, records: list[Any], now_ms: int) -> Path:
    """Write ``directory``/bootstrap.checkpoint (tmp file, fsync, rename, directory sync)."""
    path = directory / BOOTSTRAP_CHECKPOINT
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(encode_checkpoint(records, now_ms))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_bootstrap(directory: Path) -> list[Any]:
    """The bootstrap records of ``directory``: its ``bootstrap.checkpoint``'s
    (complete: ``metadata.version`` among them), else an older
    ``bootstrap.records``' (only what was named), else none. ValueError naming
    the file if the checkpoint cannot be read."""
    path = directory / BOOTSTRAP_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _read_legacy(directory / BOOTSTRAP_FILE)
    try:
        return decode_checkpoint(data)
    except ValueError as exc:
        raise ValueError(f"{path} is not a bootstrap checkpoint: {exc}; format "
                         f"{directory} again") from None


def _read_legacy(path: Path) -> list[Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = _I32.unpack_from(data, pos)
        out.append(decode_record(data[pos + 4:pos + 4 + size]))
        pos += 4 + size
    return out


def parse_add_scram(text: str) -> UserScramCredentialRecord:
    """One ``--add-scram`` value → its credential record; ValueError saying what is wrong."""
    mech_name, sep, rest = text.partition("=")
    mech = scram.MECHANISMS.get(mech_name.strip().upper())
    if mech is None:
        raise ValueError(f"--add-scram: unknown mechanism {mech_name.strip()!r} "
                         f"({', '.join(scram.MECHANISMS)})")
    rest = rest.strip()
    if not sep or not (rest.startswith("[") and rest.endswith("]")):
        raise ValueError("--add-scram: expected MECHANISM=[name=NAME,password=PASSWORD]")
    fields: dict[str, str] = {}
    for item in rest[1:-1].split(","):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--add-scram: expected key=value, got {item.strip()!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        fields[key.strip().lower()] = value
    name, password = fields.get("name", ""), fields.get("password", "")
    if not name or not password:
        raise ValueError("--add-scram: name= and password= are required")
    try:
        iterations = int(fields.get("iterations", "4096"))
        salt = (base64.b64decode(fields["salt"], validate=True) if "salt" in fields
                else os.urandom(16))
    except (ValueError, binascii.Error):
        raise ValueError("--add-scram: iterations must be a number, salt base64") from None
    if not mech.min_iterations <= iterations <= mech.max_iterations:
        raise ValueError(f"--add-scram: iterations must be {mech.min_iterations} to "
                         f"{mech.max_iterations}")
    from odradek.wire.internal.user_scram_credential_record import UserScramCredentialRecord

    cred = scram.credential(mech.hash_name, password, salt, iterations)
    return UserScramCredentialRecord(name=name, mechanism=mech.id, salt=cred.salt,
                                     stored_key=cred.stored_key, server_key=cred.server_key,
                                     iterations=iterations)
