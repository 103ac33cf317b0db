"""The asyncio server: accept connections, frame requests, dispatch, respond.

Each connection is a ``BufferedProtocol`` over a sans-IO
:class:`~odradek.wire.frames.ServerConnection` and one task that serves its
requests strictly in order, one at a time, as Kafka does (a long-polling Fetch
holds back the next request on that connection, not on others). A connection
gives the loop back after a bounded amount of serving
(:class:`~odradek.broker.net.turns.TurnBudget`), so one connection's pipelined
requests never hold every other connection for a long turn; and the answers
it makes are gathered and written in one send per turn (``_flush``, scheduled
with ``call_soon`` by the first answer of a turn): when requests queue up
because the broker is short of CPU, each send costs one system call for many
answers instead of one each. One exception:
a Produce whose appends are assigned and which only waits for their writes
(on the writer threads, :mod:`odradek.broker.replica.writer`), fsyncs or acks answers
:class:`~odradek.broker.net.registry.Deferred`, and the next request is served
meanwhile; every answer still goes out in request order. A produce costs a
thread hop to the writer and back, and serving one connection's pipelined
produces one hop at a time would cap it at a few thousand requests a second.

Resource limits (docs/limits.md): request memory is charged to one
broker-wide :class:`~odradek.wire.frames.RequestMemory` bounded by
``queued.max.request.bytes``; while it is exceeded, a connection that reads
stops reading (backpressure) until answered requests give memory back. If
nothing queued can give memory back (every held byte belongs to a frame still
arriving), the connection closest to completing its frame is let through, one
at a time, so the broker cannot deadlock. ``queued.max.requests`` bounds the
requests read ahead of their answers on one connection. New connections beyond
``max.connections``, ``max.connections.per.ip`` (and its overrides) or
``max.connection.creation.rate`` are closed at once
(:mod:`odradek.broker.net.connlimits`); connections with no socket activity and no
request in progress for ``connections.max.idle.ms`` are closed.

Bad input: a frame whose size prefix is negative or above
``socket.request.max.bytes``, an unknown API key, an unadvertised version of
any API but ApiVersions, or a body that does not decode closes the
connection, as Kafka does. An unsupported ApiVersions version gets a v0 body
with UNSUPPORTED_VERSION and the full API list (KIP-511).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

from odradek.broker.aio import cancel_and_wait
from odradek.broker.cluster_config import effective_protocol_map
from odradek.broker.config import ConfigError
from odradek.broker.control.broker_state import BrokerState
from odradek.broker.handlers.k18_api_versions import unsupported_version_response
from odradek.broker.net import authz
from odradek.broker.net.authz import AclAuthorizer
from odradek.broker.net.connlimits import ConnectionLimits
from odradek.broker.net.context import ALLOW_ALL, ANONYMOUS, Authz, RequestContext, Services
from odradek.broker.net.pipeline import (
    Call,
    Pipeline,
    RequestMetrics,
    Stage,
    Stages,
    default_stages,
)
from odradek.broker.net.registry import CloseConnection, Deferred, registration
from odradek.broker.net.ssl_principal import NoMatchingRule, PrincipalMapper
from odradek.broker.net.tls import ListenerTls
from odradek.broker.net.transfer import write_parts
from odradek.broker.net.turns import TurnBudget
from odradek.common.metrics import Registry
from odradek.common.windowed import Windowed
from odradek.metadata.ssl_configs import is_dynamic_ssl_key
from odradek.wire.frames import (
    UNBOUNDED,
    BadRequest,
    FrameError,
    RawToken,
    Request,
    RequestMemory,
    ServerConnection,
    encode_response,
)

if TYPE_CHECKING:  # the SASL modules load only on a broker with a SASL listener
    from odradek.broker.net.sasl.authenticator import SessionSettings

log = logging.getLogger("odradek.broker")

PRELOADED_APIS = (3, 0, 1, 2, 10, 11, 14, 12, 9, 8, 13, 22, 19, 23, 32, 60, 15, 16)
"""The handlers every Kafka client reaches in its first seconds (metadata,
produce, fetch, offsets, groups, idempotence, topic creation), imported one per
event-loop turn once the listeners serve, so the first Produce does not wait
for them; the others load on their first request (``registry.registration``)."""



class KafkaConnection(asyncio.BufferedProtocol):
    """A connection on a PLAINTEXT listener: its principal is ``User:ANONYMOUS``.
    (An SSL or SASL listener is a listener kind of its own: a subclass that
    sets the principal once the handshake is done, and a pipeline stage.)"""

    security_protocol = "PLAINTEXT"

    def __init__(self, server: KafkaServer, listener: str = "") -> None:
        self.server = server
        self.listener = listener
        """The name of the listener this connection came in on."""
        self.principal = ANONYMOUS
        self._authz: Authz = ALLOW_ALL
        self._authz_for = ""
        """The principal :attr:`_authz` was made for (a SASL listener sets the
        principal after the connection is made)."""
        self.channel: Any = None
        """The SASL channel the pipeline's authenticate stage works through (SASL listeners)."""
        self.state = server.state
        self.conn = ServerConnection(server.max_frame_bytes, server.memory)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.ip = ""
        self._admitted = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._pauses: set[str] = set()
        """Why reading is paused: "queue" (queued.max.requests), "memory", "throttle"."""
        self._granted = False
        """Let through while memory is exceeded (see the module docstring)."""
        self.busy = False
        """A request is being handled."""
        self.last_active = server.loop_time()
        self._deferred = 0
        """Deferred answers not yet written."""
        self._tail: asyncio.Future[None] | None = None
        """Done once the newest deferred answer is written (answers go in order)."""
        self._arrivals: deque[float] = deque()
        """When each complete frame not yet taken arrived (``perf_counter``), oldest
        first: as many as ``conn.buffered_frames``."""
        self._out: list[Any] = []
        """Answer parts written this turn and not yet sent, in answer order."""
        self._flush_due = False
        """A ``_flush`` is scheduled (``call_soon``)."""

    # -- protocol callbacks -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; duck-type them.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.ip = str(peer[0]) if peer else "?"
        if self.server.draining:  # accepted from the backlog while stopping
            self._closed = True
            transport.close()
            return
        ip_rate = self.state.quotas.connection_rate(self.ip)
        reason = self.server.limits.admit(self.ip, int(self.server.loop_time() * 1000), ip_rate)
        if reason is not None:
            self.server.log_rejected(self.peer, reason)
            self._closed = True
            self.transport.close()
            return
        self._admitted = True
        self.server.connections.add(self)
        self.server.opened(self.listener)
        self._task = asyncio.get_running_loop().create_task(self._serve())
        self.server.tasks.add(self._task)
        self._task.add_done_callback(self.server.tasks.discard)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        conn = self.conn
        try:
            conn.buffer_updated(nbytes)
        except FrameError as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
            return
        self.last_active = self.server.loop_time()
        if conn.buffered_frames:
            arrivals = self._arrivals
            if len(arrivals) < conn.buffered_frames:
                now = perf_counter()
                while len(arrivals) < conn.buffered_frames:
                    arrivals.append(now)
            self._wake.set()
            if conn.buffered_frames >= self.server.max_queued_requests:
                self._pause("queue")
        if self._granted and not conn.receiving:
            self._granted = False
            self.server.granted = None
        memory = conn.memory
        if memory.used >= memory.limit and not self._granted:
            if "memory" not in self._pauses:
                self.server.stats["memory_paused"] += 1
            self._pause("memory")
            self.server.memory_waiters.add(self)
            self.server.memory_changed()

    def _pause(self, reason: str) -> None:
        if not self._pauses and self.transport is not None:
            self.transport.pause_reading()
        self._pauses.add(reason)

    def _resume(self, reason: str) -> None:
        if reason not in self._pauses:
            return
        self._pauses.discard(reason)
        if not self._pauses and self.transport is not None and not self._closed:
            self.transport.resume_reading()

    def eof_received(self) -> bool | None:
        self._wake.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wake.set()
        server = self.server
        server.connections.discard(self)
        if self._admitted:
            self._admitted = False
            server.limits.release(self.ip)
            server.closed[self.listener] += 1
        self.conn.close()
        server.memory_waiters.discard(self)
        if server.granted is self:
            server.granted = None
        if server.memory_waiters:
            server.memory_changed()

    # -- serving --------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self.transport is not None:
            self._flush()
            self.transport.close()

    async def _serve(self) -> None:
        budget = TurnBudget()
        budget.start(perf_counter())
        try:
            while not self._closed and not self.server.draining:
                event = self.conn.next_event()
                if event is None:
                    if "queue" in self._pauses:
                        self._resume("queue")
                    self._wake.clear()
                    await self._wake.wait()
                    budget.start(perf_counter())
                    continue
                if budget.spent(perf_counter()):
                    # Served enough this turn (64 requests or 5 ms): let the loop
                    # read and serve the other connections (and send the answers
                    # made) first.
                    await asyncio.sleep(0)
                    budget.start(perf_counter())
                budget.begin()
                self.busy = True
                finished = True
                received = self._arrivals.popleft() if self._arrivals else -1.0
                try:
                    if isinstance(event, BadRequest):
                        await self._in_order()
                        if not self._answer_bad_request(event):
                            self.close()
                        continue
                    if isinstance(event, RawToken):
                        await self._in_order()
                        self._raw_token(event)
                        continue
                    finished = await self._handle(event, received)
                finally:
                    self.busy = False
                    self.last_active = self.server.loop_time()
                    if finished:
                        self._released(event.size)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing %s after an internal error", self.peer)
            self.close()

    def _raw_token(self, event: RawToken) -> None:
        """A raw SASL token (SaslHandshake v0); never sent on a plaintext listener."""
        log.info("closing %s: a raw SASL token outside SASL authentication", self.peer)
        self.close()

    def _answer_bad_request(self, event: BadRequest) -> bool:
        log.info(
            "bad request from %s: api %d v%d %s %s",
            self.peer, event.api_key, event.api_version, event.reason, event.detail,
        )
        corr = event.correlation_id
        if event.api_key == 18 and event.reason == "unsupported_version" and corr is not None:
            self._write(encode_response(18, 0, corr, unsupported_version_response()))
            return True
        return False

    def _released(self, size: int) -> None:
        self.conn.release(size)
        if self.server.memory_waiters:
            self.server.memory_changed()

    async def _in_order(self) -> None:
        """Wait until every deferred answer before this one is written."""
        tail = self._tail
        if tail is not None and not tail.done():
            await tail

    def _defer(self, call: Call, deferred: Deferred) -> None:
        loop = asyncio.get_running_loop()
        before, done = self._tail, loop.create_future()
        self._tail = done
        self._deferred += 1
        task = loop.create_task(self._finish(call, deferred, before, done))
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    async def _finish(self, call: Call, deferred: Deferred,
                      before: asyncio.Future[None] | None, done: asyncio.Future[None]) -> None:
        """A deferred answer: wait for it, then for the answers before it, write it."""
        req, ctx = call.request, call.ctx
        try:
            try:
                body = await deferred.answer
            except CloseConnection as exc:
                log.info("closing %s: %s", self.peer, exc)
                self.close()
                return
            if before is not None and not before.done():
                await before
            if not self._closed:
                began = perf_counter()
                if body is not None:
                    self._write(encode_response(req.api_key, req.api_version,
                                                req.correlation_id, body))
                timer = self.server.request_metrics
                if timer is not None:
                    timer.sent(call, began, perf_counter() if body is not None else began)
            if ctx.throttle_ms and not self._closed:
                self.server.stats["throttled"] += 1
                self._pause("throttle")
                try:
                    await asyncio.sleep(ctx.throttle_ms / 1000)
                finally:
                    self._resume("throttle")
        except Exception:
            log.exception("closing %s after an internal error", self.peer)
            self.close()
        finally:
            if not done.done():
                done.set_result(None)
            self._deferred -= 1
            self.last_active = self.server.loop_time()
            self._released(req.size)

    def _new_authz(self) -> Authz:
        authorizer = self.server.authorizer
        if authorizer is not None:
            self._authz = authorizer.session(self.principal, self.ip)
        self._authz_for = self.principal
        return self._authz

    async def _handle(self, req: Request, received: float = -1.0) -> bool:
        """Serve one request through the server's :class:`Pipeline`; False when
        its answer was deferred (it releases the request's memory itself). A
        Produce is served at once (its appends are assigned in request order);
        anything else after the deferred answers before it are written, as Kafka
        serves a connection one request at a time. ``received``: when its last
        byte arrived (``perf_counter``; -1 unknown), for the request's timing."""
        if req.api_key != 0:
            await self._in_order()
        ctx = RequestContext(self.state, req.api_version, req.header, self.peer, req.size,
                             listener=self.listener,
                             security_protocol=self.security_protocol,
                             principal=self.principal,
                             authz=self._authz if self._authz_for == self.principal
                             else self._new_authz(),
                             services=self.server.services, channel=self.channel)
        # registration() imports the API's module on its first request.
        call = Call(req, registration(req.api_key), ctx, received=received)
        try:
            body = await self.server.pipeline.run(call)
        except CloseConnection as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
            return True
        if isinstance(body, Deferred):
            self._defer(call, body)
            return False
        if not self._closed:
            if body is not None:
                await self._in_order()
                began = perf_counter()
                version = (call.response_version if call.response_version >= 0
                           else req.api_version)
                self._write(encode_response(req.api_key, version, req.correlation_id, body))
                written = perf_counter()
            else:
                began = written = perf_counter()
            timer = self.server.request_metrics
            if timer is not None:
                timer.sent(call, began, written)
        throttle = ctx.throttle_ms
        if throttle and not self._closed:
            # KIP-219: the answer goes out at once; then the connection is muted
            # (nothing read or served on it) for the throttle time.
            self.server.stats["throttled"] += 1
            self._pause("throttle")
            try:
                await asyncio.sleep(throttle / 1000)
            finally:
                self._resume("throttle")
        return True

    def _write(self, parts: list[Any]) -> None:
        """Queue an answer's parts; they go out with this turn's other answers.
        An answer with file slices (a Fetch's records) goes out at once, with
        whatever is queued before it: a slice's descriptor may be closed by the
        handle cache once the loop moves on."""
        if self.transport is None or self.transport.is_closing():
            return
        self._out.extend(parts)
        if not all(isinstance(p, bytes | bytearray | memoryview) for p in parts):
            self._flush()
        elif not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send the answers queued since the last flush, in order, in one
        ``write_parts`` (small ones are joined into one send)."""
        self._flush_due = False
        parts, self._out = self._out, []
        if parts and self.transport is not None and not self.transport.is_closing():
            write_parts(self.transport, parts)


_CONNECTION_LIMIT_KEYS = frozenset({"max.connections", "max.connections.per.ip",
                                    "max.connections.per.ip.overrides",
                                    "max.connection.creation.rate"})


class SslConnection(KafkaConnection):
    """A connection on an SSL listener. The TLS handshake is done before
    ``connection_made`` (asyncio and uvloop both call it after the handshake);
    the principal is ``User:<DN>``, the client certificate's subject in RFC 2253
    form mapped by the listener's ``ssl.principal.mapping.rules``, or
    ``User:ANONYMOUS`` without a client certificate. A DN no rule maps is
    refused: the connection is closed, as Kafka closes it."""

    security_protocol = "SSL"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tls = self.server.tls.get(self.listener)
        try:
            self.principal = peer_principal(transport, tls.mapper if tls else None)
        except NoMatchingRule as exc:
            log.info("closing TLS connection from %s on %s: %s",
                     transport.get_extra_info("peername"), self.listener, exc)
            self._closed = True
            transport.close()
            return
        log.debug("TLS connection from %s on %s: principal %s",
                  transport.get_extra_info("peername"), self.listener, self.principal)
        super().connection_made(transport)


def peer_principal(transport: asyncio.BaseTransport, mapper: PrincipalMapper | None) -> str:
    """``User:<mapped subject DN>`` of the peer's certificate; ``User:ANONYMOUS``
    when it sent none."""
    sslobj = transport.get_extra_info("ssl_object")
    der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
    if not der:
        return ANONYMOUS
    from cryptography import x509

    dn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    return f"User:{(mapper or PrincipalMapper()).name(dn)}"


SSL_HANDSHAKE_TIMEOUT_S = 10.0
"""A TLS client that has not finished its handshake by then is disconnected."""

LISTENER_KINDS: dict[str, type[KafkaConnection]] = {
    "PLAINTEXT": KafkaConnection, "SSL": SslConnection}
"""The connection class of each security protocol served (SASL_*: :func:`listener_kind`).
A listener whose protocol ends in SSL gets its listener's TLS context
(broker/net/tls.py)."""
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def listener_kind(protocol: str) -> type[KafkaConnection] | None:
    """The connection class of a listener's security protocol; the SASL kinds
    (broker/net/sasl/connection.py) are imported only by a broker that has one."""
    if protocol in SASL_PROTOCOLS:
        from odradek.broker.net.sasl.connection import SASL_KINDS

        return SASL_KINDS[protocol]
    return LISTENER_KINDS.get(protocol)


class KafkaServer:
    """Listeners bound to one :class:`BrokerState`, and the request pipeline
    every connection's requests go through."""

    def __init__(self, state: BrokerState, services: Services,
                 metrics: Registry | None = None,
                 stages: list[tuple[Stage, str]] | None = None,
                 forward: Stage | None = None, tls: ListenerTls | None = None) -> None:
        """``forward``: a cluster node's controller-forwarding stage
        (broker/net/forward.py); ``stages``: (stage, the stage it goes before)
        added to the pipeline; ``tls``: the TLS listeners' contexts (built from
        the config when not given)."""
        self.state = state
        self.tls = tls if tls is not None else ListenerTls.for_config(state.config)
        self.services = services
        config = state.config
        self.metrics = metrics if metrics is not None else Registry()
        self.authorizer: AclAuthorizer | None = authz.from_config(
            config, lambda: state.image, lambda: state.metadata_ready)
        """The ACL authorizer (None: ``authorizer.class.name`` is not set)."""
        protocols = effective_protocol_map(config)
        self.sasl_listeners = [lis.name for lis in config.listeners()
                               if protocols.get(lis.name) in SASL_PROTOCOLS]
        self.sasl_settings: dict[str, SessionSettings] = {}
        """Each SASL listener's settings, read at start."""
        authenticate: Stage | None = None
        if self.sasl_listeners:
            from odradek.broker.net.sasl.stage import SaslAuthenticate

            authenticate = SaslAuthenticate()
        self.pipeline: Pipeline = default_stages(Stages(
            self.metrics, self.state.quotas, lambda: self.loop_time() * 1000,
            unsupported_version_response, forward, self.authorizer is not None,
            list(stages or ()), authenticate=authenticate))
        self.request_metrics: RequestMetrics | None = next(
            (s for s in self.pipeline.stages if isinstance(s, RequestMetrics)), None)
        """The pipeline's ``metrics`` stage, told when each answer is written."""
        self.connections: set[KafkaConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        """Every connection's serving task until it ends (closed connections too)."""
        self._servers: list[asyncio.Server] = []
        self.draining = False
        bound = config.get_int("queued.max.request.bytes")
        self.memory = RequestMemory(UNBOUNDED if bound < 0 else bound)
        # A single request larger than the memory bound is refused like an oversized one.
        self.max_frame_bytes = min(config.get_int("socket.request.max.bytes"), self.memory.limit)
        self.max_queued_requests = config.get_int("queued.max.requests")
        self.idle_ms = config.get_int("connections.max.idle.ms")
        self.limits = ConnectionLimits.from_config(config)
        state.on_config_change.append(self._config_changed)
        self.memory_waiters: set[KafkaConnection] = set()
        """Connections not reading because request memory is exceeded."""
        self.granted: KafkaConnection | None = None
        self.stats: Counter[str] = Counter()
        """Events worth counting: "idle_closed", "memory_paused", "memory_granted"."""
        self.created: Counter[str] = Counter()
        """Connections admitted since the start, by listener name (the metrics'
        ``connection_creation_total``); :attr:`closed` those closed since."""
        self.closed: Counter[str] = Counter()
        self.creation_rates: dict[str, Windowed] = {}
        """Admissions by listener over Kafka's 2 x 30 s windows (``connection_creation_rate``)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._preloader: asyncio.Task[None] | None = None
        self._jwks_tasks: list[asyncio.Task[None]] = []
        self._last_rejection_log = -1e9

    def _config_changed(self, names: set[str]) -> None:
        """Dynamic broker configs changed: the connection limits follow."""
        if names & _CONNECTION_LIMIT_KEYS:
            self.limits.reconfigure(self.state.config)
        if any(is_dynamic_ssl_key(n) for n in names):
            self.tls.reconfigure(self.state.config, names)

    def opened(self, listener: str) -> None:
        """A connection was admitted on ``listener`` (counted for the metrics)."""
        self.created[listener] += 1
        rate = self.creation_rates.get(listener)
        if rate is None:
            rate = self.creation_rates[listener] = Windowed()
        rate.record(1, self.loop_time() * 1000)

    def loop_time(self) -> float:
        loop = self._loop
        return loop.time() if loop is not None else 0.0

    def log_rejected(self, peer: str, reason: str) -> None:
        # At most one line a second: a connection flood must not flood the log too.
        now = self.loop_time()
        if now - self._last_rejection_log >= 1.0:
            self._last_rejection_log = now
            log.warning("closing new connection from %s: %s reached (%s so far)",
                        peer, reason, dict(self.limits.rejected))

    def memory_changed(self) -> None:
        """Resume readers when request memory is back under its bound; if it is
        not and nothing queued can give memory back, let one connection through."""
        waiters = self.memory_waiters
        if not waiters:
            return
        memory = self.memory
        if memory.used < memory.limit:
            for conn in waiters:
                conn._resume("memory")
            waiters.clear()
            return
        if memory.releasable > 0 or self.granted is not None:
            return
        # Prefer the frame closest to complete; a connection between frames last.
        chosen = min(waiters, key=lambda c: (c.conn.frame_remaining == 0, c.conn.frame_remaining))
        waiters.discard(chosen)
        chosen._granted = True
        self.granted = chosen
        self.stats["memory_granted"] += 1
        chosen._resume("memory")

    async def _sweep_idle(self) -> None:
        """Close connections idle for ``connections.max.idle.ms``."""
        period = min(max(self.idle_ms / 4000, 0.01), 5.0)
        while True:
            await asyncio.sleep(period)
            deadline = self.loop_time() - self.idle_ms / 1000
            for conn in list(self.connections):
                if (conn.last_active < deadline and not conn.busy and not conn._deferred
                        and not conn.conn.buffered_frames):
                    log.info("closing %s: idle for connections.max.idle.ms", conn.peer)
                    self.stats["idle_closed"] += 1
                    conn.close()

    async def start(self, before_serving: Callable[[], Awaitable[None]] | None = None) -> None:
        """Bind every listener, then run ``before_serving`` (a single node registers
        its bound ports: no request is answered from the previous run's
        registration), then accept connections."""
        loop = self._loop = asyncio.get_running_loop()
        if self.idle_ms > 0:
            self._sweeper = loop.create_task(self._sweep_idle())
        protocols = effective_protocol_map(self.state.config)
        if self.sasl_listeners:
            from odradek.broker.net.sasl.connection import prepare_listeners

            self.sasl_settings, self._jwks_tasks = await prepare_listeners(
                self.state.config, self.sasl_listeners, self.state)
        for listener in self.state.config.listeners():
            protocol = protocols.get(listener.name, "PLAINTEXT")
            kind = listener_kind(protocol)
            if kind is None:
                raise ConfigError(f"listener {listener.name}: security protocol {protocol} "
                                  "is not served yet")
            tls = self.tls.get(listener.name)
            secure: dict[str, Any] = {} if tls is None else {
                "ssl": tls.context, "ssl_handshake_timeout": SSL_HANDSHAKE_TIMEOUT_S}
            server = await loop.create_server(
                lambda name=listener.name, kind=kind: kind(self, name),
                listener.host or None, listener.port,
                reuse_address=True, start_serving=False, **secure,
            )
            self._servers.append(server)
        self.state.advertised = self._advertised()
        if before_serving is not None:
            await before_serving()
        for server in self._servers:
            await server.start_serving()
        self._preloader = loop.create_task(self._preload_handlers())

    async def _preload_handlers(self) -> None:
        """Import :data:`PRELOADED_APIS`' handlers, yielding to requests between
        modules (a request waits for at most one module's import)."""
        for key in PRELOADED_APIS:
            await asyncio.sleep(0)
            try:
                registration(key)
            except Exception:  # a broken module fails its own requests, visibly
                log.exception("importing the handler of API %d failed", key)

    def _advertised(self) -> list[Any]:
        from odradek.broker.config import Listener

        bound = self.bound_ports()
        config = self.state.config
        # An advertised port 0 is the bound port of the listener of that name
        # (by position when no listener has the name, as before).
        by_name = {lis.name: i for i, lis in enumerate(config.listeners())}
        out = []
        for i, adv in enumerate(config.advertised_listeners()):
            j = by_name.get(adv.name, i)
            port = adv.port or (bound[j] if j < len(bound) else adv.port)
            out.append(Listener(adv.name, adv.host or "127.0.0.1", port))
        # Clients are told only of broker listeners, never of controller ones.
        controllers = set(config.controller_listener_names())
        return [a for a in out if a.name not in controllers]

    def bound_ports(self) -> list[int]:
        return [s.sockets[0].getsockname()[1] for s in self._servers if s.sockets]

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Stop accepting, let each connection finish the request it is serving
        (long polls are woken to answer now; in a cluster, waits for followers
        end with NOT_LEADER_OR_FOLLOWER), then close every connection."""
        for server in self._servers:
            server.close()
        self.draining = True
        await cancel_and_wait(self._preloader, self._sweeper, *self._jwks_tasks)
        self._preloader = self._sweeper = None
        self._jwks_tasks.clear()
        for part in self.state.partitions.partitions.values():
            # A produce waiting for its followers is not acknowledged and not
            # answered: its connection closes (BrokerStopping says why) and the
            # client retries at the next leader. When the whole cluster stops,
            # the followers it waits for are stopping too, and the drain would
            # wait its whole timeout for them. (A single node's HW is its log
            # end: nothing waits for it, and this only wakes the long polls.)
            part.stopping()
        self.services.groups.release_waiting()
        for conn in list(self.connections):
            conn._wake.set()
        tasks = [c._task for c in list(self.connections) if c._task]
        if tasks:
            await asyncio.wait(tasks, timeout=drain_timeout_s)
        for conn in list(self.connections):
            conn.close()
        await cancel_and_wait(*self.tasks)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
