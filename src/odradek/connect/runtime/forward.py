"""The distributed worker's REST API: the standalone one, plus forwarding.

Every path of :class:`RestApi` is served. A write on a worker that is not the
group leader raises :class:`NotLeader`; the ``forward`` middleware sends the
same request (method, path and query, JSON body) to the leader's URL and
answers with the leader's status, body and content type. A forwarded request
carries the header ``X-Odradek-Forwarded``; one that reaches a worker that is
not the leader either (leadership moved meanwhile) is answered 409 rather
than forwarded again. The internal ``POST /connectors/{c}/tasks`` takes a
JSON array of task configs from the worker running connector ``c`` (written
by the leader with a commit record); ``GET /connectors/{c}/offsets`` reads
the offsets topic to its end first.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from odradek.connect.runtime import manage
from odradek.connect.runtime.dherder import REBALANCING, DistributedHerder, NotLeader
from odradek.connect.runtime.rest import Handler, RestApi, _body, _error, _json

FORWARDED = "X-Odradek-Forwarded"
FORWARD_TIMEOUT_S = 60.0


class DistributedRestApi(RestApi):
    def __init__(self, herder: DistributedHerder, cluster_id: str) -> None:
        super().__init__(herder, cluster_id)
        self.dherder = herder
        self.app.middlewares.append(self.forward)
        self.app.router.add_post("/connectors/{c}/tasks", self.put_tasks)
        self._session: aiohttp.ClientSession | None = None
        self.app.on_cleanup.append(self._close)

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    @web.middleware
    async def forward(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except NotLeader as e:
            if request.headers.get(FORWARDED):
                return _error(409, REBALANCING)
            return await self._forward(request, e.url)

    async def _forward(self, request: web.Request, url: str) -> web.StreamResponse:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        body = await request.read() if request.body_exists else None
        headers = {FORWARDED: "1"}
        if request.content_type and body is not None:
            headers["Content-Type"] = request.content_type
        try:
            async with self._session.request(request.method, url + request.path_qs, data=body,
                                             headers=headers) as resp:
                data = await resp.read()
                return web.Response(body=data, status=resp.status,
                                    content_type=resp.content_type if data else None,
                                    headers={k: v for k, v in resp.headers.items()
                                             if k.lower() == "location"})
        except (TimeoutError, aiohttp.ClientError) as e:
            return _error(409, f"{REBALANCING} (the leader at {url} did not answer: "
                               f"{type(e).__name__})")

    async def put_tasks(self, request: web.Request) -> web.Response:
        configs = await _body(request)
        await self.call(self.dherder.put_task_configs, request.match_info["c"], configs)
        return web.Response(status=204)

    async def get_offsets(self, request: web.Request) -> web.Response:
        await self.call(self.dherder.topic_offsets.refresh)
        return _json(await self.call(manage.get_offsets, self.herder, request.match_info["c"]))
