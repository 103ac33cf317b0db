"""Small text files of a log directory, in Kafka's formats.

Offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``), UTF-8,
lines ended by ``\\n``::

    0                      version
    2                      number of entries
    my-topic 0 1234        topic, partition, offset, separated by one space
    other 3 0

Partition metadata, ``<topic>-<partition>/partition.metadata``::

    version: 0
    topic_id: <the topic id as Kafka prints a Uuid: 22 characters of URL-safe
               base64 without padding>

Clean-shutdown marker, ``.kafka_cleanshutdown`` in the log directory: its
presence says every log in the directory was flushed and closed; the content is
a JSON object ``{"version":"0","broker_epoch":"<n>"}`` (KIP-966), which nothing
here relies on.

Every file is replaced atomically: written to ``<name>.tmp``, fsynced, renamed
over the old one, and the directory synced, so a crash leaves the old or the
new version, never a mix.
"""

from __future__ import annotations

import base64
import json
import posixpath
import uuid
from collections.abc import Mapping

from odradek.storage.fs import FileSystem
from odradek.storage.names import CLEAN_SHUTDOWN_FILE, TMP_SUFFIX, is_valid_topic

CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]


class CheckpointFormatError(ValueError):
    pass


def write_atomically(fs: FileSystem, path: str, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace ``path`` by ``data``: ``.tmp`` written, fsynced, renamed, and the
    directory synced; with ``sync_dir`` false the caller syncs it (one sync
    for several files)."""
    tmp = path + TMP_SUFFIX
    fs.write_file(tmp, data)
    fs.fsync(tmp)
    fs.rename(tmp, path)
    if sync_dir:
        fs.sync_dir(posixpath.dirname(path) or "/")


def format_offsets(offsets: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        lines.append(f"{topic} {partition} {offset}")
    return ("\n".join(lines) + "\n").encode()


def parse_offsets(data: bytes) -> dict[TopicPartition, int]:
    lines = data.decode("utf-8").splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointFormatError("missing or unknown checkpoint version")
    try:
        count = int(lines[1])
    except ValueError as e:
        raise CheckpointFormatError(f"bad entry count {lines[1]!r}") from e
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointFormatError(f"expected {count} entries, found {len(entries)}")
    out: dict[TopicPartition, int] = {}
    for line in entries:
        parts = line.split(" ")
        if len(parts) != 3 or not is_valid_topic(parts[0]):
            raise CheckpointFormatError(f"malformed checkpoint line {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError as e:
            raise CheckpointFormatError(f"malformed checkpoint line {line!r}") from e
    return out


def read_offsets(fs: FileSystem, path: str) -> dict[TopicPartition, int]:
    """Entries of an offset checkpoint file; empty when it does not exist."""
    try:
        data = fs.read_file(path)
    except FileNotFoundError:
        return {}
    return parse_offsets(data)


def write_offsets(fs: FileSystem, path: str, offsets: Mapping[TopicPartition, int]) -> None:
    write_atomically(fs, path, format_offsets(offsets))


def kafka_uuid_string(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise CheckpointFormatError(f"bad topic id {text!r}")
    return uuid.UUID(bytes=raw)


def format_partition_metadata(topic_id: uuid.UUID) -> bytes:
    return f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}".encode()


def parse_partition_metadata(data: bytes) -> uuid.UUID:
    fields: dict[str, str] = {}
    for line in data.decode("utf-8").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointFormatError("malformed partition.metadata")
    return parse_kafka_uuid(fields["topic_id"])


def clean_shutdown_path(log_dir: str) -> str:
    return posixpath.join(log_dir, CLEAN_SHUTDOWN_FILE)


def write_clean_shutdown(fs: FileSystem, log_dir: str, broker_epoch: int = -1) -> None:
    body = json.dumps({"version": "0", "broker_epoch": str(broker_epoch)}, separators=(",", ":"))
    write_atomically(fs, clean_shutdown_path(log_dir), body.encode())
