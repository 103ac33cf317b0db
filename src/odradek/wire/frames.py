"""Sans-IO Kafka connections: feed bytes in, take requests/responses out.

Framing: every request and response is an int32 size followed by that many
bytes. A request is a request header (api key int16, api version int16,
correlation id int32, client id nullable string, then tagged fields from
header v2) and the body. A response is a response header (correlation id,
then tagged fields from header v1) and the body. :mod:`odradek.wire.api` says
which header version goes with which (api key, version).

:class:`ServerConnection` follows asyncio's ``BufferedProtocol`` shape
(``get_buffer`` / ``buffer_updated``) so the transport can read straight into
it: small frames (up to :data:`DIRECT_FRAME_BYTES`) are parsed out of a 64 KiB
scratch buffer, taken from a shared pool only while it holds bytes; once a
larger frame is announced (and its size checked against the limit), the
socket reads into that frame's own buffer, so its records stay a
``memoryview`` of it with no extra copy. That buffer is the frame's exact
size at once when the frame is small enough and few such bytes are awaited
broker-wide (:class:`RequestMemory`), else it starts at
:data:`GROW_FIRST_BYTES` and doubles as bytes arrive: an announced size costs
nothing until it is sent.

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
GROW_FIRST_BYTES: Final = 65_536
"""The first buffer of a large frame that is not allocated whole; it doubles as bytes arrive."""
EAGER_FRAME_BYTES: Final = 2 << 20
EAGER_BUDGET_BYTES: Final = 32 << 20
SCRATCH_POOL_MAX: Final = 256
UNBOUNDED: Final = 1 << 62
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


@dataclass(slots=True)
class RawToken:
    """A SASL token sent as a bare frame, with no request header (after a
    SaslHandshake v0, while :attr:`ServerConnection.raw_tokens` is on)."""

    data: bytes
    size: int


class RequestMemory:
    """Broker-wide accounting of request bytes held in memory (``queued.max.request.bytes``).

    Every connection's reader charges what it allocates for request frames:
    the capacity of a large frame's buffer while it is being received (also
    counted in ``partial``), then the frame's size once it is complete, until
    the server calls :meth:`_FrameReader.release` after answering it. Small
    frames are charged when they are copied out of the scratch buffer. So
    ``used`` follows the bytes actually received (a large frame's buffer is at
    most twice what has arrived, or exactly its size when allocated eagerly),
    never the sizes clients announce.

    Eager allocation: a frame of at most ``eager_frame_bytes`` gets its whole
    buffer at once (zero copies) while the bytes announced but not yet received
    by such frames, broker-wide, stay within ``eager_budget``; otherwise its
    buffer starts small and doubles as bytes arrive.

    Invariants: ``0 <= partial <= used``; ``0 <= eager_unfilled <= eager_budget``.
    This object never refuses anything: the IO shell reads :meth:`over` and
    stops reading from sockets while the bound is exceeded.
    """

    __slots__ = ("eager_budget", "eager_frame_bytes", "eager_unfilled", "limit", "partial", "used")

    def __init__(
        self,
        limit: int = UNBOUNDED,
        *,
        eager_budget: int = EAGER_BUDGET_BYTES,
        eager_frame_bytes: int = EAGER_FRAME_BYTES,
    ) -> None:
        self.limit = limit
        self.used = 0
        self.partial = 0
        self.eager_unfilled = 0
        self.eager_budget = eager_budget
        self.eager_frame_bytes = eager_frame_bytes

    def over(self) -> bool:
        return self.used >= self.limit

    @property
    def releasable(self) -> int:
        """Bytes of complete frames, given back as their requests are answered."""
        return self.used - self.partial


_scratch_pool: list[bytearray] = []


def _take_scratch() -> bytearray:
    try:
        return _scratch_pool.pop()
    except IndexError:
        return bytearray(SCRATCH_BYTES)


def _give_scratch(buf: bytearray) -> None:
    if len(_scratch_pool) < SCRATCH_POOL_MAX:
        _scratch_pool.append(buf)


class _FrameReader:
    """Splits a byte stream into frames; see the module docstring.

    Memory held per connection: a scratch buffer only while it holds bytes of
    an unfinished small frame (idle connections hold none; emptied scratch
    buffers go back to a shared pool), the buffer of the large frame being
    received, and complete frames until they are released.
    """

    def __init__(self, max_frame_bytes: int, memory: RequestMemory | None = None) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.memory = memory if memory is not None else RequestMemory()
        self._scratch: bytearray | None = None
        self._scratch_len = 0
        self._frame: bytearray | None = None
        self._frame_size = 0
        self._filled = 0
        self._eager_left = 0
        self._held = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._failed: FrameError | None = None
        self._closed = False

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._failed:
            raise self._failed
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):
                frame = self._grow(frame)
            return memoryview(frame)[self._filled :]
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = _take_scratch()
        return memoryview(scratch)[self._scratch_len :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._eager_left:
                done = min(nbytes, self._eager_left)
                self._eager_left -= done
                self.memory.eager_unfilled -= done
            if self._filled == self._frame_size:
                frame = self._frame
                self._frame = None
                self.memory.partial -= len(frame)
                self._frames.append(frame)
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

    def _charge(self, nbytes: int) -> None:
        self._held += nbytes
        self.memory.used += nbytes

    def release(self, nbytes: int) -> None:
        """Give back the memory of a complete frame of ``nbytes`` (its request is answered)."""
        if self._closed:  # close() gave back everything already
            return
        self._held -= nbytes
        self.memory.used -= nbytes

    def close(self) -> None:
        """Give back everything this reader holds; idempotent."""
        self._closed = True
        mem = self.memory
        if self._frame is not None:
            mem.partial -= len(self._frame)
            self._frame = None
        mem.eager_unfilled -= self._eager_left
        self._eager_left = 0
        mem.used -= self._held
        self._held = 0
        self._frames.clear()
        if self._scratch is not None:
            _give_scratch(self._scratch)
            self._scratch = None
            self._scratch_len = 0

    def _start_frame(self, size: int, head: memoryview) -> None:
        """Begin receiving a large frame whose first ``len(head)`` bytes are in ``head``."""
        avail = len(head)
        mem = self.memory
        unfilled = size - avail
        if (
            size <= mem.eager_frame_bytes
            and mem.eager_unfilled + unfilled <= mem.eager_budget
            and mem.used + size <= mem.limit
        ):
            cap = size
            self._eager_left = unfilled
            mem.eager_unfilled += unfilled
        else:
            cap = min(size, max(GROW_FIRST_BYTES, 2 * avail))
        frame = bytearray(cap)
        frame[:avail] = head
        self._charge(cap)
        mem.partial += cap
        self._frame, self._frame_size, self._filled = frame, size, avail

    def _grow(self, old: bytearray) -> bytearray:
        # Double, but never past the memory bound by more than one small step:
        # a connection that reads once more before the shell pauses it adds
        # at most GROW_FIRST_BYTES over the bound.
        mem = self.memory
        step = min(len(old), max(mem.limit - mem.used, GROW_FIRST_BYTES))
        cap = min(self._frame_size, len(old) + step)
        new = bytearray(cap)
        new[: len(old)] = old
        extra = cap - len(old)
        self._charge(extra)
        mem.partial += extra
        self._frame = new
        return new

    def _drain_scratch(self) -> None:
        scratch = self._scratch
        assert scratch is not None
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
                    self._charge(size)
                    pos += 4 + size
                    continue
                if size > DIRECT_FRAME_BYTES:
                    self._start_frame(size, view[pos + 4 : end])
                    pos = end
                break
        if pos:
            remaining = end - pos
            scratch[:remaining] = scratch[pos:end]
            self._scratch_len = remaining
        if not self._scratch_len:
            _give_scratch(scratch)
            self._scratch = None

    def next_frame(self) -> bytes | bytearray | None:
        return self._frames.popleft() if self._frames else None

    @property
    def buffered_frames(self) -> int:
        return len(self._frames)

    @property
    def receiving(self) -> bool:
        """True while part of a frame has arrived and the rest has not."""
        return self._frame is not None or self._scratch_len > 0

    @property
    def frame_remaining(self) -> int:
        """Bytes still to arrive for the large frame being received (0 if none)."""
        return self._frame_size - self._filled if self._frame is not None else 0


class ServerConnection(_FrameReader):
    """The broker's side of one connection.

    Each request returned by :meth:`next_event` holds ``event.size`` bytes of
    ``memory`` until the caller passes that size to :meth:`release`.
    """

    def __init__(
        self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, memory: RequestMemory | None = None
    ) -> None:
        super().__init__(max_frame_bytes, memory)
        self.raw_tokens = False
        """Frames are raw SASL tokens, not requests (SaslHandshake v0 mode); the
        caller turns it on after answering the handshake and off once
        authentication ends. Frames are parsed when taken, so the switch
        applies to every frame not yet taken."""

    def next_event(self) -> Request | BadRequest | RawToken | None:
        """The next request (or raw token) in arrival order, or None when more
        bytes are needed."""
        frame = self.next_frame()
        if frame is None:
            return None
        if self.raw_tokens:
            return RawToken(bytes(frame), len(frame))
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
        # A client trusts its broker: every response gets its whole buffer at once.
        super().__init__(
            max_frame_bytes, RequestMemory(eager_budget=UNBOUNDED, eager_frame_bytes=UNBOUNDED)
        )
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
        self.release(len(frame))
        corr, api_key, version = self._in_flight.popleft()
        header_version = api.response_header_version(api_key, version)
        header, pos = ResponseHeader.decode_from(frame, 0, header_version)
        if header.correlation_id != corr:
            raise FrameError(f"correlation id {header.correlation_id}, expected {corr}")
        body, _ = api.response_class(api_key).decode_from(frame, pos, version)
        return corr, body
