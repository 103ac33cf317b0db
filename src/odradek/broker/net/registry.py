"""Handler registration: each API module registers the versions it serves.

The ApiVersions answer is built from the table of handler modules
(``odradek.broker.handlers.SERVED``), and a module registers only the versions
its row names, so a version is advertised if and only if a handler serves it
(DESIGN.md decision 2). A registration may advertise versions it answers only
with UNSUPPORTED_VERSION (Produce 0–2: librdkafka checks that Produce v0 is
advertised, KAFKA-18659).

Handler modules are imported on the first request of their API
(:func:`registration`), not at start-up; :data:`HANDLERS` holds the ones
imported so far, :func:`load_all` imports the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from odradek.broker.handlers import SERVED

if TYPE_CHECKING:
    from odradek.broker.net.context import RequestContext

class CloseConnection(Exception):
    """Raised by a handler to close the client's connection instead of answering."""


@dataclass(frozen=True, slots=True)
class Deferred:
    """A handler's answer that is still waiting (a Produce waiting for its writes
    and acknowledgements): the connection goes on serving its next requests
    meanwhile, and the answers still go out in request order. Only returned
    once everything the request changes has been decided (appends assigned)."""

    answer: Awaitable[Any]


Operation = Literal["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
                    "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"]
ResourceType = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]


@dataclass(frozen=True, slots=True)
class Access:
    """One check Kafka's authorizer makes for a request: ``operation`` on the
    resources of ``resource`` it names (the cluster is one resource, ``kafka-cluster``).
    ``when`` says when it applies if not always ("a transactional batch").
    Each handler declares its API's checks (``@handler(..., access=...)``). With
    an authorizer, the pipeline's ``authorize`` stage makes those on the CLUSTER
    with no ``when`` for every request (:attr:`Registration.access`); the
    handler makes the others, per resource, through ``ctx.authz``
    (broker/handlers/acl_checks.py)."""

    operation: Operation
    resource: ResourceType
    when: str = ""


Handler = Callable[["RequestContext", Any], Awaitable[Any]]
ErrorResponder = Callable[[Any, int], Any]


@dataclass(frozen=True, slots=True)
class Registration:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    rejected_versions: tuple[int, int] | None = None
    error_response: ErrorResponder | None = None
    access: tuple[Access, ...] = ()
    """What a request of this API touches (empty: ApiVersions, answered before
    authentication)."""

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def rejects(self, version: int) -> bool:
        r = self.rejected_versions
        return r is not None and r[0] <= version <= r[1]


HANDLERS: dict[int, Registration] = {}
"""The registrations of the handler modules imported so far, by API key."""

CHECK_SERVED = True
"""Refuse a registration that differs from ``handlers.SERVED`` (off only while
``tools/handler_table.py`` rebuilds that table)."""


def handler(
    api_key: int,
    versions: tuple[int, int],
    *,
    rejected_versions: tuple[int, int] | None = None,
    error_response: ErrorResponder | None = None,
    access: tuple[Access, ...] | None = None,
) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``api_key`` for ``versions`` (inclusive);
    ``access``: what its requests touch, as Kafka's authorizer checks them (every
    handler declares it, an empty tuple for none)."""
    if access is None:
        raise RuntimeError(f"API {api_key}: a handler declares its access (access=...)")

    def register(fn: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"API {api_key} registered twice")
        row = SERVED.get(api_key)
        if CHECK_SERVED and (row is None or row[1] != versions):
            raise RuntimeError(f"API {api_key} versions {versions} differ from handlers.SERVED "
                               "(python -m tools.handler_table rewrites it)")
        if rejected_versions is not None and error_response is None:
            raise RuntimeError(f"API {api_key} rejects versions but has no error response")
        HANDLERS[api_key] = Registration(
            api_key, versions[0], versions[1], fn, rejected_versions, error_response, access
        )
        return fn

    return register


def registration(api_key: int) -> Registration | None:
    """The handler of ``api_key``, importing its module on first use; None when
    no module serves that API."""
    reg = HANDLERS.get(api_key)
    if reg is None and api_key in SERVED:
        importlib.import_module(f"odradek.broker.handlers.{SERVED[api_key][0]}")
        reg = HANDLERS[api_key]
    return reg


def load_all() -> dict[int, Registration]:
    """Import every handler module (tests, tools); returns :data:`HANDLERS`."""
    for key in SERVED:
        registration(key)
    return HANDLERS


def advertised() -> list[tuple[int, int, int]]:
    """(api key, min version, max version) for every served API, by key."""
    return [(key, lo, hi) for key, (_module, (lo, hi)) in sorted(SERVED.items())]
