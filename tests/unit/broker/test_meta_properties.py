"""``meta.properties``: Kafka's v1 text, ids in Kafka's form, and a write that a crash
cannot tear (on the in-memory file system, which loses what was not synced)."""

from __future__ import annotations

import base64
import errno
from pathlib import Path

import pytest

from odradek.broker.control.meta_properties import (
    DataDirError,
    check_uuid,
    format_meta_properties,
    random_uuid,
    read_meta_properties,
    write_meta_properties,
)
from odradek.common.ids import SeededIds
from odradek.storage.memfs import MemoryFileSystem


def test_random_uuid_is_kafkas_form() -> None:
    ids = SeededIds(5)
    seen = {random_uuid(ids) for _ in range(2000)}
    assert len(seen) == 2000
    for text in seen:
        assert len(text) == 22 and not text.startswith("-")
        assert check_uuid(text) == text
        assert len(base64.urlsafe_b64decode(text + "==")) == 16
    assert random_uuid(SeededIds(5)) == random_uuid(SeededIds(5))


@pytest.mark.parametrize("text", ["", "abc", "A" * 21, "A" * 23, "A" * 22 + "=", "A" * 20 + "+/",
                                  "A" * 21 + " "])
def test_check_uuid_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        check_uuid(text)


def test_check_uuid_takes_padding() -> None:
    assert check_uuid("MkU3OEVBNTcwNTJENDM2Qg==") == "MkU3OEVBNTcwNTJENDM2Qg=="


def test_round_trip(tmp_path: Path) -> None:
    written = write_meta_properties(tmp_path / "a" / "b", "MkU3OEVBNTcwNTJENDM2Qg", 7,
                                    ids=SeededIds(1))
    assert read_meta_properties(tmp_path / "a" / "b" / "meta.properties") == written
    assert written["version"] == "1" and written["node.id"] == "7"
    text = (tmp_path / "a" / "b" / "meta.properties").read_text()
    assert text.startswith("#") and text.splitlines()[1:] == [
        "version=1", f"directory.id={written['directory.id']}", "node.id=7",
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qg"]


def test_reads_what_kafka_writes(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Thu Mar 06 10:00:00 UTC 2025\nnode.id=1\ndirectory.id=x\n"
                    "version=1\ncluster.id=5L6g3nShT-eMCtK--X86sw\n")
    assert read_meta_properties(path)["cluster.id"] == "5L6g3nShT-eMCtK--X86sw"
    path.write_text("version=1\nnode.id=1\n")
    with pytest.raises(DataDirError, match=r"no cluster\.id"):
        read_meta_properties(path)


def test_a_crash_leaves_no_file_or_a_whole_one() -> None:
    body = format_meta_properties("c" * 22, 1, "d" * 22)
    # Crash after each step of the write: the name never holds a torn file.
    fs = MemoryFileSystem()
    fs.makedirs("/data")
    fs.sync_dir("/")
    fs.fail_next_sync("meta.properties.tmp", err=errno.EIO)
    with pytest.raises(OSError):
        write_meta_properties(Path("/data"), "c" * 22, 1, fs=fs)
    fs.crash()
    assert not fs.exists("/data/meta.properties")
    write_meta_properties(Path("/data"), "c" * 22, 1, fs=fs)
    fs.crash()  # everything was synced, the directory entry too
    text = fs.read_file("/data/meta.properties")
    assert len(text) == len(body) and b"cluster.id=" + b"c" * 22 in text
