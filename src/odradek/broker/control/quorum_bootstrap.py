"""A dynamic controller quorum's bootstrap (KIP-853), written by ``odradek storage
format`` and read when a controller starts.

``odradek storage format`` writes ``bootstrap.voters`` into ``metadata.log.dir``
with ``--standalone`` (a voter set of just this controller),
``--initial-controllers ID@HOST:PORT:DIRID,...`` (every initial controller; this
one's directory id is taken from the list) or ``--no-initial-controllers`` (an
empty set: the controller starts as an observer and is added later with
``odradek metadata-quorum add-controller``). File, big-endian::

    b"ODQB" | kraft.version int16 (1) | VotersRecord body (odradek.raft.voters)

The first leader of an empty log writes that set as its first VotersRecord
(with a KRaftVersionRecord); from then on the log's latest VotersRecord is the
voter set. A node without the file runs the static ``controller.quorum.voters``
(``kraft.version`` 0).

A directory id on the command line is a Kafka ``Uuid`` string (22 characters
of base64url), as in ``meta.properties``.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import uuid
from pathlib import Path

from odradek.raft.voters import Endpoint, Voter, VoterSet, decode_voters, encode_voters

BOOTSTRAP_VOTERS = "bootstrap.voters"
_MAGIC = b"ODQB"
_ENTRY = re.compile(r"^(\d+)@(\[[^\]]+\]|[^:@]+):(\d+):([A-Za-z0-9_-]{22})$")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """A Kafka ``Uuid`` string (22 characters of base64url); ValueError if not one."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text):
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 characters of base64url)")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def uuid_to_kafka(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_initial_controllers(text: str, listener: str) -> VoterSet:
    """``1@host:9093:DIRID,2@...`` → a voter set (each endpoint named ``listener``);
    ValueError naming the bad entry."""
    voters = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        m = _ENTRY.match(item)
        if m is None:
            raise ValueError(f"--initial-controllers: bad entry {item!r}, expected "
                             f"ID@HOST:PORT:DIRECTORY_ID")
        host = m.group(2).strip("[]")
        voters.append(Voter(int(m.group(1)), uuid_from_kafka(m.group(4)),
                            (Endpoint(listener, host, int(m.group(3))),)))
    if not voters:
        raise ValueError("--initial-controllers: no controller given")
    if len({v.node_id for v in voters}) != len(voters):
        raise ValueError("--initial-controllers: a node id is given twice")
    return VoterSet.of(voters)


def write_bootstrap_voters(directory: Path, voters: VoterSet) -> Path:
    path = directory / BOOTSTRAP_VOTERS
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(_MAGIC + struct.pack(">h", 1) + encode_voters(voters))
    os.replace(tmp, path)
    return path


def read_bootstrap_voters(directory: Path) -> VoterSet | None:
    """The bootstrap voter set of ``directory`` (None: no file, a static quorum);
    ValueError if the file is damaged."""
    try:
        data = (directory / BOOTSTRAP_VOTERS).read_bytes()
    except FileNotFoundError:
        return None
    if not data.startswith(_MAGIC) or len(data) < 6:
        raise ValueError(f"{directory / BOOTSTRAP_VOTERS} is not a bootstrap voters file")
    return decode_voters(data[6:])
