"""kill -9 during log-cleaner passes, again and again: no acknowledged record is lost.

A compacted topic with small segments is written with keyed records (acks=all,
``log.flush.interval.messages=1``, so everything acknowledged is on disk) while
the cleaner runs every 50 ms. Each round ends the broker abruptly during a
cleaner pass, at one step of the swap protocol of
:mod:`odradek.storage.cleaner` (``ODRADEK_CRASH_AT``, points in
:meth:`odradek.storage.log.Log.replace_segments`):

* ``cleaner.after_write``: ``<base>.log.cleaned`` is written and fsynced;
* ``cleaner.after_decide``: it is renamed ``<base>.log.swap``, old segments live;
* ``cleaner.after_delete``: the old segments are ``*.deleted``, no live ``<base>.log``;
* ``cleaner.after_rename``: the swap file is ``<base>.log``, not indexed yet;

or with a plain ``kill -9`` from outside the moment a ``.cleaned`` file shows up
(the pass is still writing it). After each crash the files left behind are
checked to be the state the point names, then the broker restarts on the same
data directory (cleaner off, so the listing is the loader's work alone) and:

* no ``*.cleaned``, ``*.swap`` or ``*.deleted`` file is left after start-up;
* offsets read back strictly increase (none twice);
* every record read was written by the test, and one that was acknowledged
  sits at the offset its acknowledgement gave;
* every key's latest acknowledged value is there at its offset — unless a later
  record of the key (sent, its acknowledgement lost in the crash) superseded
  it, which then counts as acknowledged from that round on.

Finally the cleaner must still be able to finish its work: one key's records
collapse to one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.process import ServerProcess

TOPIC = "table"
KEYS = 150
COMPACTED = {
    "cleanup.policy": "compact", "segment.bytes": "20000", "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000",
}
BROKER = ("log.cleaner.backoff.ms=50", "log.flush.interval.messages=1")
CLEANER_OFF = "log.cleaner.enable=false"
ROUNDS = ["cleaner.after_write", "cleaner.after_decide", "cleaner.after_delete",
          "cleaner.after_rename", "watch", "watch"]
LEFTOVERS = (".cleaned", ".swap", ".deleted")


class Model:
    """What was sent and acknowledged, and what a read must therefore show."""

    def __init__(self) -> None:
        self.seq = 0
        self.sent: dict[bytes, bytes] = {}  # value -> key (values are unique)
        self.acked: dict[bytes, int] = {}  # value -> offset
        self.latest: dict[bytes, tuple[int, bytes]] = {}  # key -> (offset, value)

    def next_record(self) -> tuple[bytes, bytes]:
        key = f"k{self.seq % KEYS:03d}".encode()
        value = f"v{self.seq:07d}-{key.decode()}".encode()
        self.seq += 1
        self.sent[value] = key
        return key, value

    def delivered(self, err: object, msg: object) -> None:
        if err is not None:
            return  # lost with the broker: may or may not be in the log
        value, offset = msg.value(), msg.offset()  # type: ignore[attr-defined]
        self.acked[value] = offset
        key = self.sent[value]
        if key not in self.latest or self.latest[key][0] < offset:
            self.latest[key] = (offset, value)

    def check(self, stored: list[tuple[int, bytes, bytes]]) -> None:
        offsets = [o for o, _, _ in stored]
        assert all(a < b for a, b in itertools.pairwise(offsets)), \
            "offsets do not strictly increase"
        last: dict[bytes, tuple[int, bytes]] = {}
        for offset, key, value in stored:
            assert self.sent.get(value) == key, f"offset {offset}: {key!r}={value!r} never sent"
            if value in self.acked:
                assert self.acked[value] == offset, (
                    f"{value!r} acknowledged at {self.acked[value]}, read at {offset}")
            last[key] = (offset, value)
        for key, (offset, value) in self.latest.items():
            assert key in last, f"{key!r}: every record is gone (latest acked at {offset})"
            got = last[key]
            assert got[0] >= offset, f"{key!r}: latest acked {value!r}@{offset} lost, " \
                                     f"last read {got[1]!r}@{got[0]}"
            assert got[0] > offset or got[1] == value
        # Records that survived a crash unacknowledged are now as good as acknowledged.
        for offset, _, value in stored:
            self.acked.setdefault(value, offset)
        for key, got in last.items():
            if key not in self.latest or self.latest[key][0] < got[0]:
                self.latest[key] = got


def _read_all(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 15
        while True:
            assert time.monotonic() < deadline, "reading the topic timed out"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    break
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        assert not out or out[-1][0] < high
        return out
    finally:
        consumer.close()


def _leftovers(part: Path) -> list[str]:
    return sorted(n for n in os.listdir(part) if n.endswith(LEFTOVERS))


class Watcher(threading.Thread):
    """SIGKILL the broker the moment a ``*.cleaned`` file appears in ``part``."""

    def __init__(self, part: Path, pid: int) -> None:
        super().__init__(daemon=True)
        self.part, self.pid = part, pid
        self.seen: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            with contextlib.suppress(FileNotFoundError):
                found = [n for n in os.listdir(self.part) if n.endswith(".cleaned")]
                if found:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGKILL)
                    self.seen = found
                    return
            time.sleep(0.0005)


def _produce_until_dead(server: ServerProcess, model: Model) -> None:
    """Keyed records until the broker dies (the cleaner swaps as segments roll)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 20000})
    assert server.proc is not None
    deadline = time.monotonic() + 15
    try:
        while server.proc.poll() is None:
            assert time.monotonic() < deadline, "the broker never crashed in a cleaner pass"
            for _ in range(200):
                key, value = model.next_record()
                producer.produce(TOPIC, value, key=key, on_delivery=model.delivered)
            while len(producer) and server.proc.poll() is None:
                producer.poll(0.01)
    finally:
        server.proc.wait(10)
        producer.purge()  # in-flight records fail now: their fate is read back later
        producer.flush(5)


