"""``meta.properties``: which cluster and node a data directory belongs to.

The file is Kafka's (version 1, as Kafka 3.7+ writes it), UTF-8 text in Java
properties form, one ``key=value`` a line, ``#`` lines are comments::

    #Written by odradek
    version=1
    directory.id=<this directory's id: a UUID in base64url, 22 characters>
    node.id=<node.id of the node that owns the directory>
    cluster.id=<the cluster id, the same on every node and directory>

It is written once per directory, by ``odradek storage format`` or, in
single-node mode, by the broker on the first start of a directory nobody
formatted; nothing rewrites it. The write goes to ``meta.properties.tmp``,
which is fsynced and renamed over the name, and the directory is synced: after
a crash there is either no file or a whole one (a left-over ``.tmp`` is
ignored and overwritten by the next write).

Reading keeps every key (a version 0 file, with ``broker.id``, reads too); a
file without ``cluster.id`` is damaged. The broker checks that ``node.id``, when
present, is its own.

Ids (``cluster.id``, ``directory.id``) are Kafka's ``Uuid`` strings: 16 bytes in
base64url without padding. Like Kafka's ``Uuid.randomUuid``, a fresh id never
starts with ``-``, so it can follow a command-line flag.
"""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path

from odradek.broker.config import ConfigError
from odradek.common.ids import Ids, RandomIds
from odradek.storage.checkpoint import write_atomically
from odradek.storage.fs import FileSystem, OsFileSystem, makedirs_durable

META_PROPERTIES = "meta.properties"
VERSION = "1"

_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


class DataDirError(ConfigError):
    """A file of the data directory that stops the broker from starting. The message
    is one line naming the file, what is wrong and the way out."""


def random_uuid(ids: Ids | None = None) -> str:
    """A fresh id in Kafka's string form (``kafka-storage.sh random-uuid``)."""
    source = ids or RandomIds()
    while True:
        text = base64.urlsafe_b64encode(source.uuid().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def check_uuid(text: str) -> str:
    """``text`` if it is a Kafka ``Uuid`` string (16 bytes in base64url), else
    ValueError saying why (one line)."""
    body = text[:-2] if text.endswith("==") else text
    # 22 characters carry 132 bits: the 16 bytes and 4 spare bits, which Kafka's
    # decoder ignores, as Python's does.
    if len(body) != 22:
        raise ValueError(f"{len(body)} base64url characters, not the 22 of 16 bytes")
    if not _UUID_TEXT.fullmatch(body):
        raise ValueError("not base64url (A-Z a-z 0-9 - _)")
    return text


def format_meta_properties(cluster_id: str, node_id: int, directory_id: str) -> bytes:
    return (f"#Written by odradek\nversion={VERSION}\ndirectory.id={directory_id}\n"
            f"node.id={node_id}\ncluster.id={cluster_id}\n").encode()


def write_meta_properties(
    directory: Path, cluster_id: str, node_id: int, *, ids: Ids | None = None,
    fs: FileSystem | None = None, directory_id: str | None = None,
) -> dict[str, str]:
    """Create ``directory`` if needed and write its ``meta.properties`` (see the module
    docstring for the format and the crash-safe write); returns what was written.
    ``directory_id``: the id to give it (a controller's, from --initial-controllers);
    a new random one by default."""
    fs = fs or OsFileSystem()
    directory_id = directory_id or random_uuid(ids)
    makedirs_durable(fs, str(directory))
    write_atomically(fs, str(directory / META_PROPERTIES),
                     format_meta_properties(cluster_id, node_id, directory_id))
    return {"version": VERSION, "directory.id": directory_id, "node.id": str(node_id),
            "cluster.id": cluster_id}


def read_meta_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines of ``meta.properties``; DataDirError (one line) if damaged."""
    way_out = ("restore it from a backup, or delete it to give this data directory a new "
               "cluster id (clients will see a different cluster)")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DataDirError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise DataDirError(f"{path} is damaged (not text): {way_out}") from None
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise DataDirError(f"{path} is damaged (a line is not key=value): {way_out}")
        props[key.strip()] = value.strip()
    if not props.get("cluster.id"):
        raise DataDirError(f"{path} is damaged (no cluster.id): {way_out}")
    return props


def directory_ids(dirs: list[Path]) -> list[uuid.UUID]:
    """The ``directory.id`` of each of ``dirs`` that has one (a broker's
    BrokerRegistration ``LogDirs``, KIP-858), as UUIDs."""
    out = []
    for directory in dirs:
        path = directory / META_PROPERTIES
        if not path.exists():
            continue
        text = read_meta_properties(path).get("directory.id")
        if text and _UUID_TEXT.fullmatch(text):
            out.append(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))
    return out
