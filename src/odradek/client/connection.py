"""One connection to one broker: framing, version negotiation, in-order answers.

A :class:`Connection` opens a TCP connection, asks ApiVersions (v3, falling
back to v0 when the broker answers UNSUPPORTED_VERSION, KIP-511) and then
sends each request at the highest version both sides serve, capped by the
caller's ``max_version`` (the newest version this client has been tested
with). Requests are pipelined: each waits for its own answer, which Kafka
sends in request order.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.wire import api
from odradek.wire.errors import ErrorCode
from odradek.wire.frames import ClientConnection, FrameError
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.schema import Message

_READ_BYTES = 1 << 16


class ClientError(Exception):
    """The broker cannot be reached, or it spoke something this client cannot use."""


class UnsupportedApi(ClientError):
    """The broker does not serve the API (or no version this client speaks);
    the connection itself is fine."""


class KafkaError(Exception):
    """A Kafka error code in an answer."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        super().__init__(f"{name}: {message}" if message else name)


def check(code: int, message: str | None = None) -> None:
    if code:
        raise KafkaError(code, message)


class Connection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str,
        client_id: str,
    ) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._conn = ClientConnection(client_id)
        self._waiting: list[asyncio.Future[Any]] = []
        self._lock = asyncio.Lock()
        self._reading: asyncio.Task[None] | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self.session_lifetime_ms = 0
        self._reauth: asyncio.Task[None] | None = None
        """KIP-368: how long the broker keeps this connection's SASL session (0: for ever)."""

    @classmethod
    async def open(
        cls, address: str, client_id: str = "odradek-cli", timeout_s: float = 10.0,
        security: ClientSecurity = PLAINTEXT,
    ) -> Connection:
        """Connect, negotiate versions and, on a SASL listener, authenticate
        (``security``: TLS and SASL settings, :mod:`odradek.client.security`)."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ClientError(f"not a HOST:PORT address: {address!r}")
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), int(port),
                                        **_tls_arguments(security, host.strip("[]"))),
                timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            raise ClientError(f"cannot reach broker at {address}: {_reason(exc)}") from exc
        conn = cls(reader, writer, address, client_id)
        conn._reading = asyncio.get_running_loop().create_task(conn._read_loop())
        try:
            await asyncio.wait_for(conn._negotiate(), timeout_s)
        except (TimeoutError, ClientError) as exc:
            await conn.close()
            why = ("no answer to ApiVersions within " f"{timeout_s:g} s"
                   if isinstance(exc, TimeoutError) else str(exc))
            hint = ("whether the listener wants a client certificate (ssl.keystore.location)"
                    if security.uses_tls else "that it is a Kafka listener (a TLS or SASL "
                    "listener needs security settings, security.protocol)")
            raise ClientError(f"{address} does not answer as a Kafka broker ({why}): check "
                              f"the address and {hint}") from exc
        if security.uses_sasl:
            try:
                await asyncio.wait_for(conn._authenticate(security), timeout_s)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SASL on this connection: SaslHandshake v1, then the mechanism's tokens
        in SaslAuthenticate requests (:mod:`odradek.client.sasl`). ClientError
        for a mechanism the broker does not offer, KafkaError
        (SASL_AUTHENTICATION_FAILED) for refused credentials. When the broker
        gives the session a lifetime (KIP-368), the connection re-authenticates
        by itself at 85% of it."""
        await self._sasl_exchange(security)
        if self.session_lifetime_ms > 0 and self._reauth is None:
            self._reauth = asyncio.get_running_loop().create_task(
                self._reauthenticate(security))

    async def _reauthenticate(self, security: ClientSecurity) -> None:
        """Re-authenticate before each session lapses, until the connection closes
        or the broker refuses (it then closes the connection)."""
        while self.session_lifetime_ms > 0:
            await asyncio.sleep(self.session_lifetime_ms * 0.85 / 1000)
            try:
                await self._sasl_exchange(security)
            except (ClientError, KafkaError):
                return

    async def _sasl_exchange(self, security: ClientSecurity) -> None:
        from odradek.client.sasl import SaslError, client_for
        from odradek.wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
        from odradek.wire.messages.sasl_handshake_request import SaslHandshakeRequest

        try:
            mech = client_for(security)
        except SaslError as exc:
            raise ClientError(str(exc)) from None
        hs = await self.request(SaslHandshakeRequest(mechanism=mech.mechanism), 1, 1)
        if hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise ClientError(f"{self.address} does not offer SASL mechanism {mech.mechanism} "
                              f"(it offers {', '.join(hs.mechanisms) or 'none'})")
        check(hs.error_code)
        challenge: bytes | None = None
        try:
            while (token := mech.respond(challenge)) is not None:
                resp = await self.request(SaslAuthenticateRequest(auth_bytes=token), 2)
                check(resp.error_code, resp.error_message)
                challenge = bytes(resp.auth_bytes)
                self.session_lifetime_ms = resp.session_lifetime_ms
        except SaslError as exc:
            raise ClientError(f"SASL with {self.address} failed: {exc}") from None

    async def _negotiate(self) -> None:
        request = ApiVersionsRequest(client_software_name="odradek",
                                     client_software_version="0.1")
        resp = await self._send(request, 3)
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            resp = await self._send(request, 0)
        check(resp.error_code)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def version_for(self, api_key: int, max_version: int, min_version: int = 0) -> int:
        served = self.versions.get(api_key)
        if served is None:
            raise UnsupportedApi(f"{self.address} does not serve {api.api_name(api_key)}")
        version = min(max_version, served[1])
        if version < max(served[0], min_version):
            raise UnsupportedApi(
                f"{self.address} serves {api.api_name(api_key)} {served[0]}-{served[1]}, "
                f"this client {min_version}-{max_version}"
            )
        return version

    async def request(self, body: Message, max_version: int, min_version: int = 0) -> Any:
        """Send ``body`` at the best common version and wait for its answer."""
        return await self._send(body, self.version_for(body.API_KEY, max_version, min_version))

    async def send_only(self, body: Message, max_version: int, min_version: int = 0) -> None:
        """Send a request that gets no answer (Produce with acks=0) and return once
        its bytes are handed to the socket."""
        version = self.version_for(body.API_KEY, max_version, min_version)
        async with self._lock:
            if self._reading is None or self._reading.done():
                raise ClientError(f"connection to {self.address} is closed")
            self._writer.write(self._conn.send(body, version, expect_response=False))
        await self._writer.drain()

    async def _send(self, body: Message, version: int) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        async with self._lock:  # frames go out in the order answers are expected
            if self._reading is None or self._reading.done():
                raise ClientError(f"connection to {self.address} is closed")
            frame = self._conn.send(body, version)
            self._waiting.append(fut)
            self._writer.write(frame)
        try:
            await self._writer.drain()
        except BaseException:
            # The answer will not be awaited: a failure the read loop sets on it
            # must not be logged as "Future exception was never retrieved".
            if fut.done() and not fut.cancelled():
                fut.exception()
            fut.cancel()
            raise
        return await fut

    async def _read_loop(self) -> None:
        error: Exception = ClientError(f"{self.address} closed the connection")
        try:
            while True:
                data = await self._reader.read(_READ_BYTES)
                if not data:
                    break
                self._conn.receive_data(data)
                while (got := self._conn.next_response()) is not None:
                    fut = self._waiting.pop(0)
                    if not fut.done():
                        fut.set_result(got[1])
        except (OSError, FrameError) as exc:
            error = ClientError(f"connection to {self.address} failed: {_reason(exc)}")
        for fut in self._waiting:
            if not fut.done():  # one exception each: a shared one gathers every
                fut.set_exception(type(error)(str(error)))  # raiser's traceback
        self._waiting.clear()

    async def close(self) -> None:
        if self._reauth is not None:
            self._reauth.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reauth
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        except asyncio.CancelledError:
            # The stream's close waiter is cancelled when the transport goes
            # down under it (a peer that stopped first): that is a closed
            # connection, not a cancellation of this task, unless it is one.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading


def _tls_arguments(security: ClientSecurity, host: str) -> dict[str, Any]:
    """``open_connection``'s TLS arguments for ``security`` (none for plaintext)."""
    if not security.uses_tls:
        return {}
    context = security.ssl_context or ssl.create_default_context()
    return {"ssl": context, "server_hostname": host if security.check_hostname else ""}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
