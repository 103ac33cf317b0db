"""Connections opened and closed per Kafka listener, under the names of
Kafka's ``kafka.server:type=socket-server-metrics`` attributes as
``kafka_server_socket_server_metrics_connection_count{listener}`` (in
:mod:`~odradek.broker.observe.kafka_metrics`) already has them:

- ``kafka_server_socket_server_metrics_connection_creation_total{listener}``:
  connections admitted since the start (refused ones, over a connection limit
  or quota, not counted);
- ``kafka_server_socket_server_metrics_connection_close_total{listener}``:
  admitted connections closed since;
- ``kafka_server_socket_server_metrics_connection_creation_rate{listener}``:
  admissions per second over Kafka's 2 x 30 s sample windows.

Kafka also splits these by ``networkProcessor``; Odradek has one event loop, so
there is no such label. Counted where a connection is admitted and lost
(:meth:`KafkaServer.opened`, ``KafkaConnection.connection_lost``); a
scrape reads two counters and a windowed rate per listener.
"""

from __future__ import annotations

from odradek.broker.observe.kafka_metrics import BrokerView, Series
from odradek.common.metrics import Registry

PREFIX = "kafka_server_socket_server_metrics_"


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    def created() -> Series:
        server = broker.server
        return [] if server is None else [((k,), float(v)) for k, v in server.created.items()]

    def closed() -> Series:
        server = broker.server
        return [] if server is None else [((k,), float(v)) for k, v in server.closed.items()]

    def rate() -> Series:
        server = broker.server
        if server is None:
            return []
        now = server.loop_time() * 1000
        return [((k,), w.rate(now)) for k, w in server.creation_rates.items()]

    registry.counter(PREFIX + "connection_creation_total",
                     "Client connections admitted by listener", ("listener",), read=created)
    registry.counter(PREFIX + "connection_close_total",
                     "Admitted client connections closed by listener", ("listener",),
                     read=closed)
    registry.gauge(PREFIX + "connection_creation_rate",
                   "Client connections admitted per second by listener (2 x 30 s windows)",
                   ("listener",), read=rate)
