"""The SASL listener kinds: a connection that serves nothing but ApiVersions
and SASL until its client authenticates (:mod:`odradek.broker.net.sasl`), and
is then its principal's. The pipeline's authenticate stage
(:mod:`odradek.broker.net.sasl.stage`) works through it (``SaslChannel``);
handshake-v0 raw tokens are answered here, outside the pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.config import ConfigError
from odradek.broker.net.sasl.authenticator import SaslSession, SessionSettings
from odradek.broker.net.sasl.jwks import JwksCache
from odradek.broker.net.sasl.settings import SaslConfigError, listener_settings
from odradek.broker.net.sasl.stage import wall_ms
from odradek.broker.net.server import KafkaConnection
from odradek.wire.frames import RawToken, Request

if TYPE_CHECKING:
    from odradek.broker.net.server import KafkaServer
    from odradek.metadata.image import MetadataImage

log = logging.getLogger("odradek.broker")


class SaslConnection(KafkaConnection):
    """A connection on a SASL_PLAINTEXT listener: nothing but ApiVersions and
    SASL is served until the client authenticates
    (:mod:`odradek.broker.net.sasl`); then its principal is ``User:<name>``.
    Frames are capped at ``sasl.server.max.receive.size`` until then."""

    security_protocol = "SASL_PLAINTEXT"

    def __init__(self, server: KafkaServer, listener: str = "") -> None:
        super().__init__(server, listener)
        self.channel = self
        self.session = SaslSession(server.sasl_settings[listener])
        self._max_frame = self.conn.max_frame_bytes
        self.conn.max_frame_bytes = min(self._max_frame, self.session.settings.max_receive_size)
        self._close_delay_ms: int | None = None

    # -- the channel the authenticate stage works through (sasl/stage.py SaslChannel) --

    def raw_tokens(self, on: bool) -> None:
        self.conn.raw_tokens = on

    def authenticated(self, principal: str) -> None:
        self.principal = principal
        self.conn.max_frame_bytes = self._max_frame

    def close_after(self, delay_ms: int) -> None:
        self._close_delay_ms = delay_ms

    # -- serving -----------------------------------------------------------------

    async def _handle(self, req: Request, received: float = -1.0) -> bool:
        finished = await super()._handle(req, received)
        if self._close_delay_ms is not None:
            self._close_later()
        return finished

    def _close_later(self) -> None:
        delay = self._close_delay_ms or 0
        self._pause("closing")
        self._closed = True  # serve nothing more; the answer is written already
        self._wake.set()
        asyncio.get_running_loop().call_later(delay / 1000, self._close_transport)

    def _close_transport(self) -> None:
        if self.transport is not None:
            self._flush()
            self.transport.close()

    def _raw_token(self, event: RawToken) -> None:
        """A SaslHandshake v0 token: answered with a raw frame; a failure closes."""
        answer = self.session.authenticate(event.data, -1, wall_ms())
        if answer.error:
            log.info("closing %s: %s", self.peer, self.session.close_reason or "SASL failure")
            self._close_delay_ms = self.session.settings.failed_delay_ms
            self._close_later()
            return
        self._write([struct.pack(">i", len(answer.token)) + answer.token])
        if answer.done:
            self.conn.raw_tokens = False
            self.authenticated(self.session.principal)


class SaslSslConnection(SaslConnection):
    """A connection on a SASL_SSL listener: SASL over TLS (the TLS layer is the
    listener's, made by ``create_server``)."""

    security_protocol = "SASL_SSL"


SASL_KINDS: dict[str, type[KafkaConnection]] = {
    "SASL_PLAINTEXT": SaslConnection, "SASL_SSL": SaslSslConnection}


class _Config(Protocol):
    def get(self, key: str) -> str: ...


class _HasImage(Protocol):
    @property
    def image(self) -> MetadataImage: ...


async def prepare_listeners(config: _Config, listeners: list[str], state: _HasImage
                            ) -> tuple[dict[str, SessionSettings], list[asyncio.Task[None]]]:
    """Each SASL listener's settings (a ConfigError names what is missing), with
    SCRAM credentials read from ``state``'s current image at each
    authentication; the JWKS they name fetched now and then refreshed by the
    returned tasks (the server cancels them when it stops)."""
    caches: dict[str, JwksCache] = {}

    def scram(user: str, mechanism: str) -> Any:
        return state.image.scram.get(user, mechanism)

    def jwks(url: str) -> JwksCache:
        cache = caches.get(url)
        if cache is None:
            cache = caches[url] = JwksCache(url, config.get(
                "sasl.oauthbearer.jwks.endpoint.refresh.ms") or "3600000")
        return cache

    settings = {}
    for name in listeners:
        try:
            settings[name] = listener_settings(config.get, name, scram, jwks, log.warning)
        except SaslConfigError as exc:
            raise ConfigError(str(exc)) from None
    tasks = []
    for cache in caches.values():
        try:
            await asyncio.to_thread(cache.fetch)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        tasks.append(asyncio.get_running_loop().create_task(cache.refresh()))
    return settings, tasks
