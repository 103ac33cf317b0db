"""The little HTTP/1.1 the metrics and health endpoint speaks: request heads in,
response bytes out. Pure: no sockets, no clock (the server in
:mod:`odradek.broker.observe.server` reads and writes).

A request head is the request line and the header lines, each ended by CRLF,
then an empty line (RFC 9112 §2.1). Accepted: ``METHOD SP TARGET SP
HTTP/1.0|HTTP/1.1``, the method a token, the target an origin form (starting
with ``/``, printable ASCII), at most :data:`MAX_HEADERS` header fields of the
form ``name ":" OWS value OWS`` (the name a token, no whitespace before the
colon, no obsolete line folding). A request with a body (``Content-Length``
other than 0, or any ``Transfer-Encoding``) is refused: the endpoint has no
use for one, and not reading it would desynchronise the connection. Anything
else is :class:`HttpError` 400 (505 for another HTTP version), after which the
server answers and closes. The head's size bound is the server's (431).

Invariant: a parsed :class:`HttpRequest` has a known version, a target starting
with ``/`` and lower-cased header names, each once (repeated fields are joined
with ``", "``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_HEAD_BYTES = 8192
"""The largest request head (request line and headers) read; more is 431."""
MAX_HEADERS = 64
"""The most header fields in a request; more is 431."""

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(rb"/[\x21-\x7e]*")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


class HttpError(Exception):
    """A request refused before it reaches a route: answered with ``status`` and
    ``message`` (one line), then the connection is closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    target: str
    version: str
    """``HTTP/1.0`` or ``HTTP/1.1``."""
    headers: dict[str, str]
    """Lower-cased names; a repeated field's values joined with ``", "``."""

    @property
    def path(self) -> str:
        """The target without its query."""
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        """Whether the connection stays open after the answer (HTTP/1.1 unless
        ``Connection: close``; HTTP/1.0 only with ``Connection: keep-alive``)."""
        options = {o.strip().lower() for o in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.1":
            return "close" not in options
        return "keep-alive" in options


def parse_head(head: bytes) -> HttpRequest:
    """Parse a request head (ending with the empty line, or without it). Raises
    :class:`HttpError` (see the module for what is accepted)."""
    if head.endswith(b"\r\n\r\n"):
        head = head[:-4]
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if not _TOKEN.fullmatch(method):
        raise HttpError(400, "malformed method")
    if not _TARGET.fullmatch(target):
        raise HttpError(400, "malformed request target")
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        if re.fullmatch(rb"HTTP/\d\.\d", version):
            raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
        raise HttpError(400, "malformed HTTP version")
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431, f"more than {MAX_HEADERS} header fields")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise HttpError(400, "malformed header field")
        value = value.strip(b" \t")
        if not _VALUE.fullmatch(value):
            raise HttpError(400, "malformed header value")
        key = name.decode("ascii").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    if headers.get("content-length", "0").strip() != "0" or "transfer-encoding" in headers:
        raise HttpError(400, "a request body is not accepted")
    return HttpRequest(method.decode("ascii"), target.decode("ascii"),
                       version.decode("ascii"), headers)


def response(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", *,
             head_only: bool = False, close: bool = False,
             extra: Iterable[tuple[str, str]] = ()) -> bytes:
    """A whole HTTP/1.1 response: status line, ``Content-Type``,
    ``Content-Length`` (of ``body`` even for a HEAD, whose body is left out),
    ``Connection: close`` when ``close``, the ``extra`` fields, then the body."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}",
             f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
             "Cache-Control: no-store"]
    if close:
        lines.append("Connection: close")
    lines += [f"{k}: {v}" for k, v in extra]
    out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return out if head_only else out + body


def prefers_openmetrics(accept: str) -> bool:
    """Whether an ``Accept`` header asks for OpenMetrics text at least as much as
    for anything else it names (Prometheus sends
    ``application/openmetrics-text;version=1.0.0,...,text/plain;version=0.0.4;q=0.5``).
    Missing or unparsable: False (Prometheus text)."""
    best_other = 0.0
    openmetrics = 0.0
    for item in accept.split(","):
        fields = [f.strip() for f in item.split(";")]
        media = fields[0].lower()
        q = 1.0
        for f in fields[1:]:
            k, _, v = f.partition("=")
            if k.strip().lower() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if media == "application/openmetrics-text":
            openmetrics = max(openmetrics, q)
        elif media and media != "*/*":
            best_other = max(best_other, q)
    return openmetrics > 0 and openmetrics >= best_other
