"""The log cleaner under jmx_exporter's names for Kafka's ``LogCleaner`` and
``LogCleanerManager`` gauges (``kafka-2_0_0.yml``'s generic gauge rule:
``kafka_log_<type>_<name>``, dashes as underscores), plus Odradek's own totals:

- ``kafka_log_logcleanermanager_max_dirty_percent``: the highest dirty ratio,
  in percent, among the compacted logs when the cleaner last looked (every
  ``log.cleaner.backoff.ms``), whether or not they were due for cleaning, as
  Kafka computes it (dirty bytes over the bytes below the first uncleanable
  offset);
- ``kafka_log_logcleaner_cleaner_recopy_percent``: bytes the last pass wrote
  as a percentage of those it read (100: nothing was removed);
- ``kafka_log_logcleaner_max_clean_time_secs``: how long the last pass took
  (one pass at a time here, so the maximum over threads is that pass's);
- ``kafka_log_logcleaner_time_since_last_run_ms``: ms since the last pass
  ended (0 before the first, as in Kafka);
- ``odradek_log_cleaner_passes_total``, ``odradek_log_cleaner_read_bytes_total``,
  ``odradek_log_cleaner_written_bytes_total``: passes completed and the bytes
  they read and wrote, since the start (Kafka has no MBean for these).

Every value comes from :attr:`odradek.storage.manager.LogManager.cleaner_stats`,
which the cleaner updates once per look and per pass: a scrape reads a dict.
"""

from __future__ import annotations

import functools

from odradek.broker.observe.kafka_metrics import BrokerView, Series
from odradek.common.metrics import Registry

GAUGES = (
    ("kafka_log_logcleanermanager_max_dirty_percent", "Highest dirty ratio (%) among "
     "the compacted logs when the cleaner last looked"),
    ("kafka_log_logcleaner_cleaner_recopy_percent", "Bytes written as a percentage of "
     "bytes read by the last cleaner pass"),
    ("kafka_log_logcleaner_max_clean_time_secs", "Seconds the last cleaner pass took"),
    ("kafka_log_logcleaner_time_since_last_run_ms", "Ms since the last cleaner pass ended"),
)
COUNTERS = (
    ("odradek_log_cleaner_passes_total", "passes", "Log cleaner passes completed"),
    ("odradek_log_cleaner_read_bytes_total", "bytes_read", "Bytes read by cleaner passes"),
    ("odradek_log_cleaner_written_bytes_total", "bytes_written",
     "Bytes written by cleaner passes"),
)


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    for name, what in GAUGES:
        registry.gauge(name, what, read=functools.partial(_gauge, broker, name))
    for name, key, what in COUNTERS:
        registry.counter(name, what, read=functools.partial(_total, broker, key))


def _stats(broker: BrokerView) -> dict[str, float] | None:
    pm = broker.partitions
    return pm.logs.cleaner_stats if pm is not None else None


def _total(broker: BrokerView, key: str) -> Series:
    stats = _stats(broker)
    return [] if stats is None else [((), float(stats[key]))]


def _gauge(broker: BrokerView, name: str) -> Series:
    stats = _stats(broker)
    pm = broker.partitions
    if stats is None or pm is None:
        return []
    if name.endswith("max_dirty_percent"):
        v = stats["last_max_dirty_ratio"] * 100
    elif name.endswith("recopy_percent"):
        read = stats["last_bytes_read"]
        v = 100 * stats["last_bytes_written"] / read if read else 0.0
    elif name.endswith("max_clean_time_secs"):
        v = stats["last_pass_s"]
    else:
        last = stats["last_pass_ms"]
        v = max(pm.logs.clock.now_ms() - last, 0) if last >= 0 else 0.0
    return [((), float(v))]
