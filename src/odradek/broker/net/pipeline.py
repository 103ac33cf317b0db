"""The request pipeline: what a decoded request passes through on its way from
its frame to its handler, one stage after another.

A stage is ``async (call, proceed) -> answer``: it may answer by itself (an
error response, or a forwarded answer), raise :class:`CloseConnection` to close
the client's connection, or ``await proceed(call)`` and look at or change what
comes back. The answer is a response body, a :class:`Deferred` (a Produce still
waiting for its writes) or None (no answer: acks=0). The stages, outermost
first (:func:`default_stages`):

1. ``metrics``: counts the request, its bytes, the error codes of its answer
   and times it, phase by phase, by API (:class:`RequestMetrics`,
   broker/net/request_metrics.py); outermost, so a request a later stage
   refuses is counted too.
2. ``version``: the version gate. An API or version this broker does not serve
   closes the connection (ApiVersions gets its v0 UNSUPPORTED_VERSION answer,
   KIP-511); a version advertised only to be refused gets the API's
   UNSUPPORTED_VERSION body.
3. ``authenticate``: the principal of the connection is on the context
   (``User:ANONYMOUS`` on a PLAINTEXT listener). With SASL listeners, the
   stage of :mod:`odradek.broker.net.sasl.stage`: before authentication only
   ApiVersions and the SASL requests are served (answered by the connection's
   session), anything else closes the connection; a pass-through otherwise.
4. ``authorize``: each handler declares what a request touches
   (:attr:`Registration.access`, Kafka's authorization table); with an
   authorizer configured, the cluster-level checks are made here
   (:class:`Authorize`) and the per-resource ones by the handler through
   ``ctx.authz``. Without one, left out of the chain.
5. ``quota``: request-time quotas (``request_percentage``): the time spent
   below this stage, less what the handler waited, is charged to the client;
   the throttle (with any byte-rate throttle a handler set) goes into the
   answer's ``throttle_time_ms`` and on the context, where the connection
   mutes itself for it after writing the answer (KIP-219).
6. ``forward``: in a cluster, the admin requests only the active controller may
   decide are sent to it (KIP-590, :mod:`odradek.broker.control.controller_channel`),
   waiting for a leader when none is known; a handler that finds this node no
   longer controller is answered NOT_CONTROLLER.
7. ``dispatch``: the handler.

Stages are composed once, when the pipeline is built or changed, into one chain
of calls; a request costs one coroutine frame per stage. :meth:`Pipeline.add`
puts a new stage before a named one: that is where TLS, SASL and ACLs come in
without touching the connection class.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.net.registry import CloseConnection, Deferred, Registration
from odradek.broker.net.request_metrics import ApiCells
from odradek.broker.net.request_metrics import RequestMetrics as RequestMetrics
from odradek.broker.net.request_metrics import error_codes as error_codes
from odradek.common.metrics import Registry
from odradek.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.net.context import RequestContext
    from odradek.broker.net.quotas import QuotaManager
    from odradek.wire.frames import Request


@dataclass(slots=True)
class Call:
    """One request on its way through the pipeline."""

    request: Request
    registration: Registration | None
    """The API's handler; None when no handler serves its key (the version gate
    closes the connection)."""
    ctx: RequestContext
    response_version: int = -1
    """The version the answer is encoded at; -1: the request's (ApiVersions'
    UNSUPPORTED_VERSION answer is v0)."""
    received: float = -1.0
    """When the connection had the request's last byte (``time.perf_counter``
    seconds; -1: unknown). The stamps below are the ``metrics`` stage's
    (broker/net/request_metrics.py)."""
    started: float = 0.0
    decided: float = 0.0
    local: float = 0.0
    remote: float = 0.0
    cells: ApiCells | None = None
    """The API's series in the ``metrics`` stage (None: not seen by it)."""

    @property
    def api_key(self) -> int:
        return self.request.api_key


