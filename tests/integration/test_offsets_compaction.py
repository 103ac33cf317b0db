"""``__consumer_offsets`` is compacted: 100,000 offset commits of one group shrink
to about the last commit of each partition, and survive a restart.

One group commits offsets for four partitions 100,000 times (raw OffsetCommit
requests, pipelined 500 at a time, each committing one partition) into a
single ``__consumer_offsets`` partition with 1 MB segments
(``offsets.topic.segment.bytes``), the cleaner off. After a clean stop the
partition directory is measured, the broker restarts with the cleaner on, and
the test waits until the segments have shrunk; after another clean stop the
directory is measured again (both sizes are printed). A last restart must
load exactly the last committed offset of each partition.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.support.process import ServerProcess
from tests.support.rawclient import RawClient

COMMITS = 100_000
WINDOW = 500
PARTITIONS = 4
GROUP = "committer"
TOPIC = "source"
BROKER = ("offsets.topic.num.partitions=1", "offsets.topic.segment.bytes=1048576",
          "log.cleaner.backoff.ms=100", "log.segment.delete.delay.ms=0")
CLEANER_OFF = "log.cleaner.enable=false"


def _commit_many(bootstrap: str) -> dict[int, int]:
    """COMMITS OffsetCommit requests (v8), WINDOW in flight at a time; the last
    offset committed for each partition."""
    raw = RawClient(bootstrap)
    try:
        found = raw.request(FindCoordinatorRequest(key=GROUP), 1)
        assert found.error_code == 0
        last: dict[int, int] = {}
        for start in range(0, COMMITS, WINDOW):
            frames = []
            for i in range(start, start + WINDOW):
                p, offset = i % PARTITIONS, i
                frames.append(raw.conn.send(OffsetCommitRequest(
                    group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                    topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[
                        OffsetCommitRequestPartition(partition_index=p, committed_offset=offset,
                                                     committed_metadata=f"m{i}")])],
                ), 8))
                last[p] = offset
            raw.sock.sendall(b"".join(frames))
            answered = 0
            while answered < WINDOW:
                got = raw.conn.next_response()
                if got is None:
                    data = raw.sock.recv(1 << 20)
                    assert data, "the broker closed the connection"
                    raw.conn.receive_data(data)
                    continue
                answered += 1
                assert [p.error_code for t in got[1].topics for p in t.partitions] == [0]
        return last
    finally:
        raw.close()


def _size(part: Path, suffix: str = "") -> int:
    """Bytes of the partition's files (those pending deletion aside). The
    cleaner swaps and deletes files while this runs: one listed and then gone
    counts as nothing."""
    total = 0
    for n in os.listdir(part):
        if n.endswith(suffix) and not n.endswith(".deleted"):
            with contextlib.suppress(FileNotFoundError):
                total += (part / n).stat().st_size
    return total


def _committed(bootstrap: str) -> dict[int, tuple[int, str | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                 timeout=20)
        return {tp.partition: (tp.offset, tp.metadata) for tp in got}
    finally:
        consumer.close()


@pytest.mark.slow
def test_consumer_offsets_shrinks_after_100000_commits(tmp_path: Path) -> None:
    part = tmp_path / "__consumer_offsets-0"
    server = ServerProcess(tmp_path, *BROKER, CLEANER_OFF)
    try:
        server.start()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
        del admin
        t0 = time.monotonic()
        last = _commit_many(server.bootstrap)
        took = time.monotonic() - t0
        assert server.stop() == 0
        before, before_log = _size(part), _size(part, ".log")

        server.overrides = list(BROKER)  # the cleaner on
        server.start()
        # About 8 s on an idle machine (restart, load, one pass over 12 MB); the
        # deadline bounds a cleaner that never runs, not its speed (4 loaded CI
        # workers took over 30 s).
        deadline = time.monotonic() + 90
        while _size(part, ".log") > before_log // 10:
            assert time.monotonic() < deadline, (
                f"__consumer_offsets-0 still holds {_size(part, '.log')} log bytes")
            time.sleep(0.1)
        assert server.stop() == 0
        after, after_log = _size(part), _size(part, ".log")
        logs = sorted(n for n in os.listdir(part) if n.endswith(".log"))
        active = (part / logs[-1]).stat().st_size
        print(f"\n{COMMITS} commits in {took:.1f} s; __consumer_offsets-0: "
              f"{before} bytes ({before_log} in .log files) before cleaning, "
              f"{after} bytes ({after_log} in .log files, {len(logs)} segments, "
              f"the active one {active}) after")
        assert after * 10 < before

        server.start()
        expected = {p: (offset, f"m{offset}") for p, offset in last.items()}
        assert _committed(server.bootstrap) == expected
    finally:
        server.kill()
