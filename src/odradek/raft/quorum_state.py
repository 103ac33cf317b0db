"""What a node must remember across restarts to vote safely: the ``quorum-state``.

``(epoch, leader_id, voted_id)``: the highest epoch the node has seen, the leader
it knows for it (-1: none) and whom it voted for in it (-1: nobody). It is
written before the node acts on a change (grants a vote, stands as candidate,
follows or leads), so a restarted node never votes twice in an epoch and never
goes back to an older one.

The file, ``quorum-state`` in the metadata log's directory: one JSON object,
Kafka's ``QuorumStateData`` version 1 as Kafka 4 writes it::

    {"leaderId":1,"leaderEpoch":5,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}

``leaderId``/``votedId`` are -1 when unknown/none. Version 0 (Kafka 3.x, with
``clusterId``, ``appliedOffset`` and ``currentVoters``) is read too. Writes go
to ``quorum-state.tmp``, are fsynced, renamed over the file and the directory
is synced, so the file is always one whole version, the old or the new. A file
that does not parse is :class:`QuorumStateError` (one line naming the file and
the way out): the node does not start on it, since without its vote it could
vote twice in one epoch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Protocol

from odradek.storage.checkpoint import write_atomically
from odradek.storage.fs import FileSystem


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """Survives a simulated crash (the simulation keeps the object)."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


FILE_NAME = "quorum-state"
_NO_DIRECTORY = "AAAAAAAAAAAAAAAAAAAAAA"


class QuorumStateError(Exception):
    """The quorum-state file is damaged; the message is one line."""


class FileQuorumStateStore:
    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.directory = directory
        self.path = os.path.join(directory, FILE_NAME)

    def read(self) -> ElectionState | None:
        if not self.fs.exists(self.path):
            return None
        raw = self.fs.read_file(self.path)
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or data.get("data_version") not in (0, 1):
                raise ValueError("not a QuorumStateData object of version 0 or 1")
            state = ElectionState(_int(data, "leaderEpoch"), _int(data, "leaderId"),
                                  _int(data, "votedId"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise QuorumStateError(
                f"{self.path} is damaged ({_reason(exc)}): this node cannot tell whom it voted "
                f"for; restore the file, or move it aside to start the node as a voter that has "
                f"not voted (safe unless an election is under way)") from None
        if state.epoch < 0 or state.leader_id < -1 or state.voted_id < -1:
            raise QuorumStateError(f"{self.path} is damaged (negative epoch or node id): "
                                   f"restore the file or move it aside")
        return state

    def write(self, state: ElectionState) -> None:
        body = {
            "leaderId": state.leader_id, "leaderEpoch": state.epoch, "votedId": state.voted_id,
            "votedDirectoryId": _NO_DIRECTORY, "data_version": 1,
        }
        if not self.fs.is_dir(self.directory):
            self.fs.makedirs(self.directory)
            self.fs.sync_dir(os.path.dirname(self.directory.rstrip("/")) or "/")
        write_atomically(self.fs, self.path, json.dumps(body, separators=(",", ":")).encode())


def _int(data: dict[str, object], key: str) -> int:
    value = data.get(key, -1)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} is not an integer")
    return value


def _reason(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
