"""The pipeline's ``metrics`` stage: requests, bytes, errors and the time of
each request split into Kafka's phases (``kafka.network:type=RequestMetrics``).

A request's life, as stamped with one clock (``time.perf_counter``, seconds)::

    received --queue--> started --local--> returned --remote--> decided
             --response_queue--> write begins --send--> written

- ``received``: the connection has the request's last byte (the frame is
  complete in its buffer; the connection stamps it);
- ``started``: the request enters the pipeline (decoded, and every earlier
  request of the connection that must be answered first is answered);
- ``returned``: the pipeline's stages and the handler have returned;
- ``decided``: the answer is known. For a Produce answered
  :class:`~odradek.broker.net.registry.Deferred` (its appends assigned,
  waiting for the writer threads, fsyncs and, with acks=all, the followers),
  when that answer resolves; otherwise at ``returned``;
- the answer's encoding and its hand-over to the transport (the kernel's socket
  buffer, or the transport's own buffer when that is full) is ``send``.

The phases (Kafka's names): queue (``RequestQueueTimeMs``) = started −
received; local (``LocalTimeMs``) = returned − started − what the handler
said it waited (``ctx.waited_s``: a Fetch's long poll for ``fetch.min.bytes``
up to ``fetch.max.wait.ms``); remote (``RemoteTimeMs``, Kafka's purgatory) =
that wait + decided − returned; response queue (``ResponseQueueTimeMs``) =
write begins − decided (the answer waits for the connection's earlier
answers); send (``ResponseSendTimeMs``). Total (``TotalTimeMs``) = written −
received, exactly the sum of the five. A request with no answer (acks=0) has
zero response queue and send; a request whose connection closes before its
answer is written is not timed.

Cost on the hot path: a request's stamps are five clock reads (one more for a
deferred answer), kept on its :class:`~odradek.broker.net.pipeline.Call`; when
the answer is written, one method call counts the six durations into
histograms kept per API (a bisect and two additions each). Nothing is looked
up by label on the hot path. The phase histograms are not registry families:
the endpoint renders Kafka's quantile gauges from them
(``broker/observe/request_metrics.py``), and their sums as
``odradek_request_time_seconds_total{request,phase}``.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.broker.net.registry import Deferred
from odradek.common.metrics import LATENCY_BUCKETS_S, Cell, Counter, Histogram, Labels, Registry
from odradek.wire.api import api_name
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.net.pipeline import Call, Proceed

PHASES = ("queue", "local", "remote", "response_queue", "send")
"""The phases of a request, in order (their sum is the total)."""

PHASE_BUCKETS_S = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, *LATENCY_BUCKETS_S)
"""The phases' buckets, in seconds: the total's, and finer below 0.5 ms (a
produce's local time in this broker is a few hundred microseconds, and most
phases of most requests are a few microseconds)."""


@dataclass(slots=True)
class ApiCells:
    """One API's series, kept by :class:`RequestMetrics` to skip label lookups."""

    name: str
    bytes: Cell
    total: list[float]
    phases: tuple[list[float], ...]
    """One histogram row (:meth:`Histogram.row`) per phase of :data:`PHASES`."""
    versions: dict[int, Cell] = field(default_factory=dict)


