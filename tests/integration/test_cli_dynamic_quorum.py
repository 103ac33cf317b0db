"""``odradek storage format`` for dynamic quorums (KIP-853) and the one-line
errors of ``odradek metadata-quorum`` (the quorum changes themselves run in
test_dynamic_quorum.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from odradek.broker.control.quorum_bootstrap import (
    read_bootstrap_voters,
    uuid_from_kafka,
)


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def new_id() -> str:
    return odradek("storage", "random-uuid").stdout.strip()


def controller(tmp_path: Path, node_id: int = 1) -> Path:
    path = tmp_path / f"c{node_id}.properties"
    path.write_text("\n".join([
        "process.roles=controller", f"node.id={node_id}",
        "listeners=CONTROLLER://127.0.0.1:19093", "controller.listener.names=CONTROLLER",
        "controller.quorum.bootstrap.servers=127.0.0.1:19093",
        f"log.dirs={tmp_path / f'data{node_id}'}"]) + "\n")
    return path


def meta_id(directory: Path) -> str:
    text = (directory / "meta.properties").read_text()
    return next(x.split("=", 1)[1] for x in text.splitlines() if x.startswith("directory.id="))


def test_standalone_writes_this_controller_as_the_only_voter(tmp_path: Path) -> None:
    proc = odradek("storage", "format", "--standalone", "-t", new_id(), "-c",
                   str(controller(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    data = tmp_path / "data1"
    voters = read_bootstrap_voters(data)
    assert voters is not None and voters.ids == {1}
    voter = voters.voters[0]
    assert voter.directory_id == uuid_from_kafka(meta_id(data))
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [
        ("CONTROLLER", "127.0.0.1", 19093)]


def test_initial_controllers_give_this_directory_its_listed_id(tmp_path: Path) -> None:
    ids = {n: new_id() for n in (1, 2)}
    listed = ",".join(f"{n}@127.0.0.1:{19092 + n}:{ids[n]}" for n in (1, 2))
    proc = odradek("storage", "format", "--initial-controllers", listed, "-t", new_id(),
                   "-c", str(controller(tmp_path, 2)))
    assert proc.returncode == 0, proc.stderr
    assert meta_id(tmp_path / "data2") == ids[2]
    voters = read_bootstrap_voters(tmp_path / "data2")
    assert voters is not None and voters.ids == {1, 2}
    assert voters.voters[0].directory_id == uuid_from_kafka(ids[1])


def test_no_initial_controllers_writes_an_empty_voter_set(tmp_path: Path) -> None:
    proc = odradek("storage", "format", "--no-initial-controllers", "-t", new_id(), "-c",
                   str(controller(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    voters = read_bootstrap_voters(tmp_path / "data1")
    assert voters is not None and voters.ids == frozenset()


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    props = str(controller(tmp_path))
    bad = odradek("storage", "format", "--initial-controllers", "1@host:9093", "-t", new_id(),
                  "-c", props)
    assert bad.returncode == 1 and bad.stderr == (
        "odradek: --initial-controllers: bad entry '1@host:9093', expected "
        "ID@HOST:PORT:DIRECTORY_ID\n")
    other = odradek("storage", "format", "--initial-controllers",
                    f"5@127.0.0.1:9093:{new_id()}", "-t", new_id(), "-c", props)
    assert other.returncode == 1 and other.stderr == (
        "odradek: --initial-controllers: node.id=1 is not among [5]\n")
    both = odradek("storage", "format", "--standalone", "--no-initial-controllers", "-t",
                   new_id(), "-c", props)
    assert both.returncode == 2 and len(both.stderr.splitlines()) == 1
    add = odradek("metadata-quorum", "add-controller", "--bootstrap-server", "127.0.0.1:1")
    assert add.returncode == 1 and add.stderr == (
        "odradek: add-controller needs --command-config (the new controller's properties "
        "file)\n")
    remove = odradek("metadata-quorum", "remove-controller", "--bootstrap-server",
                     "127.0.0.1:1", "--controller-id", "2", "--controller-directory-id", "x")
    assert remove.returncode == 1 and remove.stderr.startswith(
        "odradek: --controller-directory-id: 'x' is not a Kafka Uuid") and (
        len(remove.stderr.splitlines()) == 1)
    unformatted = odradek("metadata-quorum", "add-controller", "--bootstrap-server",
                          "127.0.0.1:1", "--command-config", str(controller(tmp_path, 7)))
    assert unformatted.returncode == 1 and unformatted.stderr.startswith("odradek: cannot read ")
    assert len(unformatted.stderr.splitlines()) == 1
