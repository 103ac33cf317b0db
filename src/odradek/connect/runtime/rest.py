"""The REST API, Kafka Connect's paths, JSON shapes and status codes.

Errors are ``{"error_code": <HTTP status>, "message": "..."}``: 400 for a bad
body or config, 404 for an unknown connector, task, plugin or path, 405 for a
method a path does not take, 409 when the connector exists, 413 for a body
over :data:`MAX_BODY` bytes, 415 for a body that is not ``application/json``,
500 otherwise. The herder's blocking calls run in a thread pool.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from odradek.connect import plugins
from odradek.connect.runtime import manage
from odradek.connect.runtime.herder import Herder
from odradek.connect.runtime.loggers import LoggersApi
from odradek.connect.runtime.validation import (
    RestError,
    config_errors,
    connector_class,
    definition,
)

MAX_BODY = 1 << 20
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200, **headers: str) -> web.Response:
    return web.Response(text=json.dumps(data), status=status,
                        content_type="application/json", headers=headers or None)


def _error(code: int, message: str) -> web.Response:
    return _json({"error_code": code, "message": message}, code)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except RestError as e:
        return _error(e.code, e.message)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return _error(e.status, e.reason or e.text or "")
    except Exception as e:
        return _error(500, f"{type(e).__name__}: {e}")


async def _body(request: web.Request) -> Any:
    if not request.body_exists:
        raise RestError(400, "A request body is required")
    if request.content_type != "application/json":
        raise RestError(415, f"Unsupported media type {request.content_type or '(none)'}: "
                             "send application/json")
    raw = await request.read()
    try:
        return json.loads(raw)
    except ValueError as e:
        raise RestError(400, f"The request body is not valid JSON: {e}") from None


def _flat(body: Any) -> dict[str, str]:
    """A connector config: a JSON object of strings (numbers/booleans allowed, as text)."""
    if not isinstance(body, dict):
        raise RestError(400, "The connector config must be a JSON object")
    out = {}
    for k, v in body.items():
        if isinstance(v, dict | list) or v is None:
            raise RestError(400, f"{k}: a config value must be a string")
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


class RestApi:
    def __init__(self, herder: Herder, cluster_id: str) -> None:
        self.herder = herder
        self.cluster_id = cluster_id
        self.app = web.Application(middlewares=[errors], client_max_size=MAX_BODY)
        r = self.app.router
        r.add_get("/", self.root)
        r.add_get("/connectors", self.list_connectors)
        r.add_post("/connectors", self.create)
        r.add_get("/connectors/{c}", self.info)
        r.add_delete("/connectors/{c}", self.delete)
        r.add_get("/connectors/{c}/config", self.get_config)
        r.add_put("/connectors/{c}/config", self.put_config)
        r.add_patch("/connectors/{c}/config", self.patch_config)
        r.add_get("/connectors/{c}/status", self.status)
        r.add_post("/connectors/{c}/restart", self.restart)
        r.add_put("/connectors/{c}/pause", self.pause)
        r.add_put("/connectors/{c}/resume", self.resume)
        r.add_put("/connectors/{c}/stop", self.stop)
        r.add_get("/connectors/{c}/tasks", self.tasks)
        r.add_get("/connectors/{c}/tasks/{n}/status", self.task_status)
        r.add_post("/connectors/{c}/tasks/{n}/restart", self.task_restart)
        r.add_get("/connectors/{c}/topics", self.topics)
        r.add_put("/connectors/{c}/topics/reset", self.reset_topics)
        r.add_get("/connectors/{c}/offsets", self.get_offsets)
        r.add_patch("/connectors/{c}/offsets", self.alter_offsets)
        r.add_delete("/connectors/{c}/offsets", self.reset_offsets)
        r.add_get("/connector-plugins", self.plugins)
        r.add_get("/connector-plugins/{p}/config", self.plugin_config)
        r.add_put("/connector-plugins/{p}/config/validate", self.validate)
        LoggersApi().register(r)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def root(self, request: web.Request) -> web.Response:
        return _json({"version": manage._version(), "commit": "",
                      "kafka_cluster_id": self.cluster_id})

    async def list_connectors(self, request: web.Request) -> web.Response:
        return _json(await self.call(self._connectors, request.query.getall("expand", [])))

    def _connectors(self, expand: list[str]) -> Any:
        names = self.herder.names()
        if not expand:
            return names
        out: dict[str, dict[str, Any]] = {}
        for n in names:
            item: dict[str, Any] = {}
            try:
                if "status" in expand:
                    item["status"] = self.herder.status(n)
                if "info" in expand:
                    item["info"] = self.herder.info(n)
            except RestError:
                continue  # deleted meanwhile
            out[n] = item
        return out

    async def create(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("config"), dict):
            raise RestError(400, "The request body must be {\"name\": ..., \"config\": {...}}")
        config = _flat(body["config"])
        name = body.get("name") or config.get("name")
        if not isinstance(name, str) or not name.strip():
            raise RestError(400, "name: a connector name is required")
        if "/" in name:
            raise RestError(400, "name: a connector name may not contain '/'")
        initial = body.get("initial_state") or "RUNNING"
        _, info = await self.call(self.herder.create, name, config, str(initial))
        return _json(info, 201, Location=f"/connectors/{name}")

    async def info(self, request: web.Request) -> web.Response:
        return _json(await self.call(self.herder.info, request.match_info["c"]))

    async def delete(self, request: web.Request) -> web.Response:
        await self.call(self.herder.delete, request.match_info["c"])
        return web.Response(status=204)

    async def get_config(self, request: web.Request) -> web.Response:
        return _json(await self.call(self.herder.config, request.match_info["c"]))

    async def put_config(self, request: web.Request) -> web.Response:
        name = request.match_info["c"]
        config = _flat(await _body(request))
        created, info = await self.call(self.herder.create, name, config, replace=True)
        return _json(info, 201 if created else 200,
                     **({"Location": f"/connectors/{name}"} if created else {}))

    async def patch_config(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if not isinstance(body, dict):
            raise RestError(400, "The connector config must be a JSON object")
        changes = {k: None if v is None else _flat({k: v})[k] for k, v in body.items()}
        return _json(await self.call(self.herder.patch, request.match_info["c"], changes))

    async def status(self, request: web.Request) -> web.Response:
        return _json(await self.call(self.herder.status, request.match_info["c"]))

    async def restart(self, request: web.Request) -> web.Response:
        answer = await self.call(self.herder.restart, request.match_info["c"],
                                 _flag(request, "includeTasks"), _flag(request, "onlyFailed"))
        return web.Response(status=204) if answer is None else _json(answer, 202)

    async def pause(self, request: web.Request) -> web.Response:
        await self.call(self.herder.pause, request.match_info["c"])
        return web.Response(status=202)

    async def resume(self, request: web.Request) -> web.Response:
        await self.call(self.herder.resume, request.match_info["c"])
        return web.Response(status=202)

    async def stop(self, request: web.Request) -> web.Response:
        await self.call(self.herder.stop, request.match_info["c"])
        return web.Response(status=204)

    async def tasks(self, request: web.Request) -> web.Response:
        return _json(await self.call(self.herder.task_list, request.match_info["c"]))

    def _task(self, request: web.Request) -> tuple[str, int]:
        name, n = request.match_info["c"], request.match_info["n"]
        self.herder._get(name)
        if not n.isdigit():
            raise RestError(404, f"Task {name}-{n} not found")
        return name, int(n)

    async def task_status(self, request: web.Request) -> web.Response:
        return _json(await self.call(self.herder.task_status, *self._task(request)))

    async def task_restart(self, request: web.Request) -> web.Response:
        await self.call(self.herder.restart_task, *self._task(request))
        return web.Response(status=204)

    async def topics(self, request: web.Request) -> web.Response:
        return _json(await self.call(self.herder.topics, request.match_info["c"]))

    async def reset_topics(self, request: web.Request) -> web.Response:
        await self.call(self.herder.reset_topics, request.match_info["c"])
        return web.Response(status=202)

    async def get_offsets(self, request: web.Request) -> web.Response:
        return _json(await self.call(manage.get_offsets, self.herder, request.match_info["c"]))

    async def alter_offsets(self, request: web.Request) -> web.Response:
        body = await _body(request)
        return _json(await self.call(manage.alter_offsets, self.herder,
                                     request.match_info["c"], body))

    async def reset_offsets(self, request: web.Request) -> web.Response:
        return _json(await self.call(manage.reset_offsets, self.herder,
                                     request.match_info["c"]))

    async def plugins(self, request: web.Request) -> web.Response:
        only = request.query.get("connectorsOnly", "true").lower() != "false"
        return _json(await self.call(manage.plugin_list, only))

    async def plugin_config(self, request: web.Request) -> web.Response:
        cls = manage.plugin_class(request.match_info["p"])
        config = getattr(cls, "CONFIG", None)
        return _json([k.info() for k in config.keys] if config is not None else [])

    async def validate(self, request: web.Request) -> web.Response:
        plugin = request.match_info["p"]
        config = _flat(await _body(request))
        given = config.setdefault("connector.class", plugin)
        if manage.plugin_class(given) is not manage.plugin_class(plugin):
            raise RestError(400, f"Included connector type {given} does not match request "
                                 f"type {plugin}")
        cls = connector_class(config)
        extra = await self.call(config_errors, cls, config, self.herder.worker.props, own=False)
        name = plugins.find(plugin).name
        answer = definition(cls).config_infos(config, name, {
            k: v for k, v in extra.items() if k in definition(cls)})
        # errors about settings not in the definition (transforms.a.type...) count too
        others = {k: v for k, v in extra.items() if k not in definition(cls)}
        for k, msgs in others.items():
            answer["configs"].append({"definition": None, "value": {
                "name": k, "value": config.get(k), "recommended_values": [],
                "errors": msgs, "visible": True}})
            answer["error_count"] += len(msgs)
        return _json(answer)