Proceed = Callable[[Call], Awaitable[Any]]


class Stage(Protocol):
    """One step of the pipeline (see the module docstring)."""

    name: str

    async def __call__(self, call: Call, proceed: Proceed) -> Any: ...


class Pipeline:
    """The stages in order; :meth:`run` sends a call through all of them."""

    def __init__(self, stages: list[Stage]) -> None:
        if not stages or stages[-1].name != "dispatch":
            raise ValueError("the last stage of a pipeline must be dispatch")
        self.stages = list(stages)
        self.run: Proceed = self._compose()

    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    def add(self, stage: Stage, *, before: str) -> None:
        """Put ``stage`` in front of the stage named ``before``."""
        names = self.names()
        if before not in names:
            raise ValueError(f"no stage {before!r} in the pipeline ({', '.join(names)})")
        if stage.name in names:
            raise ValueError(f"the pipeline has a stage {stage.name!r} already")
        self.stages.insert(names.index(before), stage)
        self.run = self._compose()

    def remove(self, name: str) -> None:
        if name == "dispatch":
            raise ValueError("the dispatch stage cannot be removed")
        self.stages = [s for s in self.stages if s.name != name]
        self.run = self._compose()

    def _compose(self) -> Proceed:
        """One callable for the whole chain: each stage bound to the next with
        ``functools.partial`` (a request costs one coroutine frame per stage);
        a stage whose ``passthrough`` is true (today's authenticate and
        authorize) is left out of the chain but kept in :attr:`stages`."""
        *outer, last = self.stages
        chain: Proceed = functools.partial(last, proceed=_no_further)
        for stage in reversed(outer):
            if not getattr(stage, "passthrough", False):
                chain = functools.partial(stage, proceed=chain)
        return chain


async def _no_further(call: Call) -> Any:
    raise RuntimeError("the dispatch stage has no stage after it")


# -- the stages ------------------------------------------------------------------


class VersionGate:
    name = "version"

    def __init__(self, unsupported_api_versions: Callable[[], Any]) -> None:
        self.unsupported_api_versions = unsupported_api_versions

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        reg, version = call.registration, call.request.api_version
        if reg is None or not reg.serves(version):
            if call.api_key == 18:
                call.response_version = 0
                return self.unsupported_api_versions()
            raise CloseConnection(f"api {call.api_key} v{version} not served")
        if reg.rejects(version):
            assert reg.error_response is not None
            return reg.error_response(call.request.body, ErrorCode.UNSUPPORTED_VERSION)
        return await proceed(call)


class Authenticate:
    """Pass-through until SASL: a PLAINTEXT connection's principal is
    ``User:ANONYMOUS``, set when the connection is made."""

    name = "authenticate"
    passthrough = True

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        return await proceed(call)


class Authorize:
    """The whole-request checks a handler declares: every :class:`Access` on the
    CLUSTER with no ``when`` (Kafka's cluster-level checks, e.g. ALTER on the
    cluster for ElectLeaders, CLUSTER_ACTION for the inter-broker APIs). A
    denied request is answered with CLUSTER_AUTHORIZATION_FAILED in the API's
    error body (:func:`denied_response`) and goes no further (not forwarded, not
    handled). Per-resource checks are the handlers' (``ctx.authz``). With no
    authorizer configured the stage is left out of the chain (``passthrough``)."""

    name = "authorize"

    def __init__(self, enabled: bool = False) -> None:
        self.passthrough = not enabled
        self._checks: dict[int, tuple[int, ...]] = {}

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        reg = call.registration
        if reg is not None:
            checks = self._checks.get(reg.api_key)
            if checks is None:
                checks = self._checks[reg.api_key] = cluster_checks(reg)
            if checks:
                authz = call.ctx.authz
                for op in checks:
                    if not authz.allowed(op, CLUSTER_RESOURCE, CLUSTER_NAME):
                        return denied_response(reg, call.request.body,
                                               ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                               call.request.api_version)
        return await proceed(call)


