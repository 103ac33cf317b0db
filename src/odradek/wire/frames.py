"""Sans-IO Kafka connections: feed bytes in, take requests/responses out.

Framing: every request and response is an int32 size followed by that many
bytes. A request is a request header (api key int16, api version int16,
correlation id int32, client id nullable string, then tagged fields from
header v2) and the body. A response is a response header (correlation id,
then tagged fields from header v1) and the body. :mod:`odradek.wire.api` says
which header version goes with which (api key, version).

:class:`ServerConnection` follows asyncio's ``BufferedProtocol`` shape
(``get_buffer`` / ``buffer_updated``) so the transport can read straight into
it: small frames are parsed out of a 64 KiB scratch buffer; once a frame larger
than :data:`DIRECT_FRAME_BYTES` is announced, a buffer of exactly its size is
allocated (after checking the size against the limit) and the socket reads into
it directly, so a 1 MiB produce is received with no extra copy and its records
stay a ``memoryview`` of that buffer.

A frame size that is negative or above ``max_frame_bytes`` makes the
connection fail with :class:`FrameError` before anything is buffered; the
caller must close it (Kafka closes the connection too).
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from odradek.wire import api
from odradek.wire.codec import encode_into
from odradek.wire.messages.request_header import RequestHeader
from odradek.wire.messages.response_header import ResponseHeader
from odradek.wire.primitives import Buffer, DecodeError
from odradek.wire.schema import Message

DEFAULT_MAX_FRAME_BYTES: Final = 104_857_600  # socket.request.max.bytes
SCRATCH_BYTES: Final = 65_536
DIRECT_FRAME_BYTES: Final = 16_384
# A frame small enough to stay in the scratch buffer must fit in it whole,
# or get_buffer would hand out an empty view and receive_data could not progress.
assert DIRECT_FRAME_BYTES + 4 <= SCRATCH_BYTES

_I32: Final = struct.Struct(">i")
_KEY_VERSION_CORR: Final = struct.Struct(">hhi")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    header: RequestHeader
    body: Any
    size: int


@dataclass(slots=True)
class BadRequest:
    """A frame that could not become a request.

    ``reason`` is ``"unknown_api"``, ``"unsupported_version"`` or
    ``"malformed"``. ``correlation_id`` is None when even the first 8 bytes of
    the header were missing.
    """

    api_key: int
    api_version: int
    correlation_id: int | None
    reason: str
    detail: str
    size: int


class _FrameReader:
    """Splits a byte stream into frames; see the module docstring."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_len = 0
        self._frame: bytearray | None = None
        self._filled = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._failed: FrameError | None = None

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._failed:
            raise self._failed
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        return memoryview(self._scratch)[self._scratch_len :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                self._frames.append(self._frame)
                self._frame = None
            return
        self._scratch_len += nbytes
        self._drain_scratch()

    def receive_data(self, data: Buffer) -> None:
        """Feed bytes from any source (tests, non-buffered transports)."""
        view = memoryview(data)
        while view:
            buf = self.get_buffer()
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def _drain_scratch(self) -> None:
        scratch = self._scratch
        end = self._scratch_len
        pos = 0
        # Copy out through a view: slicing the bytearray itself would copy twice.
        with memoryview(scratch) as view:
            while end - pos >= 4:
                size = _I32.unpack_from(scratch, pos)[0]
                if size < 0 or size > self.max_frame_bytes:
                    self._failed = FrameError(
                        f"frame size {size} outside [0, {self.max_frame_bytes}]"
                    )
                    raise self._failed
                avail = end - pos - 4
                if avail >= size:
                    self._frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                    pos += 4 + size
                    continue
                if size > DIRECT_FRAME_BYTES:
                    frame = bytearray(size)
                    frame[:avail] = view[pos + 4 : end]
                    self._frame, self._filled = frame, avail
                    pos = end
                break
        if pos:
            remaining = end - pos
            scratch[:remaining] = scratch[pos:end]
            self._scratch_len = remaining

    def next_frame(self) -> bytes | bytearray | None:
        return self._frames.popleft() if self._frames else None

    @property
    def buffered_frames(self) -> int:
        return len(self._frames)


class ServerConnection(_FrameReader):
    """The broker's side of one connection."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        super().__init__(max_frame_bytes)

    def next_event(self) -> Request | BadRequest | None:
        """The next request in arrival order, or None when more bytes are needed."""
        frame = self.next_frame()
        if frame is None:
            return None
        return parse_request(frame)


def parse_request(frame: Buffer) -> Request | BadRequest:
    """Decode one request frame (without its size prefix)."""
    size = len(frame)
    if size < 8:
        key = _I32.unpack_from(frame, 0)[0] >> 16 if size >= 4 else -1
        return BadRequest(key, -1, None, "malformed", "frame shorter than a header", size)
    api_key, api_version, correlation_id = _KEY_VERSION_CORR.unpack_from(frame, 0)
    if not api.is_known(api_key):
        return BadRequest(api_key, api_version, correlation_id, "unknown_api", "", size)
    try:
        header_version = api.request_header_version(api_key, api_version)
        header, pos = RequestHeader.decode_from(frame, 0, header_version)
    except DecodeError as exc:
        return BadRequest(api_key, api_version, correlation_id, "malformed", str(exc), size)
    lo, hi = api.spec_versions(api_key)
    if not lo <= api_version <= hi:
        return BadRequest(
            api_key, api_version, correlation_id, "unsupported_version", "", size
        )
    try:
        # Trailing bytes after the body are ignored, as Kafka does.
        body, _ = api.request_class(api_key).decode_from(frame, pos, api_version)
    except DecodeError as exc:
        return BadRequest(api_key, api_version, correlation_id, "malformed", str(exc), size)
    return Request(api_key, api_version, correlation_id, header, body, size)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Message
) -> list[Any]:
    """Size prefix, response header and body as a list of parts for ``writelines``.

    Parts are ``bytes`` except external records values (see
    :class:`~odradek.wire.schema.ExternalRecords`), passed through untouched.
    """
    out = bytearray(4)
    out += _I32.pack(correlation_id)
    if api.response_header_version(api_key, api_version) >= 1:
        out.append(0)  # no tagged fields
    parts: list[Any] = []
    encode_into(body, api_version, out, parts)
    if not parts:
        _I32.pack_into(out, 0, len(out) - 4)
        return [out]
    parts.append(out)
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, sum(map(len, parts)) - 4)
    parts[0] = first
    return parts


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Message,
    client_id: str | None = "odradek",
) -> bytes:
    """A complete request frame, size prefix included."""
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    out = bytearray(4)
    parts: list[Any] = []
    encode_into(header, api.request_header_version(api_key, api_version), out, parts)
    encode_into(body, api_version, out, parts)
    if parts:
        parts.append(bytes(out))
        data = b"".join(parts)
    else:
        data = bytes(out)
    return _I32.pack(len(data) - 4) + data[4:]


class ClientConnection(_FrameReader):
    """A client's side of one connection: matches responses to requests in order."""

    def __init__(self, client_id: str | None = "odradek", max_frame_bytes: int = 1 << 30):
        super().__init__(max_frame_bytes)
        self.client_id = client_id
        self._next_correlation = 0
        self._in_flight: deque[tuple[int, int, int]] = deque()

    def send(self, body: Message, api_version: int, expect_response: bool = True) -> bytes:
        """Encode a request; returns the bytes to write."""
        corr = self._next_correlation
        self._next_correlation = (corr + 1) & 0x7FFFFFFF
        if expect_response:
            self._in_flight.append((corr, body.API_KEY, api_version))
        return encode_request(body.API_KEY, api_version, corr, body, self.client_id)

    def next_response(self) -> tuple[int, Any] | None:
        """(correlation id, decoded response) or None when more bytes are needed."""
        frame = self.next_frame()
        if frame is None:
            return None
        if not self._in_flight:
            raise FrameError("a response arrived with no request in flight")
        corr, api_key, version = self._in_flight.popleft()
        header_version = api.response_header_version(api_key, version)
        header, pos = ResponseHeader.decode_from(frame, 0, header_version)
        if header.correlation_id != corr:
            raise FrameError(f"correlation id {header.correlation_id}, expected {corr}")
        body, _ = api.response_class(api_key).decode_from(frame, pos, version)
        return corr, body
