"""``/acls``, ``/quotas`` and ``/users``: list, create and delete ACLs, client
quotas and SCRAM credentials. A cluster without an authorizer (or one that
refuses this client) answers the listing with an error, shown on the page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from odradek.client import access
from odradek.client.client import KafkaClient
from odradek.client.connection import KafkaError, UnsupportedApi
from odradek.console.web import BadForm, back, console, field, form, int_field, render

routes = web.RouteTableDef()
T = TypeVar("T")
QUOTA_ENTITIES = ("user", "client-id", "ip")
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_ITERATIONS = 16384
"""Kafka's bound on SCRAM iterations (and its lower one, 4096, is the form's minimum)."""


async def _listing(request: web.Request,
                   work: Callable[[KafkaClient], Awaitable[list[T]]]) -> tuple[list[T], str | None]:
    try:
        return await console(request).run(work), None
    except (KafkaError, UnsupportedApi) as exc:
        return [], str(exc)


def _choice(data: dict[str, str], name: str, names: dict[int, str]) -> int:
    value = field(data, name)
    for number, text in names.items():
        if text == value:
            return number
    raise BadForm(f"{name!r} is one of {', '.join(names.values())}")


def _acl(data: dict[str, str]) -> access.Acl:
    return access.Acl(
        _choice(data, "resource_type", access.RESOURCE_TYPES), field(data, "name"),
        _choice(data, "pattern_type", access.PATTERN_TYPES), field(data, "principal"),
        field(data, "host", "*"), _choice(data, "operation", access.OPERATIONS),
        _choice(data, "permission", access.PERMISSIONS))


async def _act(url: str, ok: str, request: web.Request,
               work: Callable[[KafkaClient], Awaitable[Any]]) -> web.HTTPSeeOther:
    try:
        await console(request).run(work)
    except KafkaError as exc:
        return back(url, error=str(exc))
    return back(url, ok=ok)


@routes.get("/acls")
async def acls(request: web.Request) -> web.Response:
    rows, problem = await _listing(request, access.list_acls)
    return render(request, "acls.html", acls=[a.named() for a in rows], problem=problem,
                  resource_types=access.RESOURCE_TYPES.values(),
                  pattern_types=access.PATTERN_TYPES.values(),
                  operations=access.OPERATIONS.values(), permissions=access.PERMISSIONS.values())


@routes.post("/acls")
async def create_acl(request: web.Request) -> web.StreamResponse:
    acl = _acl(await form(request))
    raise await _act("/acls", "ACL created", request, lambda c: access.create_acl(c, acl))


@routes.post("/acls/delete")
async def delete_acl(request: web.Request) -> web.StreamResponse:
    acl = _acl(await form(request))
    raise await _act("/acls", "ACL deleted", request, lambda c: access.delete_acl(c, acl))


@routes.get("/quotas")
async def quotas(request: web.Request) -> web.Response:
    rows, problem = await _listing(request, access.list_quotas)
    return render(request, "quotas.html", quotas=rows, problem=problem, entities=QUOTA_ENTITIES)


def _entity(data: dict[str, str]) -> list[tuple[str, str | None]]:
    kind = field(data, "entity_type")
    if kind not in QUOTA_ENTITIES:
        raise BadForm(f"'entity_type' is one of {', '.join(QUOTA_ENTITIES)}")
    return [(kind, data.get("entity_name", "").strip() or None)]


@routes.post("/quotas")
async def set_quota(request: web.Request) -> web.StreamResponse:
    data = await form(request)
    entity, key = _entity(data), field(data, "key")
    removing = bool(data.get("delete"))
    value = None
    if not removing:
        try:
            value = float(field(data, "value"))
        except ValueError:
            raise BadForm("'value' must be a number") from None
    raise await _act("/quotas", f"quota {key} {'removed' if removing else 'set'}", request,
                     lambda c: access.alter_quota(c, entity, key, value))


@routes.get("/users")
async def users(request: web.Request) -> web.Response:
    rows, problem = await _listing(request, access.list_users)
    return render(request, "users.html", users=rows, problem=problem, mechanisms=MECHANISMS)


@routes.post("/users")
async def add_user(request: web.Request) -> web.StreamResponse:
    data = await form(request)
    name, mechanism, password = field(data, "name"), field(data, "mechanism"), field(
        data, "password")
    if mechanism not in MECHANISMS:
        raise BadForm(f"'mechanism' is one of {', '.join(MECHANISMS)}")
    iterations = int_field(data, "iterations", 8192, low=4096)
    if iterations > MAX_ITERATIONS:
        raise BadForm(f"'iterations' must be at most {MAX_ITERATIONS}")
    raise await _act("/users", f"set the {mechanism} credential of {name}", request,
                     lambda c: access.upsert_user(c, name, mechanism, password, iterations))


@routes.post("/users/delete")
async def delete_user(request: web.Request) -> web.StreamResponse:
    data = await form(request)
    name, mechanism = field(data, "name"), field(data, "mechanism")
    if mechanism not in MECHANISMS:
        raise BadForm(f"'mechanism' is one of {', '.join(MECHANISMS)}")
    raise await _act("/users", f"removed the {mechanism} credential of {name}", request,
                     lambda c: access.delete_user(c, name, mechanism))