CLUSTER_RESOURCE = ResourceType.CLUSTER.value


def cluster_checks(reg: Registration) -> tuple[int, ...]:
    """The operation codes (Kafka's AclOperation) the ``authorize`` stage checks
    on the cluster for every request of ``reg``'s API."""
    return tuple(AclOperation[a.operation].value for a in reg.access
                 if a.resource == "CLUSTER" and not a.when)


def denied_response(reg: Registration, request: Any, code: int, version: int) -> Any:
    """The API's answer refusing the whole request with ``code`` at ``version``:
    its own error body (:attr:`Registration.error_response`, per item) when it
    declares one, else its empty response (DescribeLogDirs before v3 answers a
    refusal with no results, as Kafka does); the top-level ``error_code`` is set
    too where ``version`` has one."""
    if reg.error_response is not None:
        body = reg.error_response(request, code)
    else:
        from odradek.wire.api import response_class

        body = response_class(reg.api_key)()
    top = next((f for f in getattr(body, "FIELDS", ()) if f.name == "error_code"), None)
    if top is not None and top.versions[0] <= version <= top.versions[1]:
        body.error_code = code
    return body


REQUEST_QUOTA = "request_percentage"
UNTHROTTLED_APIS = frozenset({18})
"""Never charged request time (ApiVersions), as in Kafka."""


class RequestQuota:
    name = "quota"

    def __init__(self, quotas: QuotaManager, now_ms: Callable[[], float]) -> None:
        self.quotas = quotas
        self.now_ms = now_ms

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        quotas = self.quotas
        timed = call.api_key not in UNTHROTTLED_APIS and quotas.active(REQUEST_QUOTA)
        started = time.perf_counter() if timed else 0.0
        body = await proceed(call)
        if isinstance(body, Deferred):
            return body  # its byte-rate throttle (ctx.throttle_ms) applies when answered
        ctx = call.ctx
        throttle = ctx.throttle_ms
        if timed:
            busy = max(time.perf_counter() - started - ctx.waited_s, 0.0)
            throttle = max(throttle, quotas.charge(REQUEST_QUOTA, ctx.client_id, busy * 100,
                                                   self.now_ms(), user=ctx.user))
        if throttle and body is not None and hasattr(body, "throttle_time_ms"):
            body.throttle_time_ms = max(body.throttle_time_ms, throttle)
        ctx.throttle_ms = throttle
        return body


class Dispatch:
    name = "dispatch"

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        assert call.registration is not None
        return await call.registration.handle(call.ctx, call.request.body)


@dataclass(slots=True)
class Stages:
    """The default stages' collaborators (built by the server)."""

    metrics: Registry
    quotas: QuotaManager
    now_ms: Callable[[], float]
    unsupported_api_versions: Callable[[], Any]
    forward: Stage | None = None
    """The controller-forwarding stage of a cluster node (None on one node)."""
    authorize: bool = False
    """An authorizer is configured: the ``authorize`` stage checks."""
    extra: list[tuple[Stage, str]] = field(default_factory=list)
    """(stage, the stage it goes before) added after the defaults."""
    authenticate: Stage | None = None
    """The SASL authenticate stage (broker/net/sasl/stage.py) when a listener is
    SASL_*; else the pass-through :class:`Authenticate`."""


def default_stages(parts: Stages) -> Pipeline:
    stages: list[Stage] = [
        RequestMetrics(parts.metrics), VersionGate(parts.unsupported_api_versions),
        parts.authenticate or Authenticate(), Authorize(parts.authorize),
        RequestQuota(parts.quotas, parts.now_ms)]
    if parts.forward is not None:
        stages.append(parts.forward)
    stages.append(Dispatch())
    pipeline = Pipeline(stages)
    for stage, before in parts.extra:
        pipeline.add(stage, before=before)
    return pipeline
