"""The quorum-state file: Kafka's JSON, atomic replacement, damage refused."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from odradek.raft.quorum_state import ElectionState, FileQuorumStateStore, QuorumStateError
from odradek.storage.fs import OsFileSystem
from odradek.storage.memfs import MemoryFileSystem


def test_round_trip_in_kafkas_version_1_json(tmp_path: Path) -> None:
    store = FileQuorumStateStore(OsFileSystem(), str(tmp_path / "__cluster_metadata-0"))
    assert store.read() is None
    store.write(ElectionState(epoch=7, leader_id=2, voted_id=3))
    data = json.loads((tmp_path / "__cluster_metadata-0" / "quorum-state").read_text())
    assert data == {"leaderId": 2, "leaderEpoch": 7, "votedId": 3,
                    "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": 1}
    assert FileQuorumStateStore(OsFileSystem(), store.directory).read() == ElectionState(7, 2, 3)


def test_reads_kafka_3_version_0_files(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text(
        '{"clusterId":"","leaderId":-1,"leaderEpoch":3,"votedId":1,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')
    assert FileQuorumStateStore(OsFileSystem(), str(tmp_path)).read() == ElectionState(3, -1, 1)


@pytest.mark.parametrize("damage", [
    b"", b"{not json", b"\xff\xfe", b"[]", b'{"leaderEpoch":"x","data_version":1}',
    b'{"leaderEpoch":1,"leaderId":-1,"votedId":-1,"data_version":9}',
    b'{"leaderEpoch":-4,"leaderId":-1,"votedId":-1,"data_version":1}',
])
def test_a_damaged_file_is_one_clear_error(tmp_path: Path, damage: bytes) -> None:
    (tmp_path / "quorum-state").write_bytes(damage)
    with pytest.raises(QuorumStateError) as info:
        FileQuorumStateStore(OsFileSystem(), str(tmp_path)).read()
    message = str(info.value)
    assert "\n" not in message and "quorum-state is damaged" in message
    assert "move it aside" in message


def test_a_crash_during_a_write_leaves_the_old_or_the_new_state() -> None:
    for seed in range(50):
        fs = MemoryFileSystem()
        fs.makedirs("/data")  # the log directory exists (and is durable) before the node runs
        fs.sync_dir("/")
        store = FileQuorumStateStore(fs, "/data/__cluster_metadata-0")
        store.write(ElectionState(1, -1, 2))
        fs.crash(random.Random(seed))  # the first write was synced: it survives
        assert store.read() == ElectionState(1, -1, 2)
        store.write(ElectionState(2, 3, -1))
        fs.crash(random.Random(seed))
        assert store.read() == ElectionState(2, 3, -1)
