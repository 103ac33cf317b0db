"""``/admin/loggers``: the worker's log levels over REST (KIP-495, KIP-976's shapes).

Python's :mod:`logging` loggers stand in for Log4j's:

- ``GET /admin/loggers`` → ``{"root": {"level": "INFO", "last_modified": null},
  "<name>": {"level": ..., "last_modified": ms|null}, ...}``: the root logger,
  every logger under ``odradek`` (with its effective level), and any other
  logger whose level was set here;
- ``GET /admin/loggers/{name}`` → ``{"level": ..., "last_modified": ...}``; 404
  ``Logger <name> not found.`` for a logger that does not exist, as Kafka;
- ``PUT /admin/loggers/{name}`` with ``{"level": "DEBUG"}`` sets the level of
  that logger and of every existing logger under it (``root``: every logger)
  and answers 200 with their names, sorted. ``scope=cluster`` is distributed
  mode's: as Kafka's standalone worker does, it is applied to this worker and
  answered 204 without a body; any other scope is taken as ``worker``. A
  missing level is 400; an unknown one 404 (Kafka's answer).

``last_modified`` is the wall-clock ms of the last change made here (null
before any). Levels: Kafka's names map to Python's numbers (:data:`LEVELS`);
a Python level between two of them reads as the next more severe name.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from aiohttp import web

from odradek.connect.runtime.validation import RestError

ROOT = "root"
NAMESPACE = "odradek"
LEVELS: dict[str, int] = {
    "ALL": 1, "TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
    "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}


def kafka_level(level: int) -> str:
    """The Kafka name of a Python level (the least severe name at or above it)."""
    for name, value in LEVELS.items():
        if level <= value:
            return name
    return "OFF"


class Loggers:
    """The levels and when each was last changed here (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last_modified: dict[str, int] = {}

    @staticmethod
    def _logger(name: str) -> logging.Logger | None:
        if name == ROOT:
            return logging.getLogger()
        found = logging.Logger.manager.loggerDict.get(name)
        return found if isinstance(found, logging.Logger) else None

    @staticmethod
    def _existing() -> list[str]:
        return [n for n, lg in list(logging.Logger.manager.loggerDict.items())
                if isinstance(lg, logging.Logger)]

    def level(self, name: str) -> dict[str, Any] | None:
        logger = self._logger(name)
        if logger is None:
            return None
        return {"level": kafka_level(logger.getEffectiveLevel()),
                "last_modified": self.last_modified.get(name)}

    def all(self) -> dict[str, dict[str, Any]]:
        names = {n for n in self._existing()
                 if n == NAMESPACE or n.startswith(NAMESPACE + ".")}
        names |= set(self.last_modified) - {ROOT}
        out: dict[str, dict[str, Any]] = {}
        for n in [ROOT, *sorted(names)]:
            level = self.level(n)
            if level is not None:
                out[n] = level
        return out

    def set(self, name: str, level: str) -> list[str]:
        """Set ``level`` on ``name`` (created if missing) and on every existing
        logger under it; the names changed, sorted."""
        value = LEVELS[level.upper()]
        now = int(time.time() * 1000)
        with self._lock:
            if name == ROOT:
                targets = [ROOT, *self._existing()]
            else:
                logging.getLogger(name)
                targets = [n for n in self._existing()
                           if n == name or n.startswith(name + ".")]
            for n in targets:
                logger = self._logger(n)
                if logger is not None:
                    logger.setLevel(value)
                    self.last_modified[n] = now
        return sorted(targets)


class LoggersApi:
    def __init__(self, loggers: Loggers | None = None) -> None:
        self.loggers = loggers or Loggers()

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/admin/loggers", self.list)
        router.add_get("/admin/loggers/", self.list)
        router.add_get("/admin/loggers/{name}", self.get)
        router.add_put("/admin/loggers/{name}", self.put)

    async def list(self, request: web.Request) -> web.Response:
        return web.json_response(self.loggers.all())

    async def get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        level = self.loggers.level(name)
        if level is None:
            raise RestError(404, f"Logger {name} not found.")
        return web.json_response(level)

    async def put(self, request: web.Request) -> web.Response:
        from odradek.connect.runtime.rest import _body

        name = request.match_info["name"]
        body = await _body(request)
        level = body.get("level") if isinstance(body, dict) else None
        if level is None:
            raise RestError(400, "Desired 'level' parameter was not specified in request.")
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise RestError(404, f"invalid log level '{level}'.")
        changed = self.loggers.set(name, level)
        if request.query.get("scope", "worker").lower() == "cluster":
            return web.Response(status=204)
        return web.json_response(changed)