def _check_crash_state(point: str, names: set[str]) -> None:
    """The files a crash at ``point`` leaves (the point was really passed)."""
    swaps = [n for n in names if n.endswith(".log.swap")]
    if point == "cleaner.after_write":
        assert any(n.endswith(".log.cleaned") for n in names), names
    elif point == "cleaner.after_decide":
        assert swaps and swaps[0][: -len(".swap")] in names, names
    elif point == "cleaner.after_delete":
        assert swaps and swaps[0][: -len(".swap")] not in names, names
        assert swaps[0][: -len(".swap")] + ".deleted" in names, names
    elif point == "cleaner.after_rename":
        assert not swaps and any(n.endswith(".log.deleted") for n in names), names


def _fill(server: ServerProcess, model: Model, n: int) -> None:
    """``n`` more keyed records, all acknowledged (several segments of dirt)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                         "linger.ms": 2})
    for _ in range(n):
        key, value = model.next_record()
        producer.produce(TOPIC, value, key=key, on_delivery=model.delivered)
        producer.poll(0)
    assert producer.flush(10) == 0


def _start_to_crash(server: ServerProcess, point: str) -> None:
    """Start the broker with the crash point armed. With dirt waiting, its first
    pass may reach the point before it prints that it serves: then start()
    fails and the broker is already dead, which is fine."""
    server.overrides = list(BROKER)
    server.env = {} if point == "watch" else {"ODRADEK_CRASH_AT": point}
    try:
        server.start()
    except RuntimeError:
        if point == "watch" or server.exit_code != -signal.SIGKILL:
            raise


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_kill_9_during_cleaner_passes_loses_no_record(tmp_path: Path) -> None:
    model = Model()
    part = tmp_path / f"{TOPIC}-0"
    server = ServerProcess(tmp_path, *BROKER, CLEANER_OFF)
    try:
        server.start()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=COMPACTED)])[TOPIC].result(10)
        del admin
        _fill(server, model, 1500)
        server.kill()
        for point in ROUNDS:
            # Dirt is waiting: the first pass starts within log.cleaner.backoff.ms.
            _start_to_crash(server, point)
            watcher = None
            if point == "watch":
                watcher = Watcher(part, server.pid)
                watcher.start()
            if server.bootstrap:
                _produce_until_dead(server, model)
            if watcher is not None:
                watcher.halt.set()
                watcher.join(5)
                assert watcher.seen, "killed, but not by the watcher"
            assert server.exit_code == -signal.SIGKILL or (
                server.proc is not None and server.proc.returncode == -signal.SIGKILL)
            _check_crash_state(point, set(os.listdir(part)))
            server.kill()

            # Restart with the cleaner off: what is on disk now is the loader's work.
            server.overrides = [*BROKER, CLEANER_OFF]
            server.env = {}
            server.start()
            assert _leftovers(part) == [], f"after a crash at {point}"
            stored = _read_all(server.bootstrap)
            model.check(stored)
            _fill(server, model, 1000)
            server.kill()

        # The cleaner still finishes the job after all this.
        server.overrides = list(BROKER)
        server.start()
        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
        deadline = time.monotonic() + 20
        while True:
            stored = _read_all(server.bootstrap)
            model.check(stored)
            if len(stored) <= 2 * KEYS + 10:
                break
            assert time.monotonic() < deadline, f"{len(stored)} records never compacted"
            time.sleep(0.12)  # segment.ms: the next record rolls the active segment
            key, value = model.next_record()
            producer.produce(TOPIC, value, key=key, on_delivery=model.delivered)
            producer.flush(10)
    finally:
        server.kill()
