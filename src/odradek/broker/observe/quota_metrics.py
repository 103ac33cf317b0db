"""Client quota sensors under the names jmx_exporter's ``kafka-2_0_0.yml``
gives Kafka's quota MBeans ``kafka.server:type={Produce,Fetch,Request},
user=U,client-id=C`` (its rule ``kafka_server_quota_<attribute>`` with labels
``resource``, ``user``, ``clientId``; dashes as underscores):

- ``kafka_server_quota_byte_rate{resource,user,clientId}``: bytes per second
  charged to a ``producer_byte_rate`` (``resource="Produce"``) or
  ``consumer_byte_rate`` (``"Fetch"``) quota's sensor, over the quota windows
  (``quota.window.num`` x ``quota.window.size.seconds``);
- ``kafka_server_quota_request_time{resource="Request",user,clientId}``: the
  ``request_percentage`` sensor's rate, in percent of one thread;
- ``kafka_server_quota_throttle_time{resource,user,clientId}``: the average
  throttle time (ms) given to that sensor's clients' answers over the same
  windows, 0 when none was throttled.

A sensor exists, as in Kafka, only for clients under a configured quota of its
key, and is the entity charged: a (user, client-id) quota has both labels, a
client-id quota ``user=""``, a user quota ``clientId=""`` (one sensor for all
of that user's clients, Kafka's rule). Sensors idle for two spans go
(:meth:`QuotaManager._expire`), and their series with them. Read at scrape
time from :class:`~odradek.broker.net.quotas.QuotaManager`: one pass over the
live sensors.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from odradek.broker.observe.kafka_metrics import BrokerView, Series
from odradek.common.metrics import Registry

if TYPE_CHECKING:
    from odradek.metadata.quotas import Entity

RESOURCES = {"producer_byte_rate": "Produce", "consumer_byte_rate": "Fetch",
             "request_percentage": "Request"}
LABELS = ("resource", "user", "clientId")


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    registry.gauge("kafka_server_quota_byte_rate", "Bytes/s charged to a client's "
                   "byte-rate quota sensor (Kafka's quota byte-rate)", LABELS,
                   read=functools.partial(_rates, broker, bytes_=True))
    registry.gauge("kafka_server_quota_request_time", "Percent of a thread charged to a "
                   "client's request quota sensor (Kafka's quota request-time)", LABELS,
                   read=functools.partial(_rates, broker, bytes_=False))
    registry.gauge("kafka_server_quota_throttle_time", "Average throttle time (ms) given "
                   "to a quota sensor's clients (Kafka's quota throttle-time)", LABELS,
                   read=functools.partial(_throttles, broker))


def _labels(key: str, entity: Entity) -> tuple[str, str, str]:
    names = dict(entity)
    return RESOURCES[key], names.get("user") or "", names.get("client-id") or ""


def _rates(broker: BrokerView, bytes_: bool) -> Series:
    state = broker.state
    if state is None:
        return []
    now = state.clock.monotonic_ms()
    return [(_labels(key, entity), sensor.measure(now))
            for (key, entity), sensor in list(state.quotas.sensors.items())
            if key in RESOURCES and (key != "request_percentage") == bytes_]


def _throttles(broker: BrokerView) -> Series:
    state = broker.state
    if state is None:
        return []
    now = state.clock.monotonic_ms()
    quotas = state.quotas
    return [(_labels(key, entity), quotas.throttles[(key, entity)].avg(now)
             if (key, entity) in quotas.throttles else 0.0)
            for key, entity in list(quotas.sensors) if key in RESOURCES]
