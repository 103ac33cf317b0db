"""Broker configuration by Kafka's names, with Kafka's defaults.

Read from a ``server.properties``-style file (``key=value`` lines, ``#`` and
``!`` comments, as Java's Properties) and ``--override KEY=VALUE`` flags, the
way ``kafka-server-start.sh`` takes them. Unknown keys are kept (so topic-level
defaults such as ``log.retention.ms`` flow through to the log) but a key Odradek
interprets must parse, or :class:`ConfigError` says which and why.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.cluster_config import (
    QuorumVoter,
    parse_bootstrap_servers,
    parse_listener_names,
    parse_roles,
    parse_voters,
    split_listeners,
    validate,
)
from odradek.broker.listeners import ConfigError, Listener, parse_listeners
from odradek.broker.net.tls import validate_ssl_keys
from odradek.metadata.ssl_configs import SSL_KEYS, is_ssl_key

__all__ = ["DEFAULTS", "BrokerConfig", "ConfigError", "Listener", "parse_listeners",
           "parse_overrides", "read_properties"]


# Kafka's broker defaults for the keys Odradek reads (name → default as text).
DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
    "process.roles": "broker,controller",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "./odradek-data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "log.segment.bytes": "1073741824",
    # log.roll.ms, log.retention.ms, .minutes and log.flush.interval.ms have no
    # default (Kafka's null): the coarser synonym below supplies the value.
    "log.roll.hours": "168",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": "9223372036854775807",
    "log.message.timestamp.after.max.ms": "3600000",
    "log.cleanup.policy": "delete",
    "log.segment.delete.delay.ms": "60000",
    "log.preallocate": "false",
    "compression.type": "producer",
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "min.insync.replicas": "1",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.commit.timeout.ms": "5000",
    "odradek.allow.internal.topic.changes": "false",
    "request.timeout.ms": "30000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    # KIP-848 consumer groups (docs/protocol.md).
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.assignors": "uniform,range",
    "offset.metadata.max.bytes": "4096",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "connections.max.idle.ms": "600000",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    # Resource limits (docs/limits.md). Kafka's queued.max.request.bytes defaults
    # to -1 (unbounded); Odradek bounds request memory by default.
    "queued.max.request.bytes": "268435456",
    "queued.max.requests": "500",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    "max.connection.creation.rate": "2147483647",
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    # What unclean recovery does with damaged batches (docs/durability.md).
    "log.recovery.damaged.batches": "skip",
    "odradek.log.max.open.files": "4096",
    # Drop-behind: the newest bytes per partition left in the page cache under
    # memory pressure (-1: off), and the most kept in all without (-1: half of
    # MemTotal; 0: the window always).
    "odradek.log.page.cache.window.bytes": str(16 << 20),
    "odradek.log.page.cache.retain.bytes": "-1",
    # Blocks an active segment reserves ahead of its appends (0: none).
    "odradek.log.preallocate.bytes": str(8 << 20),
    "odradek.accept.missing.metadata": "false",
    "cluster.id": "",
    # KRaft: roles, the controller quorum, listeners (odradek.broker.cluster_config).
    "controller.quorum.voters": "",
    "controller.quorum.bootstrap.servers": "",
    "controller.listener.names": "",
    "listener.security.protocol.map": (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL"),
    "inter.broker.listener.name": "",
    "security.inter.broker.protocol": "",
    "broker.rack": "",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.append.linger.ms": "25",
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
    "metadata.log.dir": "",
    "num.replica.alter.log.dirs.threads": "",
    "replica.alter.log.dirs.io.max.bytes.per.second": "9223372036854775807",
    "metadata.max.idle.interval.ms": "500",
    "metadata.log.max.record.bytes.between.snapshots": "20971520",
    "metadata.log.max.snapshot.interval.ms": "3600000",
    # Replicated partitions (docs/cluster.md, docs/durability.md).
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.backoff.ms": "1000",
    "num.replica.fetchers": "1",
    # Segment appends written on this many threads, off the event loop
    # (broker/replica/writer.py); 0 writes them on the loop (docs/decisions.md: measured).
    "odradek.log.writer.threads": "0",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "odradek.inter.broker.address.overrides": "",
    # The metrics and health endpoint (broker/observe/): HOST:PORT, off when empty.
    "odradek.metrics.listener": "",
    # The group protocols served; without "consumer" KIP-848's consumer protocol
    # is off (broker/handlers/group_common.py), as with group.version 0.
    "group.coordinator.rebalance.protocols": "classic,consumer",
    # Reassignment throttles (broker/replica/throttle.py): 0 is no limit.
    "leader.replication.throttled.rate": "0",
    "follower.replication.throttled.rate": "0",
    "replication.quota.window.num": "11",
    "replication.quota.window.size.seconds": "1",
}

_INT_KEYS = {
    "node.id", "num.partitions", "odradek.log.writer.threads", "default.replication.factor",
    "message.max.bytes",
    "socket.request.max.bytes", "log.segment.bytes", "log.roll.hours", "log.retention.hours",
    "log.retention.bytes", "log.retention.check.interval.ms", "log.index.interval.bytes",
    "log.index.size.max.bytes", "log.flush.interval.messages",
    "min.insync.replicas", "offsets.topic.num.partitions", "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes", "group.initial.rebalance.delay.ms",
    "offsets.commit.timeout.ms", "request.timeout.ms",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.max.size",
    "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
    "group.consumer.max.size", "offset.metadata.max.bytes",
    "offsets.retention.minutes", "offsets.retention.check.interval.ms",
    "connections.max.idle.ms", "queued.max.request.bytes", "queued.max.requests",
    "max.connections", "max.connections.per.ip", "max.connection.creation.rate",
    "quota.window.num", "quota.window.size.seconds",
    "transaction.state.log.num.partitions", "transaction.state.log.segment.bytes",
    "transaction.max.timeout.ms", "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
}
# Kafka's KRaft timings and sizes: none may be negative.
_KRAFT_INT_KEYS = {
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms", "controller.quorum.request.timeout.ms",
    "controller.quorum.append.linger.ms", "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms", "metadata.max.idle.interval.ms",
    "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
}
_INT_KEYS |= _KRAFT_INT_KEYS
_INT_KEYS |= {
    "replica.lag.time.max.ms", "replica.fetch.wait.max.ms", "replica.fetch.min.bytes",
    "replica.fetch.max.bytes", "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms",
    "num.replica.fetchers", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "leader.imbalance.check.interval.seconds",
    "follower.replication.throttled.rate", "replica.alter.log.dirs.io.max.bytes.per.second",
    "leader.replication.throttled.rate", "replication.quota.window.num",
    "replication.quota.window.size.seconds",
}
# Kafka's null defaults: checked only when set.
_NULLABLE_INT_KEYS = {"log.roll.ms", "log.retention.ms", "log.retention.minutes",
                      "log.flush.interval.ms"}
_BOOL_KEYS = {"auto.create.topics.enable", "delete.topic.enable", "allow.everyone.if.no.acl.found",
              "unclean.leader.election.enable", "auto.leader.rebalance.enable"}


_READ_ELSEWHERE = frozenset({
    "log.dir",
    # SASL (broker/net/sasl/settings.py), each also under listener.name.<l>.[<mech>.]
    "sasl.enabled.mechanisms", "sasl.jaas.config", "connections.max.reauth.ms",
    "sasl.server.max.receive.size", "connection.failed.authentication.delay.ms",
    "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
})
"""Keys read by a part of the broker that has no default here."""

KAFKA_IGNORED = frozenset({
    # Kafka's sample server.properties and common operator settings that tune
    # what Odradek does not have (thread pools, socket buffers, ZooKeeper, JMX).
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
    "background.threads", "queued.max.requests.bytes", "log.flush.scheduler.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
    "inter.broker.protocol.version", "log.message.format.version", "metric.reporters",
    "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
    "replica.socket.timeout.ms", "replica.socket.receive.buffer.bytes",
    "controller.socket.timeout.ms", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.dedupe.buffer.load.factor",
    "confluent.support.metrics.enable", "confluent.metrics.reporter.bootstrap.servers",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "offsets.load.buffer.size", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "num.replica.alter.log.dirs.threads.max",
})
"""Kafka broker settings Odradek accepts without a word of warning (listed at
start-up as ignored): a Kafka ``server.properties`` starts Odradek unchanged."""

def read_properties(path: Path) -> dict[str, str]:
    """Java-properties subset: ``key=value`` or ``key: value``, comments, blank lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    props: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"{path}:{lineno}: expected key=value")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


