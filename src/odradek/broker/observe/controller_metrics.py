"""The controller queue's timings and leader elections under jmx_exporter's
names for Kafka's ``ControllerStats`` and ``ControllerEventManager`` MBeans
(``kafka-2_0_0.yml``: a Yammer timer's percentiles become a gauge with a
``quantile`` label, its count ``<name>_count``, and a meter's count
``<name>_total`` with ``PerSec`` dropped):

- ``kafka_controller_controllerstats_leaderelectionrateandtimems{quantile}``
  and ``…_count``: leaders elected by this node as active controller, each
  timed with the metadata write that elected it (ms);
- ``kafka_controller_controllerstats_uncleanleaderelections_total``: of
  those, leaders taken from outside the ISR;
- ``kafka_controller_controllereventmanager_eventqueuetimems{quantile}`` and
  ``…_count``: time a metadata write waited in the controller queue (ms);
- ``kafka_controller_controllereventmanager_eventqueueprocessingtimems{quantile}``
  and ``…_count``: time from then until its records committed (ms).

What is measured, and why it is the honest counterpart of Kafka's queue, is
:mod:`odradek.broker.control.controller_stats`'s docstring. Quantiles are
estimated from histograms (:meth:`Histogram.quantile`); with no observation
they are 0, as a Yammer histogram reports them. Every value is read at scrape
time from :attr:`BrokerState.controller_stats`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.observe.kafka_metrics import BrokerView, Series
from odradek.broker.observe.request_metrics import QUANTILES
from odradek.common.metrics import Histogram, Registry

if TYPE_CHECKING:
    from odradek.broker.control.controller_stats import ControllerStats

TIMERS = (
    ("kafka_controller_controllerstats_leaderelectionrateandtimems", "election_time_ms",
     "Leader elections by this node as active controller, timed by the electing "
     "metadata write in ms (Kafka's ControllerStats LeaderElectionRateAndTimeMs)"),
    ("kafka_controller_controllereventmanager_eventqueuetimems", "queue_time_ms",
     "Time in ms metadata writes waited in the controller queue (Kafka's "
     "ControllerEventManager EventQueueTimeMs)"),
    ("kafka_controller_controllereventmanager_eventqueueprocessingtimems",
     "processing_time_ms", "Time in ms from a metadata write leaving the controller "
     "queue to its records committed (Kafka's EventQueueProcessingTimeMs)"),
)


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    def stats() -> ControllerStats | None:
        state = broker.state
        return state.controller_stats if state is not None else None

    for name, attr, what in TIMERS:
        registry.gauge(name, what, ("quantile",),
                       read=functools.partial(_quantiles, stats, attr))
        registry.gauge(f"{name}_count", f"Count of {name}",
                       read=functools.partial(_count, stats, attr))

    def unclean() -> Series:
        s = stats()
        return [((), float(s.unclean_elections if s is not None else 0))]

    registry.counter("kafka_controller_controllerstats_uncleanleaderelections_total",
                     "Leaders this node as active controller elected from outside the "
                     "ISR (Kafka's UncleanLeaderElectionsPerSec)", read=unclean)


def quantile_series(h: Histogram) -> Series:
    """A label-less histogram's :data:`QUANTILES` as (("q",), value) pairs, 0 when
    it has no observation (a Yammer histogram's percentiles then)."""
    out = []
    for q in QUANTILES:
        v = h.quantile(q)
        out.append(((str(q),), 0.0 if math.isnan(v) else v))
    return out


def _quantiles(stats: Callable[[], ControllerStats | None], attr: str) -> Series:
    s = stats()
    return [] if s is None else quantile_series(getattr(s, attr))


def _count(stats: Callable[[], ControllerStats | None], attr: str) -> Series:
    s = stats()
    return [((), float(getattr(s, attr).count() if s is not None else 0))]
