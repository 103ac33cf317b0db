"""What the controller queue measures about itself, for the metrics endpoint.

Odradek's controller queue is :meth:`BrokerState.write`: one metadata write at
a time, behind an ``asyncio.Lock``, each deciding on the image the writes
before it left, then appending its records to the metadata log and waiting
for them to commit. That is the role of Kafka's controller event queue, so
its times are Kafka's ``ControllerEventManager`` histograms:

- *queue time*: from the call until the write holds the lock (Kafka's
  ``EventQueueTimeMs``);
- *processing time*: from then until its records are committed and applied
  here, or the decision failed (``EventQueueProcessingTimeMs``).

Only the active controller's writes are measured (elsewhere a write is
refused at once). Leader elections (:func:`odradek.metadata.elections.count_elections`)
are counted when the write that makes them has committed; each one is timed
with that write's processing time (Kafka's ``LeaderElectionRateAndTimeMs``
timer), and the unclean ones are counted apart (``UncleanLeaderElectionsPerSec``).
The commit latency of the metadata log (Kafka's raft-metrics
``commit-latency-avg`` / ``-max``) is the time an append took to commit, over
Kafka's 2 x 30 s windows. All times in ms, from :func:`time.perf_counter`
(a measurement, not a decision: the injected clock plays no part).
"""

from __future__ import annotations

from odradek.common.metrics import Histogram
from odradek.common.windowed import Windowed

MS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
              1000.0, 2500.0, 5000.0, 10000.0, 30000.0)
"""Buckets of the controller's timings, in ms (a write on a single node is an
fsync; on a quorum, a round trip to a majority)."""


class ControllerStats:
    """Timings and election counts of one node's controller queue (see the module)."""

    def __init__(self) -> None:
        self.queue_time_ms = Histogram("queue_time_ms", "", buckets=MS_BUCKETS)
        self.processing_time_ms = Histogram("processing_time_ms", "", buckets=MS_BUCKETS)
        self.election_time_ms = Histogram("election_time_ms", "", buckets=MS_BUCKETS)
        """One observation per leader elected (the electing write's processing time)."""
        self.unclean_elections = 0
        self.commit_latency_ms = Windowed()
        """Metadata appends, from the append to its commit here (ms)."""

    def elected(self, elections: int, unclean: int, took_ms: float) -> None:
        for _ in range(elections):
            self.election_time_ms.observe(took_ms)
        self.unclean_elections += unclean
