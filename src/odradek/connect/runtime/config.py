"""The worker's and every connector's common settings.

Worker (standalone): ``bootstrap.servers`` (``localhost:9092``),
``key.converter`` / ``value.converter`` (required, as Kafka's) with their
``key.converter.*`` / ``value.converter.*`` settings, ``header.converter``,
``offset.storage.file.filename`` (required unless exactly-once is on),
``offset.flush.interval.ms`` (60000), ``listeners`` (``http://:8083``).
Exactly-once source (KIP-618, :mod:`odradek.connect.runtime.eos`; an Odradek
extension in standalone mode): ``exactly.once.source.support``
(``disabled``/``preparing``/``enabled``); when ``enabled``, source offsets live
in ``offset.storage.topic`` (``connect-offsets``;
``offset.storage.partitions`` 25, ``offset.storage.replication.factor`` 3)
instead of the file. ``topic.creation.enable`` (true;
:mod:`odradek.connect.runtime.topics`). Client settings
(``security.protocol``, ``sasl.*``, ``ssl.*``, ``client.id``...) go to both the
producer and the consumer; ``producer.*`` / ``consumer.*`` override them for
one of them (prefix removed); connectors may add ``producer.override.*`` /
``consumer.override.*``.

Java-client security names are turned into librdkafka's where they differ:
``sasl.jaas.config`` (PLAIN/SCRAM login modules) becomes ``sasl.username`` /
``sasl.password``, ``sasl.mechanism`` ``sasl.mechanisms``, a PEM
``ssl.truststore.location`` ``ssl.ca.location``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from odradek.client.properties import parse_jaas
from odradek.connect import errors
from odradek.connect.config import (
    BOOLEAN,
    CLASS,
    INT,
    LIST,
    LONG,
    STRING,
    ConfigDef,
    ConfigError,
    ConfigKey,
    at_least,
    non_empty,
    one_of,
)
from odradek.connect.runtime import topics

WORKER_CONFIG = ConfigDef((
    ConfigKey("bootstrap.servers", LIST, ["localhost:9092"]),
    ConfigKey("key.converter", CLASS),
    ConfigKey("value.converter", CLASS),
    ConfigKey("header.converter", CLASS, "org.apache.kafka.connect.storage.SimpleHeaderConverter"),
    ConfigKey("offset.storage.file.filename", STRING, ""),
    ConfigKey("exactly.once.source.support", STRING, "disabled",
              validator=one_of("disabled", "preparing", "enabled")),
    ConfigKey("offset.storage.topic", STRING, "connect-offsets", validator=non_empty),
    ConfigKey("offset.storage.partitions", INT, 25, validator=at_least(1)),
    ConfigKey("offset.storage.replication.factor", INT, 3, validator=at_least(-1)),
    ConfigKey("offset.flush.interval.ms", LONG, 60000, validator=at_least(1)),
    ConfigKey("listeners", LIST, ["http://:8083"]),
    ConfigKey("topic.creation.enable", BOOLEAN, True),
))

COMMON = ConfigDef((
    ConfigKey("name", STRING, validator=non_empty, importance="HIGH", group="Common",
              documentation="Globally unique name of the connector."),
    ConfigKey("connector.class", CLASS, importance="HIGH", group="Common",
              documentation="The connector's class: a Kafka class name, alias or Python path."),
    ConfigKey("tasks.max", INT, 1, validator=at_least(1), importance="HIGH", group="Common",
              documentation="The most tasks the connector may run."),
    ConfigKey("key.converter", CLASS, None, importance="LOW", group="Common",
              documentation="The key converter (the worker's when unset)."),
    ConfigKey("value.converter", CLASS, None, importance="LOW", group="Common",
              documentation="The value converter (the worker's when unset)."),
    ConfigKey("header.converter", CLASS, None, importance="LOW", group="Common",
              documentation="The header converter (the worker's when unset)."),
    ConfigKey("transforms", LIST, [], importance="LOW", group="Transforms",
              documentation="Aliases of the transforms applied in order."),
    ConfigKey("predicates", LIST, [], importance="LOW", group="Predicates",
              documentation="Aliases of the predicates transforms may use."),
))
SOURCE_COMMON = COMMON + errors.CONFIG + topics.CONFIG + ConfigDef((
    ConfigKey("exactly.once.support", STRING, "requested",
              validator=one_of("requested", "required"), group="Exactly Once Support",
              documentation="required: refuse the connector unless it declares exactly-once "
                            "support (checked when the worker has exactly-once enabled)."),
    ConfigKey("transaction.boundary", STRING, "poll",
              validator=one_of("poll", "interval", "connector"), group="Exactly Once Support",
              documentation="Where transactions end: after each poll() batch, every "
                            "transaction.boundary.interval.ms, or where the connector says."),
    ConfigKey("transaction.boundary.interval.ms", LONG, None, validator=at_least(0),
              group="Exactly Once Support",
              documentation="With transaction.boundary=interval: the time between commits "
                            "(the worker's offset.flush.interval.ms when unset)."),
    ConfigKey("offsets.storage.topic", STRING, None, group="Exactly Once Support",
              documentation="The connector's own offsets topic (read first, then the "
                            "worker's)."),
))
SINK_COMMON = COMMON + errors.SINK_CONFIG + ConfigDef((
    ConfigKey("topics", LIST, [], group="Common", documentation="The topics to consume."),
    ConfigKey("topics.regex", STRING, "", group="Common",
              documentation="A regular expression of the topics to consume."),
))

ClientConfig = dict[str, str | int | float | bool]
"""A confluent-kafka configuration."""

_CLIENT_PREFIXES = ("security.", "sasl.", "ssl.", "client.", "socket.", "request.timeout.ms",
                    "metadata.", "reconnect.", "retry.backoff.")


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    props: dict[str, str]
    bootstrap_servers: str
    offsets_file: str
    flush_interval_ms: int
    host: str
    port: int
    exactly_once: str = "disabled"
    """``exactly.once.source.support``: disabled, preparing or enabled."""

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> WorkerConfig:
        """Raises :class:`ConfigError` naming the first bad setting."""
        values = WORKER_CONFIG.parse(props)
        listeners = list(values["listeners"])
        url = urlsplit(listeners[0] if listeners else "")
        if url.scheme != "http" or url.port is None:
            raise ConfigError("listeners", f"expected http://HOST:PORT, got {listeners!r}")
        eos = str(values["exactly.once.source.support"])
        if eos != "enabled" and not str(values["offset.storage.file.filename"]).strip():
            raise ConfigError("offset.storage.file.filename",
                              "Missing required configuration \"offset.storage.file.filename\""
                              " which has no default value.")
        return cls(dict(props), ",".join(values["bootstrap.servers"]),
                   str(values["offset.storage.file.filename"]),
                   int(values["offset.flush.interval.ms"]), url.hostname or "0.0.0.0",
                   url.port, eos)

    def client_config(self, kind: str, overrides: Mapping[str, str] | None = None
                      ) -> ClientConfig:
        """confluent-kafka settings for ``kind`` (``producer``/``consumer``)."""
        out = {k: v for k, v in self.props.items() if k.startswith(_CLIENT_PREFIXES)}
        out.update(prefixed(self.props, f"{kind}."))
        out.update(overrides or {})
        out["bootstrap.servers"] = self.bootstrap_servers
        return librdkafka(out)


def prefixed(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The settings under ``prefix``, prefix removed."""
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def librdkafka(props: Mapping[str, str]) -> ClientConfig:
    """Java client names turned into librdkafka's (see the module's docstring)."""
    out: dict[str, str] = dict(props)
    jaas = out.pop("sasl.jaas.config", None)
    if jaas:
        try:
            _, options = parse_jaas(jaas)
        except ValueError as e:
            raise ConfigError("sasl.jaas.config", str(e)) from None
        out.setdefault("sasl.username", options.get("username", ""))
        out.setdefault("sasl.password", options.get("password", ""))
    if "sasl.mechanism" in out:
        out.setdefault("sasl.mechanisms", out.pop("sasl.mechanism"))
    store = out.pop("ssl.truststore.location", None)
    if store:
        if out.pop("ssl.truststore.type", "PEM").upper() != "PEM":
            raise ConfigError("ssl.truststore.type", "only PEM trust stores can be used here")
        out.setdefault("ssl.ca.location", store)
    out.pop("ssl.truststore.password", None)
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return dict(out)
