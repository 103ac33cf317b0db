"""Bootstrap metadata records written at format time (``odradek storage format
--add-scram``, KIP-900) and appended to the metadata log when a new cluster's
controller first writes it.

File: ``bootstrap.records`` in ``metadata.log.dir`` (or the first of
``log.dirs``): each record as the metadata journal frames it
(:func:`odradek.broker.control.journal.encode_record`), preceded by its size
as a big-endian int32. Read by :func:`read_bootstrap`; a single node appends
them with its first registration, a cluster's first active controller with
the ``metadata.version`` feature record (:func:`odradek.metadata.controller.finalize_features`),
so they are written once, into an empty log, as Kafka's bootstrap snapshot is.

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
from typing import TYPE_CHECKING, Any

from odradek.broker.control.journal import decode_record, encode_record
from odradek.wire import scram

if TYPE_CHECKING:
    from odradek.wire.internal.user_scram_credential_record import UserScramCredentialRecord

BOOTSTRAP_FILE = "bootstrap.records"
_I32 = struct.Struct(">i")


def write_bootstrap(directory: Path, records: list[Any]) -> Path:
    path = directory / BOOTSTRAP_FILE
    data = b"".join(_I32.pack(len(e)) + e for e in map(encode_record, records))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def read_bootstrap(directory: Path) -> list[Any]:
    """The bootstrap records of ``directory`` (none when it has no file)."""
    path = directory / BOOTSTRAP_FILE
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