class RequestMetrics:
    """Per API: requests by version, request bytes, the total time and its phases
    (see the module) and the error codes in answers (every ``error_code`` field
    of the body, as Kafka's ``ErrorsPerSec`` counts ``errorCounts()``; NONE is
    not counted). Requests are counted under the name jmx_exporter gives
    Kafka's ``RequestsPerSec``
    (``kafka_network_requestmetrics_requests_total{request,version}``)."""

    name = "metrics"

    def __init__(self, registry: Registry, clock: Callable[[], float] = time.perf_counter
                 ) -> None:
        self.clock = clock
        self.request_bytes: Counter = registry.counter(
            "odradek_request_bytes_total", "Bytes of request frames received, by API", ("api",))
        self.errors: Counter = registry.counter(
            "odradek_request_errors_total",
            "Error codes in answers, by API and error (one per error_code field set)",
            ("api", "error"))
        self.by_version: Counter = registry.counter(
            "kafka_network_requestmetrics_requests_total",
            "Requests received, by API and version (Kafka's RequestsPerSec)",
            ("request", "version"))
        self.latency: Histogram = registry.histogram(
            "odradek_request_latency_seconds",
            "Time from a request's last byte received to its answer written, by API "
            "(Kafka's TotalTimeMs)", ("api",))
        self.phases: dict[str, Histogram] = {
            p: Histogram(f"odradek_request_{p}_seconds", f"Request {p} time", ("request",),
                         PHASE_BUCKETS_S)
            for p in PHASES}
        """Per phase, by API; not in the registry (see the module)."""
        registry.counter("odradek_request_time_seconds_total",
                         "Seconds requests spent in each phase, by API (phases: queue, "
                         "local, remote, response_queue, send; they add up to the sum of "
                         "odradek_request_latency_seconds)",
                         ("request", "phase"), read=self._phase_sums)
        self._cells: dict[int, ApiCells] = {}

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        cells = self._cells.get(call.api_key)
        if cells is None:
            cells = self._cells[call.api_key] = self._make(call.api_key)
        request = call.request
        cells.bytes.value += request.size
        version = request.api_version
        cell = cells.versions.get(version)
        if cell is None:
            cell = cells.versions[version] = self.by_version.cell(cells.name, str(version))
        cell.value += 1
        clock = self.clock
        call.started = started = clock()
        answer = await proceed(call)
        call.decided = returned = clock()
        waited = call.ctx.waited_s
        call.local = returned - started - waited
        call.remote = waited
        call.cells = cells
        if isinstance(answer, Deferred):
            return Deferred(self._later(call, cells, answer.answer))
        if answer is not None:
            self._count_errors(cells, answer)
        return answer

    def _make(self, api_key: int) -> ApiCells:
        try:
            name = api_name(api_key)
        except (KeyError, ValueError):
            name = f"Api{api_key}"
        return ApiCells(name, self.request_bytes.cell(name), self.latency.row(name),
                        tuple(self.phases[p].row(name) for p in PHASES))

    async def _later(self, call: Call, cells: ApiCells, answer: Awaitable[Any]) -> Any:
        body = await answer
        decided = self.clock()
        call.remote += decided - call.decided
        call.decided = decided
        if body is not None:
            self._count_errors(cells, body)
        return body

    def _count_errors(self, cells: ApiCells, body: Any) -> None:
        collect = _COLLECTORS.get(type(body), _MISSING)
        if collect is _MISSING:
            collect = _collector(type(body))
        if collect is None:
            return
        codes: list[int] = []
        collect(body, codes)
        for code in codes:
            self.errors.inc(cells.name, _error_name(code))

    def sent(self, call: Call, write_began: float, written: float) -> None:
        """The answer of ``call`` is written (``write_began`` = ``written`` when
        there is none): count its total time and phases (see the module). A
        call the metrics stage did not see is ignored."""
        cells = call.cells
        if cells is None:
            return
        received = call.received
        if received < 0.0:  # no receipt stamp (a request fed in by a test)
            received = call.started
        queue = call.started - received
        total = written - received
        local, remote = call.local, call.remote
        response_queue, send = write_began - call.decided, written - write_began
        # unrolled: this runs once per request
        row = cells.total
        row[bisect_left(LATENCY_BUCKETS_S, total)] += 1
        row[-1] += total
        queue_row, local_row, remote_row, response_row, send_row = cells.phases
        queue_row[bisect_left(PHASE_BUCKETS_S, queue)] += 1
        queue_row[-1] += queue
        local_row[bisect_left(PHASE_BUCKETS_S, local)] += 1
        local_row[-1] += local
        remote_row[bisect_left(PHASE_BUCKETS_S, remote)] += 1
        remote_row[-1] += remote
        response_row[bisect_left(PHASE_BUCKETS_S, response_queue)] += 1
        response_row[-1] += response_queue
        send_row[bisect_left(PHASE_BUCKETS_S, send)] += 1
        send_row[-1] += send

    def _phase_sums(self) -> Iterable[tuple[Labels, float]]:
        for phase, h in self.phases.items():
            for labels, row in h.series.items():
                yield (labels[0], phase), row[-1]


# -- error codes of an answer ------------------------------------------------------

Collector = Callable[[Any, list[int]], None]
_COLLECTORS: dict[type, Collector | None] = {}
"""Per generated class: a function appending the non-zero error codes of an
instance and of the structs it holds (None: it holds no error code)."""
_MISSING: Any = object()


def error_codes(body: Any) -> list[int]:
    """Every non-zero ``error_code`` in ``body`` and the structs it holds."""
    out: list[int] = []
    collect = _collector(type(body))
    if collect is not None:
        collect(body, out)
    return out


def _collector(cls: type) -> Collector | None:
    if cls in _COLLECTORS:
        return _COLLECTORS[cls]
    _COLLECTORS[cls] = None  # a struct that holds itself ends here
    own = False
    singles: list[tuple[str, Collector]] = []
    arrays: list[tuple[str, Collector]] = []
    leaf_arrays: list[str] = []  # arrays of structs whose only error code is their own
    for f in getattr(cls, "FIELDS", ()):
        if f.name == "error_code" and f.kind == "int16" and not f.array:
            own = True
        elif f.kind == "struct" and f.struct is not None:
            sub = _collector(f.struct)
            if sub is None:
                continue
            if f.array and f.struct in _LEAVES:
                leaf_arrays.append(f.name)
            else:
                (arrays if f.array else singles).append((f.name, sub))
    if not own and not singles and not arrays and not leaf_arrays:
        return None

    def collect(node: Any, out: list[int]) -> None:
        if own and node.error_code:
            out.append(node.error_code)
        for name in leaf_arrays:
            for item in getattr(node, name):
                if item.error_code:
                    out.append(item.error_code)
        for name, sub in singles:
            sub(getattr(node, name), out)
        for name, sub in arrays:
            for item in getattr(node, name):
                sub(item, out)

    if own and not singles and not arrays and not leaf_arrays:
        _LEAVES.add(cls)
    _COLLECTORS[cls] = collect
    return collect


_LEAVES: set[type] = set()
"""Classes whose only error code is their own field (read inline by their parent)."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
