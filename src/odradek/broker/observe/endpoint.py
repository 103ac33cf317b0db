"""The metrics and health endpoint: ``odradek.metrics.listener=HOST:PORT``.

Routes (GET or HEAD; anything else 405, other paths 404):

- ``/metrics``: the broker's registry, in Prometheus text 0.0.4
  (``text/plain; version=0.0.4``), or OpenMetrics 1.0.0 text when the
  ``Accept`` header prefers ``application/openmetrics-text``;
- ``/healthz``: 200 ``ok`` while the process answers (Kubernetes' liveness);
- ``/readyz``: 200 ``ready`` once the node is serving (listeners open, metadata
  caught up, this node registered and its partitions loaded), else 503 with a
  one-line reason (Kubernetes' readiness).

The HTTP itself is :mod:`odradek.broker.observe.server`'s; the metric families
are :mod:`odradek.broker.observe.kafka_metrics`' (with ``controller_metrics``,
``raft_metrics``, ``cleaner_metrics``, ``quota_metrics`` and
``connection_metrics`` beside it), the consumer lag's and the request
pipeline's.

A rendering of ``/metrics`` is reused for :data:`RENDER_REUSE_S` (per format):
a client asking in a loop costs the event loop an HTTP parse per request, not
a walk over every partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from odradek.broker.observe.http import HttpRequest, prefers_openmetrics
from odradek.broker.observe.server import HttpServer, Reply
from odradek.common.metrics import (
    CONTENT_TYPE_OPENMETRICS,
    CONTENT_TYPE_TEXT,
    Registry,
    render,
    render_openmetrics,
)

RENDER_REUSE_S = 0.5
"""How long one rendering of ``/metrics`` answers further scrapes."""


class MetricsEndpoint:
    """The endpoint's routes over an :class:`HttpServer` (see the module).
    ``readiness()`` is None when the node is serving, else why not (one line)."""

    def __init__(self, registry: Registry, readiness: Callable[[], str | None],
                 host: str, port: int, *, read_timeout_s: float = 10.0) -> None:
        self.registry = registry
        self.readiness = readiness
        self.http = HttpServer(host, port, self.handle, read_timeout_s=read_timeout_s)
        self._rendered: dict[bool, tuple[float, bytes]] = {}
        """By format (OpenMetrics or not): when rendered (monotonic s), the text."""

    async def start(self) -> None:
        await self.http.start()

    async def stop(self) -> None:
        await self.http.stop()

    @property
    def address(self) -> str:
        return self.http.address

    def handle(self, request: HttpRequest) -> Reply:
        path = request.path
        if path == "/metrics":
            om = prefers_openmetrics(request.headers.get("accept", ""))
            return Reply(200, self._render(om), CONTENT_TYPE_OPENMETRICS if om
                         else CONTENT_TYPE_TEXT)
        if path == "/healthz":
            return Reply(200, b"ok\n")
        if path == "/readyz":
            reason = self.readiness()
            if reason is None:
                return Reply(200, b"ready\n")
            return Reply(503, reason.replace("\n", " ").encode() + b"\n")
        return Reply(404, b"not found; try /metrics, /healthz or /readyz\n")

    def _render(self, openmetrics: bool) -> bytes:
        now = time.monotonic()
        done = self._rendered.get(openmetrics)
        if done is not None and now - done[0] < RENDER_REUSE_S:
            return done[1]
        text = (render_openmetrics if openmetrics else render)(self.registry).encode()
        self._rendered[openmetrics] = (now, text)
        return text
