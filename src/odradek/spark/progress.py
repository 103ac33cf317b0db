"""A streaming query's lag behind the broker, from its progress.

Spark's Kafka source reports ``avgOffsetsBehindLatest``,
``maxOffsetsBehindLatest`` and ``minOffsetsBehindLatest`` in
``StreamingQueryProgress.sources[].metrics``: over the topic-partitions of
the batch's end offsets, the latest offset known when the batch was planned
minus that end offset. A Python data source cannot put anything there in
pyspark 4.3: the JVM classes that run it
(``PythonMicroBatchStream``, ``…WithAdmissionControl``,
``…WithTriggerAvailableNow``) do not implement ``ReportsSourceMetrics``, and
the driver-side Python runner has no call for it, so ``metrics`` stays empty.
What the API does carry is ``reportLatestOffset()``, which the odradek source
implements: Spark shows it as ``sources[].latestOffset``, next to
``endOffset``. :func:`offsets_behind_latest` computes Kafka's three numbers
from those two, for a ``sources[]`` entry of ``query.lastProgress`` /
``query.recentProgress`` (dicts) or of a ``StreamingQueryListener``'s
``onQueryProgress`` event (``SourceProgress`` objects). pyspark 4.3 gives the
offsets as JSON text in both; parsed JSON (``json.loads`` of a progress's
``json``) is taken too.

Offsets are the source's JSON, ``{"topic": {"partition": next_offset}}``.
"""

from __future__ import annotations

import json
from typing import Any

METRICS = ("avgOffsetsBehindLatest", "maxOffsetsBehindLatest", "minOffsetsBehindLatest")


def offsets_behind_latest(source: Any) -> dict[str, str] | None:
    """Kafka's ``{avg,max,min}OffsetsBehindLatest`` for one ``sources[]`` entry
    (a dict or a ``SourceProgress``), as Kafka's source writes them (strings;
    the average a float, the others integers), over the partitions of its end
    offset; None when it has no latest offset (no batch planned yet, or
    another source) or no partition. A partition the latest offset does not
    name (gone since) is left out."""
    latest = _offsets(_get(source, "latestOffset"))
    end = _offsets(_get(source, "endOffset"))
    if latest is None or end is None:
        return None
    behind = [latest[tp] - offset for tp, offset in end.items() if tp in latest]
    if not behind:
        return None
    return {"avgOffsetsBehindLatest": str(float(sum(behind)) / len(behind)),
            "maxOffsetsBehindLatest": str(max(behind)),
            "minOffsetsBehindLatest": str(min(behind))}


def _get(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


def _offsets(value: Any) -> dict[tuple[str, str], int] | None:
    """``{(topic, partition): offset}`` of a source offset (JSON text or parsed);
    None when it is not one of the odradek source's."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    out = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            return None
        for partition, offset in parts.items():
            if not isinstance(offset, int):
                return None
            out[(topic, partition)] = offset
    return out
