"""KRaft fidelity with real processes: ``odradek storage format --feature``
writes ``bootstrap.checkpoint``, whose levels the cluster's first controller
finalizes; and a broker's epoch is the offset of its RegisterBrokerRecord in
the metadata log, on every controller, growing across a restart, with a stale
epoch refused."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.control.bootstrap import read_bootstrap
from odradek.broker.control.journal import decode_record
from odradek.client.connection import Connection
from odradek.raft.codec import decode_entry
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.feature_level_record import FeatureLevelRecord
from odradek.wire.internal.register_broker_record import RegisterBrokerRecord
from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.wire.primitives import DecodeError
from tests.integration.test_transactions_v2 import finalized
from tests.support.cluster import (
    LocalCluster,
    active_controller,
    assert_no_tracebacks,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)

BROKER = 4


def metadata_records(node_dir: Path) -> list[tuple[int, Any]]:
    """(offset, record) of each metadata record in a controller's Raft log file,
    read while it runs: control entries are left out, and a batch still being
    written at the end (torn) ends the read."""
    data = (node_dir / "data" / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
    out, pos = [], 0
    while pos < len(data):
        try:
            entry, size = decode_entry(data, pos)
        except DecodeError:
            break
        if not entry.control:
            out.extend((entry.offset + i, decode_record(v)) for i, v in enumerate(entry.records))
        pos += size
    return out


def registrations(cluster: LocalCluster, node_id: int) -> list[int]:
    """The offsets of ``node_id``'s RegisterBrokerRecords in the first controller's log."""
    return [offset for offset, r in metadata_records(cluster.nodes[1].directory)
            if isinstance(r, RegisterBrokerRecord) and r.broker_id == node_id]


def heartbeat(cluster: LocalCluster, broker_epoch: int) -> int:
    """A BrokerHeartbeat for :data:`BROKER` with ``broker_epoch``, sent to the active
    controller; its error code (retried while the controller moves)."""
    async def send(address: str) -> int:
        conn = await Connection.open(address, "epoch-test")
        try:
            request = BrokerHeartbeatRequest(broker_id=BROKER, broker_epoch=broker_epoch,
                                             current_metadata_offset=0)
            return int((await conn.request(request, 1, 1)).error_code)
        finally:
            await conn.close()

    def once() -> int | None:
        leader = cluster.nodes[active_controller(cluster.bootstrap)]
        code = asyncio.run(send(f"127.0.0.1:{leader.controller_port}"))
        return None if code == ErrorCode.NOT_CONTROLLER else code + 1  # truthy

    return wait_for("an answer from the active controller", once, 30) - 1


def epoch_logged(cluster: LocalCluster) -> list[int]:
    """The broker epochs :data:`BROKER` logged from its BrokerRegistration answers."""
    text = cluster.nodes[BROKER].log_path.read_text(errors="replace")
    return [int(m) for m in re.findall(
        rf"broker {BROKER} registered with the controller: broker epoch (\d+)", text)]


def test_format_bootstrap_checkpoint_and_broker_epochs_as_offsets(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, brokers=1)
    cluster.format(features=["transaction.version=1"])
    cluster.start()
    try:
        # What format wrote on every node: metadata.version, group.version and the chosen level.
        for node in cluster.nodes.values():
            levels = {r.name: r.feature_level for r in read_bootstrap(node.directory / "data")
                      if isinstance(r, FeatureLevelRecord)}
            assert levels == {"metadata.version": 25, "group.version": 1, "transaction.version": 1}
        first = wait_for("the broker's registration", lambda: registrations(cluster, BROKER), 60)
        assert len(first) == 1
        # The controller wrote the file's levels, as the log's first metadata records.
        log = metadata_records(cluster.nodes[1].directory)
        bootstrap = read_bootstrap(cluster.nodes[1].directory / "data")
        assert [r for _, r in log[:len(bootstrap)]] == bootstrap
        levels, _ = wait_for("the broker's finalized features",
                             lambda: (f := finalized(cluster.bootstrap))[0] and f, 30)
        assert levels["transaction.version"] == 1 and levels["metadata.version"] == 25
        # The broker's epoch, as the controller answered it, is that record's offset...
        epoch = first[0]
        assert wait_for("the broker's registration log line", lambda: epoch_logged(cluster),
                        30) == [epoch]
        assert heartbeat(cluster, epoch) == ErrorCode.NONE
        assert heartbeat(cluster, epoch - 1) == ErrorCode.STALE_BROKER_EPOCH
        # ... at the same offset in every controller's log (each replays it).
        for n in (2, 3):
            wait_for(f"controller {n}'s copy of the registration",
                     lambda n=n: [o for o, r in metadata_records(cluster.nodes[n].directory)
                                  if isinstance(r, RegisterBrokerRecord)
                                  and r.broker_id == BROKER] == first, 30)
        # A restarted broker registers again, at a later offset: a larger epoch.
        assert cluster.terminate(BROKER) == 0
        cluster.start(BROKER)
        again = wait_for("the broker's second registration",
                         lambda: (r := registrations(cluster, BROKER))[1:] and r, 60)
        assert len(again) == 2 and again[0] == epoch and again[1] > epoch
        assert wait_for("the broker's second registration log line",
                        lambda: (e := epoch_logged(cluster))[1:] and e, 30) == again
        assert heartbeat(cluster, again[1]) == ErrorCode.NONE
        assert heartbeat(cluster, epoch) == ErrorCode.STALE_BROKER_EPOCH
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    assert_no_tracebacks(cluster)
