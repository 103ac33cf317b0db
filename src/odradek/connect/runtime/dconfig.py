"""A distributed worker's settings (Kafka's names), beside :class:`WorkerConfig`.

Required: ``group.id`` (the Connect cluster: workers with one group id share
their connectors), ``config.storage.topic``, ``offset.storage.topic``,
``status.storage.topic``. Internal topics: ``*.replication.factor`` (3; -1 =
the broker's default), ``offset.storage.partitions`` (25),
``status.storage.partitions`` (5); the config topic always has 1 partition.
Group: ``connect.protocol`` (``sessioned``), ``scheduled.rebalance.max.delay.ms``
(300000), ``session.timeout.ms`` (10000), ``heartbeat.interval.ms`` (3000),
``rebalance.timeout.ms`` (60000), ``worker.sync.timeout.ms`` (3000). REST:
``rest.advertised.host.name`` / ``rest.advertised.port`` /
``rest.advertised.listener`` (the URL other workers forward to; the listener's
host and port when unset). Everything a standalone worker takes (converters,
``listeners``, client security, ``offset.flush.interval.ms``) except
``offset.storage.file.filename``, which a distributed worker does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.connect.config import (
    INT,
    LONG,
    STRING,
    ConfigDef,
    ConfigError,
    ConfigKey,
    at_least,
    non_empty,
)
from odradek.connect.distributed.protocol import protocols
from odradek.connect.runtime.config import WorkerConfig

_RF = at_least(-1)

DISTRIBUTED_CONFIG = ConfigDef((
    ConfigKey("group.id", STRING, validator=non_empty),
    ConfigKey("config.storage.topic", STRING, validator=non_empty),
    ConfigKey("offset.storage.topic", STRING, validator=non_empty),
    ConfigKey("status.storage.topic", STRING, validator=non_empty),
    ConfigKey("config.storage.replication.factor", INT, 3, validator=_RF),
    ConfigKey("offset.storage.replication.factor", INT, 3, validator=_RF),
    ConfigKey("offset.storage.partitions", INT, 25, validator=at_least(1)),
    ConfigKey("status.storage.replication.factor", INT, 3, validator=_RF),
    ConfigKey("status.storage.partitions", INT, 5, validator=at_least(1)),
    ConfigKey("connect.protocol", STRING, "sessioned"),
    ConfigKey("scheduled.rebalance.max.delay.ms", INT, 300000, validator=at_least(0)),
    ConfigKey("session.timeout.ms", INT, 10000, validator=at_least(1)),
    ConfigKey("heartbeat.interval.ms", INT, 3000, validator=at_least(1)),
    ConfigKey("rebalance.timeout.ms", INT, 60000, validator=at_least(1)),
    ConfigKey("worker.sync.timeout.ms", INT, 3000, validator=at_least(1)),
    ConfigKey("rest.advertised.host.name", STRING, ""),
    ConfigKey("rest.advertised.port", INT, 0, validator=at_least(0)),
    ConfigKey("rest.advertised.listener", STRING, "http"),
    ConfigKey("offset.flush.interval.ms", LONG, 60000, validator=at_least(1)),
))
#: The placeholder WorkerConfig gets for the file a distributed worker never opens.
NO_OFFSETS_FILE = "(offset.storage.topic)"


@dataclass(frozen=True, slots=True)
class DistributedConfig:
    worker: WorkerConfig
    group_id: str
    config_topic: str
    offset_topic: str
    status_topic: str
    config_rf: int
    offset_rf: int
    offset_partitions: int
    status_rf: int
    status_partitions: int
    connect_protocol: str
    max_delay_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    sync_timeout_ms: int
    advertised_host: str
    advertised_port: int

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> DistributedConfig:
        """Raises :class:`ConfigError` naming the first bad setting."""
        v = DISTRIBUTED_CONFIG.parse(props)
        try:
            protocols(str(v["connect.protocol"]))
        except ValueError as e:
            raise ConfigError("connect.protocol", str(e)) from None
        if v["rest.advertised.listener"].lower() != "http":
            raise ConfigError("rest.advertised.listener", "only http listeners are served")
        worker = WorkerConfig.parse({**props, "offset.storage.file.filename": NO_OFFSETS_FILE})
        return cls(worker, v["group.id"], v["config.storage.topic"], v["offset.storage.topic"],
                   v["status.storage.topic"], int(v["config.storage.replication.factor"]),
                   int(v["offset.storage.replication.factor"]),
                   int(v["offset.storage.partitions"]),
                   int(v["status.storage.replication.factor"]),
                   int(v["status.storage.partitions"]), str(v["connect.protocol"]).lower(),
                   int(v["scheduled.rebalance.max.delay.ms"]), int(v["session.timeout.ms"]),
                   int(v["heartbeat.interval.ms"]), int(v["rebalance.timeout.ms"]),
                   int(v["worker.sync.timeout.ms"]), str(v["rest.advertised.host.name"]),
                   int(v["rest.advertised.port"]))

    def advertised_url(self, bound_host: str, bound_port: int) -> str:
        """The URL other workers reach this one at (``http://host:port``)."""
        host = self.advertised_host or bound_host
        port = self.advertised_port or bound_port
        return f"http://{host}:{port}"
