"""The broker's metrics under the names Prometheus's jmx_exporter gives Kafka's
MBeans (``example_configs/kafka-2_0_0.yml``; DESIGN decision 10), so that
existing Kafka dashboards and alert rules read an Odradek cluster unchanged.

Built on :mod:`odradek.common.metrics`, not on ``prometheus_client``: that
registry is already one per broker (the research note's trap with
``prometheus_client``'s global registry does not arise), already renders the
Prometheus text format the request pipeline's metrics use, and needs no new
dependency in the broker (``prometheus_client`` is not installed here, and
its servers are WSGI threads or aiohttp, neither of which the broker runs).

Every family here is read when scraped, from what the broker keeps anyway: the
replica manager's :class:`~odradek.broker.replica.traffic.TopicTraffic`, the
partitions' states, the partition manager's
:class:`~odradek.replication.partition.IsrChangeCounts`, the metadata image,
the connections of the Kafka listeners and the request pipeline's own
families. The produce and fetch paths only add to a few integers (per
partition appended or read, per request). Names and labels (``topic=""`` stands for the
all-topics series jmx_exporter writes without a ``topic`` label: Prometheus
treats an empty label as an absent one):

- ``kafka_server_brokertopicmetrics_{messagesin,bytesin,bytesout}_total{topic}``
- ``kafka_network_requestmetrics_*``: the request families of
  :mod:`odradek.broker.observe.request_metrics` (requests, errors, total time
  and its phases)
- ``kafka_server_replicamanager_{partitioncount,leadercount,
  underreplicatedpartitions,underminisrpartitioncount,atminisrpartitioncount}``
  and ``kafka_server_replicamanager_{isrshrinks,isrexpands}_total``
- ``kafka_controller_kafkacontroller_{activecontrollercount,
  offlinepartitionscount,globaltopiccount,globalpartitioncount}`` (the last
  three from the active controller only, 0 elsewhere, as in Kafka)
- ``kafka_cluster_partition_underminisr{topic,partition}`` (1 per led partition
  below ``min.insync.replicas``, as jmx_exporter renames
  ``kafka.cluster:type=Partition,name=UnderMinIsr``)
- ``kafka_log_log_{size,numlogsegments,logstartoffset,logendoffset}{topic,partition}``
- ``kafka_log_logmanager_offlinelogdirectorycount``; Kafka has no MBean for a
  directory's disk space, so ``odradek_log_dir_{free,total,used}_bytes{log_dir}``
  (used: the partition logs' bytes there, DescribeLogDirs's figure)
- ``kafka_server_socket_server_metrics_connection_count{listener}``
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from odradek.broker.observe import request_metrics
from odradek.common.metrics import Labels, Registry

if TYPE_CHECKING:
    from odradek.broker.control.broker_state import BrokerState
    from odradek.broker.net.server import KafkaServer
    from odradek.broker.replica.manager import ReplicaManager
    from odradek.broker.replica.partitions import PartitionManager

Series = Iterable[tuple[Labels, float]]


class BrokerView(Protocol):
    """What the metrics read of a running broker (the composition root's parts;
    None before they are built or after they are stopped)."""

    @property
    def partitions(self) -> PartitionManager | None: ...
    @property
    def state(self) -> BrokerState | None: ...
    @property
    def server(self) -> KafkaServer | None: ...
    @property
    def replicas(self) -> ReplicaManager | None: ...


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    m = _Readers(registry, broker)
    for i, name in enumerate(("MessagesIn", "BytesIn", "BytesOut")):
        registry.counter(f"kafka_server_brokertopicmetrics_{name.lower()}_total",
                         f"Kafka's BrokerTopicMetrics {name}PerSec: clients' records or "
                         "bytes by topic (topic=\"\": all topics)",
                         ("topic",), read=functools.partial(m.traffic, i))
    request_metrics.register(registry, broker)
    for name, what in (("partitioncount", "Partitions hosted here"),
                       ("leadercount", "Partitions led here"),
                       ("underreplicatedpartitions", "Led partitions whose ISR is smaller "
                        "than their replica set"),
                       ("underminisrpartitioncount", "Led partitions whose ISR is below "
                        "min.insync.replicas"),
                       ("atminisrpartitioncount", "Led partitions whose ISR is at "
                        "min.insync.replicas")):
        registry.gauge(f"kafka_server_replicamanager_{name}", what,
                       read=functools.partial(m.replica_counts, name))
    registry.counter("kafka_server_replicamanager_isrshrinks_total",
                     "ISR shrinks of partitions led here", read=lambda: m.isr(shrinks=True))
    registry.counter("kafka_server_replicamanager_isrexpands_total",
                     "ISR expands of partitions led here", read=lambda: m.isr(shrinks=False))
    registry.gauge("kafka_cluster_partition_underminisr",
                   "1 for each led partition whose ISR is below min.insync.replicas",
                   ("topic", "partition"), read=m.under_min_isr)
    for name, what in (("activecontrollercount", "1 on the active controller, else 0"),
                       ("offlinepartitionscount", "Partitions without a leader (active "
                        "controller only)"),
                       ("globaltopiccount", "Topics (active controller only)"),
                       ("globalpartitioncount", "Partitions (active controller only)")):
        registry.gauge(f"kafka_controller_kafkacontroller_{name}", what,
                       read=functools.partial(m.controller, name))
    for name, what in (("size", "Bytes of a partition's log"),
                       ("numlogsegments", "Segments of a partition's log"),
                       ("logstartoffset", "A partition's log start offset"),
                       ("logendoffset", "A partition's log end offset")):
        registry.gauge(f"kafka_log_log_{name}", what, ("topic", "partition"),
                       read=functools.partial(m.logs, name))
    registry.gauge("kafka_log_logmanager_offlinelogdirectorycount",
                   "Log directories with an offline log", read=m.offline_dirs)
    for name, what in (("free", "Bytes free on a log directory's file system"),
                       ("total", "Bytes of a log directory's file system"),
                       ("used", "Bytes of the partition logs in a log directory")):
        registry.gauge(f"odradek_log_dir_{name}_bytes", what, ("log_dir",),
                       read=functools.partial(m.log_dirs, name))
    registry.gauge("kafka_server_socket_server_metrics_connection_count",
                   "Open client connections by listener", ("listener",), read=m.connections)


class _Readers:
    """The scrape-time readers (each cheap: one pass over what it reads)."""

    def __init__(self, registry: Registry, broker: BrokerView) -> None:
        self.registry = registry
        self.broker = broker

    def traffic(self, i: int) -> Series:
        replicas = self.broker.replicas
        if replicas is None:
            return []
        t = replicas.traffic
        return [(("",), float(t.total[i])),
                *(((topic,), float(row[i])) for topic, row in t.by_topic.items())]

    def replica_counts(self, name: str) -> Series:
        pm = self.broker.partitions
        if pm is None:
            return [((), 0.0)]
        states = [p.state for p in pm.partitions.values()]
        if name == "partitioncount":
            return [((), float(len(states)))]
        led = [s for s in states if s.is_leader]
        if name == "leadercount":
            n = len(led)
        elif name == "underreplicatedpartitions":
            n = sum(1 for s in led if len(s.isr) < len(s.replicas))
        elif name == "underminisrpartitioncount":
            n = sum(1 for s in led if len(s.isr) < s.min_isr)
        else:
            n = sum(1 for s in led if len(s.isr) == s.min_isr)
        return [((), float(n))]

    def isr(self, shrinks: bool) -> Series:
        pm = self.broker.partitions
        if pm is None:
            return []
        c = pm.isr_changes
        return [((), float(c.shrinks if shrinks else c.expands))]

    def under_min_isr(self) -> Series:
        pm = self.broker.partitions
        if pm is None:
            return []
        return [((p.topic, str(p.index)), 1.0) for p in pm.partitions.values()
                if p.state.is_leader and len(p.state.isr) < p.state.min_isr]

    def controller(self, name: str) -> Series:
        state = self.broker.state
        active = (state is not None and state.metadata.leader_id == state.node_id
                  and (state.metadata.is_local
                       or "controller" in state.config.process_roles()))
        if name == "activecontrollercount":
            return [((), float(active))]
        if not active:
            return [((), 0.0)]
        assert state is not None
        topics = state.image.topics.values()
        if name == "globaltopiccount":
            return [((), float(len(topics)))]
        parts = [p for t in topics for p in t.partitions.values()]
        if name == "globalpartitioncount":
            return [((), float(len(parts)))]
        return [((), float(sum(1 for p in parts if p.leader < 0)))]

    def logs(self, name: str) -> Series:
        pm = self.broker.partitions
        if pm is None:
            return []
        out = []
        for p in pm.partitions.values():
            log = p.log
            if name == "size":
                v = log.size_bytes
            elif name == "numlogsegments":
                v = len(log.segments)
            elif name == "logstartoffset":
                v = log.log_start_offset
            else:
                v = log.log_end_offset
            out.append(((p.topic, str(p.index)), float(v)))
        return out

    def offline_dirs(self) -> Series:
        pm = self.broker.partitions
        if pm is None:
            return [((), 0.0)]
        return [((), float(len({p.log.parent_dir for p in pm.partitions.values()
                                if p.log.offline})))]

    def log_dirs(self, name: str) -> Series:
        pm = self.broker.partitions
        if pm is None:
            return []
        out = []
        if name == "used":
            used = {os.path.normpath(d): 0 for d in pm.log_dirs}
            norm: dict[str, str] = {}  # a few directories, many partitions
            for p in pm.partitions.values():
                raw = p.log.parent_dir
                d = norm.get(raw)
                if d is None:
                    d = norm[raw] = os.path.normpath(raw)
                used[d] = used.get(d, 0) + p.log.size_bytes
            return [((d,), float(v)) for d, v in used.items()]
        for d in map(os.path.normpath, pm.log_dirs):
            try:
                usage = shutil.disk_usage(d)
            except OSError:
                continue
            out.append(((d,), float(usage.free if name == "free" else usage.total)))
        return out

    def connections(self) -> Series:
        server = self.broker.server
        if server is None:
            return []
        counts: dict[str, int] = {}
        for conn in server.connections:
            counts[conn.listener] = counts.get(conn.listener, 0) + 1
        return [((k,), float(v)) for k, v in counts.items()]