@dataclass(slots=True)
class BrokerConfig:
    """The effective configuration, lowest precedence first: Kafka's defaults, the
    static config (file, then overrides), the cluster-wide dynamic configs, this
    broker's dynamic configs (KIP-226; :meth:`set_dynamic`)."""

    props: dict[str, str] = field(default_factory=dict)
    explicit: dict[str, str] = field(default_factory=dict)
    """Keys set by the file or overrides (DescribeConfigs reports them as static)."""
    dynamic_default: dict[str, str] = field(default_factory=dict)
    """Dynamic configs of the cluster default (broker resource ``""``)."""
    dynamic_broker: dict[str, str] = field(default_factory=dict)
    """Dynamic configs of this broker (broker resource ``"<node.id>"``)."""

    def set_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]) -> set[str]:
        """Install new dynamic layers (the caller keeps to the names a running broker
        may change); returns the keys whose effective value changed."""
        before = self.props
        self.dynamic_default, self.dynamic_broker = dict(default), dict(broker)
        self.props = {**DEFAULTS, **self.explicit, **self.dynamic_default, **self.dynamic_broker}
        return {k for k in before.keys() | self.props.keys() if before.get(k) != self.props.get(k)}

    @classmethod
    def from_sources(
        cls, file_props: Mapping[str, str] | None = None, overrides: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        explicit = dict(file_props or {})
        explicit.update(overrides or {})
        props = dict(DEFAULTS)
        props.update(explicit)
        config = cls(props, explicit)
        config.validate()
        return config

    def get(self, key: str) -> str:
        return self.props.get(key, DEFAULTS.get(key, ""))

    def get_int(self, key: str) -> int:
        raw = self.get(key)
        try:
            return int(raw)
        except ValueError as exc:
            raise ConfigError(f"{key}: expected an integer, got {raw!r}") from exc

    def get_bool(self, key: str) -> bool:
        raw = self.get(key).lower()
        if raw not in ("true", "false"):
            raise ConfigError(f"{key}: expected true or false, got {raw!r}")
        return raw == "true"

    def unknown_keys(self) -> list[tuple[str, str | None]]:
        """The keys given (file or overrides) that no part of Odradek reads and
        that are not one of Kafka's own it accepts and ignores, each with the
        closest known key when one is close (a typo), else None."""
        import difflib

        from odradek.metadata.broker_configs import BROKER_CONFIGS

        known = (set(DEFAULTS) | _INT_KEYS | _BOOL_KEYS | _NULLABLE_INT_KEYS
                 | set(BROKER_CONFIGS) | _READ_ELSEWHERE | set(SSL_KEYS))
        out = []
        for key in sorted(self.explicit):
            if (key in known or key in KAFKA_IGNORED or is_ssl_key(key)
                    or _listener_key_known(key, known)):
                continue
            close = difflib.get_close_matches(key, sorted(known), 1, 0.75)
            out.append((key, close[0] if close else None))
        return out

    def ignored_kafka_keys(self) -> list[str]:
        """Kafka settings given that Odradek accepts and does not use."""
        return sorted(k for k in self.explicit if k in KAFKA_IGNORED)

    def validate(self) -> None:
        for key in _INT_KEYS:
            self.get_int(key)
        for key in _NULLABLE_INT_KEYS:
            if self.get(key).strip():
                self.get_int(key)
        for key in _BOOL_KEYS:
            self.get_bool(key)
        if self.get_int("num.partitions") < 1:
            raise ConfigError("num.partitions: must be at least 1")
        from odradek.coordinator.consumer.assignors import ASSIGNORS, assignor_name
        for name in self.get("group.consumer.assignors").split(","):
            if name.strip() and assignor_name(name) not in ASSIGNORS:
                raise ConfigError(f"group.consumer.assignors: unknown assignor {name.strip()!r}"
                                  f" (known: {', '.join(ASSIGNORS)})")
        if self.get_int("message.max.bytes") < 0:
            raise ConfigError("message.max.bytes: must not be negative")
        if self.get_int("socket.request.max.bytes") < 1:
            raise ConfigError("socket.request.max.bytes: must be positive")
        if self.get("log.recovery.damaged.batches").strip().lower() not in ("skip", "truncate"):
            raise ConfigError("log.recovery.damaged.batches: expected skip or truncate")
        bound = self.get_int("queued.max.request.bytes")
        if bound == 0 or bound < -1:
            raise ConfigError("queued.max.request.bytes: must be positive, or -1 for no bound")
        for key in ("quota.window.num", "quota.window.size.seconds"):
            if self.get_int(key) < 1:
                raise ConfigError(f"{key}: must be at least 1")
        for key in ("queued.max.requests", "max.connections", "max.connections.per.ip",
                    "max.connection.creation.rate"):
            if self.get_int(key) < 0 or (key == "queued.max.requests" and self.get_int(key) < 1):
                raise ConfigError(f"{key}: must be at least {int(key == 'queued.max.requests')}")
        for key in _KRAFT_INT_KEYS:
            if self.get_int(key) < 0:
                raise ConfigError(f"{key}: must not be negative")
        if self.get_int("metadata.log.max.record.bytes.between.snapshots") < 1:
            raise ConfigError("metadata.log.max.record.bytes.between.snapshots: must be positive")
        self.listeners()
        self.advertised_listeners()
        if not self.log_dirs():
            raise ConfigError("log.dirs: must name a directory")
        seen: dict[str, Path] = {}
        for d in self.log_dirs():
            key = os.path.abspath(d)
            if key in seen:
                raise ConfigError(f"log.dirs: {seen[key]} and {d} are the same directory")
            seen[key] = d
        if self.get_int("replica.alter.log.dirs.io.max.bytes.per.second") < 1:
            raise ConfigError("replica.alter.log.dirs.io.max.bytes.per.second: must be positive")
        threads = self.get("num.replica.alter.log.dirs.threads").strip()
        if threads and (not threads.isdigit() or int(threads) < 1):
            raise ConfigError("num.replica.alter.log.dirs.threads: must be at least 1")
        self.metrics_listener()
        validate(self)
        validate_ssl_keys(self.get, [k for k in self.props if is_ssl_key(k)])

    def metrics_listener(self) -> tuple[str, int] | None:
        """``odradek.metrics.listener`` as (host, port): ``HOST:PORT`` or
        ``[v6]:PORT`` (an empty host: every interface); None when unset."""
        raw = self.get("odradek.metrics.listener").strip()
        if not raw:
            return None
        host, colon, port = raw.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not colon or not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"odradek.metrics.listener: expected HOST:PORT, got {raw!r}")
        if any(c.isspace() or c in "/[]" for c in host):
            raise ConfigError(f"odradek.metrics.listener: bad host {host!r} in {raw!r}")
        return host, int(port)

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dir(self) -> Path:
        """The first directory of ``log.dirs``."""
        return self.log_dirs()[0]

    def log_dirs(self) -> list[Path]:
        """Every directory of ``log.dirs`` (comma separated), in order."""
        return [Path(d.strip()) for d in self.get("log.dirs").split(",") if d.strip()]

    @property
    def metadata_log_dir(self) -> Path | None:
        """``metadata.log.dir``, or None when unset."""
        text = self.get("metadata.log.dir").strip()
        return Path(text) if text else None

    @property
    def metadata_dir(self) -> Path:
        """Where ``__cluster_metadata-0`` lives: ``metadata.log.dir``, else the first
        directory of ``log.dirs`` (Kafka's rule)."""
        return self.metadata_log_dir or self.log_dir

    def data_dirs(self) -> list[Path]:
        """Every directory this node keeps (``log.dirs``, then ``metadata.log.dir`` if it
        is not one of them): each has its ``meta.properties``."""
        dirs = self.log_dirs()
        meta = self.metadata_log_dir
        return [*dirs, meta] if meta is not None and meta not in dirs else dirs

    # KRaft settings: parsed and checked in cluster_config.
    def process_roles(self) -> frozenset[str]:
        return parse_roles(self.get("process.roles"))

    def quorum_voters(self) -> list[QuorumVoter]:
        """``controller.quorum.voters`` parsed; empty in single-node mode."""
        return parse_voters(self.get("controller.quorum.voters"))

    def quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        return parse_bootstrap_servers(self.get("controller.quorum.bootstrap.servers"))

    @property
    def is_cluster(self) -> bool:
        """Whether a controller quorum is configured: static (``controller.quorum.voters``)
        or dynamic (``controller.quorum.bootstrap.servers``, KIP-853); else single-node
        mode."""
        return bool(self.quorum_voters()) or bool(self.quorum_bootstrap_servers())

    def controller_listener_names(self) -> list[str]:
        return parse_listener_names(self.get("controller.listener.names"))

    def controller_listeners(self) -> list[Listener]:
        """The listeners named by ``controller.listener.names``, in that order."""
        return split_listeners(self.listeners(), self.controller_listener_names())[0]

    def client_listeners(self) -> list[Listener]:
        """The listeners that are not controller listeners, in ``listeners`` order."""
        return split_listeners(self.listeners(), self.controller_listener_names())[1]

    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners"), "listeners")

    def advertised_listeners(self) -> list[Listener]:
        text = self.get("advertised.listeners")
        return parse_listeners(text, "advertised.listeners") if text else self.listeners()

    def client_advertised_listeners(self) -> list[Listener]:
        """What this node advertises to clients: the advertised listeners without the
        controller ones (clients never send requests to a controller listener)."""
        names = self.controller_listener_names()
        return [lis for lis in self.advertised_listeners() if lis.name not in names]


_MECHANISM_PREFIXES = ("plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer.", "gssapi.")


def _listener_key_known(key: str, known: set[str] | frozenset[str]) -> bool:
    """``listener.name.<listener>.[<mechanism>.]<key>`` with a key a listener may
    override (the SSL ones are :func:`is_ssl_key`'s)."""
    if not key.startswith("listener.name."):
        return False
    _listener, _, rest = key[len("listener.name."):].partition(".")
    for prefix in _MECHANISM_PREFIXES:
        if rest.startswith(prefix):
            rest = rest[len(prefix):]
            break
    return rest in known
