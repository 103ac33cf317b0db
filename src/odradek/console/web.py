"""The HTTP side shared by every page: templates, forms, errors, redirects.

Forms are ``application/x-www-form-urlencoded`` only (anything else: 415),
bounded by the application's ``client_max_size`` (larger: 413). A missing or
malformed field is a 400 page. A Kafka refusal of a form's action comes back
as a redirect to the page with ``?error=...`` (POST/redirect/GET), shown in
a banner; success likewise with ``?ok=...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from aiohttp import web

from odradek.client.connection import ClientError, KafkaError, UnsupportedApi
from odradek.console.state import Console
from odradek.wire.errors import ErrorCode

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)
ENV: web.AppKey[jinja2.Environment] = web.AppKey("jinja", jinja2.Environment)
FORM_TYPE = "application/x-www-form-urlencoded"
NOT_FOUND = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
             ErrorCode.GROUP_ID_NOT_FOUND}


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["q"] = lambda s: web_quote(str(s))
    return env


def web_quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def console(request: web.Request) -> Console:
    return request.app[CONSOLE]


def render(request: web.Request, template: str, status: int = 200,
           **context: Any) -> web.Response:
    page = request.app[ENV].get_template(template).render(
        error=request.query.get("error"), ok=request.query.get("ok"),
        path=request.path, bootstrap=console(request).bootstrap, **context)
    return web.Response(text=page, content_type="text/html", status=status)


async def form(request: web.Request) -> dict[str, str]:
    """The POSTed form's fields (the first value of each)."""
    if request.content_type != FORM_TYPE:
        raise web.HTTPUnsupportedMediaType(text=f"forms must be sent as {FORM_TYPE}")
    data = await request.post()  # 413 past client_max_size
    return {k: v for k, v in data.items() if isinstance(v, str)}


class BadForm(Exception):
    """A field that is missing or malformed: a 400 page naming it."""


def field(data: dict[str, str], name: str, default: str | None = None) -> str:
    value = data.get(name, default)
    if value is None or value == "":
        if default is not None:
            return default
        raise BadForm(f"the form needs {name!r}")
    return value.strip()


def int_field(data: dict[str, str], name: str, default: int | None = None,
              low: int | None = None) -> int:
    text = field(data, name, None if default is None else str(default))
    try:
        value = int(text)
    except ValueError:
        raise BadForm(f"{name!r} must be a whole number, not {text[:40]!r}") from None
    if low is not None and value < low:
        raise BadForm(f"{name!r} must be at least {low}")
    return value


def back(location: str, *, error: str | None = None, ok: str | None = None) -> web.HTTPSeeOther:
    """The redirect that ends a POST (303: the browser GETs ``location``)."""
    query = urlencode({k: v for k, v in (("error", error), ("ok", ok)) if v})
    return web.HTTPSeeOther(location + (f"?{query}" if query else ""))


@web.middleware
async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Kafka's and the connection's failures as pages, not tracebacks."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except BadForm as exc:
        return _error_page(request, 400, "Bad request", str(exc))
    except UnsupportedApi as exc:
        return _error_page(request, 501, "Not served by this cluster", str(exc))
    except KafkaError as exc:
        status = 404 if exc.code in NOT_FOUND else 502
        return _error_page(request, status, "Not found" if status == 404 else "Kafka error",
                           str(exc))
    except (ClientError, OSError, TimeoutError) as exc:
        return _error_page(request, 502, "Cannot reach the cluster",
                           f"{console(request).bootstrap}: {exc or type(exc).__name__}")


def _error_page(request: web.Request, status: int, title: str, message: str) -> web.Response:
    return render(request, "error.html", status=status, title=title, message=message)
