"""The metrics endpoint's HTTP/1.1 parsing and answers (odradek.broker.observe.http)."""

from __future__ import annotations

import pytest

from odradek.broker.observe.http import (
    MAX_HEADERS,
    HttpError,
    parse_head,
    prefers_openmetrics,
    response,
)


def test_a_get_with_headers_is_parsed_with_lower_cased_names() -> None:
    req = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept:  text/plain \r\n"
                     b"X-A: 1\r\nx-a: 2\r\n\r\n")
    assert (req.method, req.target, req.path, req.version) == (
        "GET", "/metrics?x=1", "/metrics", "HTTP/1.1")
    assert req.headers == {"host": "a", "accept": "text/plain", "x-a": "1, 2"}
    assert req.keep_alive


@pytest.mark.parametrize(("head", "keep"), [
    (b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", False),
    (b"GET / HTTP/1.0\r\n\r\n", False),
    (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", True),
])
def test_keep_alive_follows_the_version_and_connection_header(head: bytes, keep: bool) -> None:
    assert parse_head(head).keep_alive is keep


@pytest.mark.parametrize(("head", "status"), [
    (b"GET /\r\n\r\n", 400),                                    # no version
    (b"GET  / HTTP/1.1\r\n\r\n", 400),                          # two spaces
    (b"GET metrics HTTP/1.1\r\n\r\n", 400),                     # not an origin form
    (b"G(T / HTTP/1.1\r\n\r\n", 400),                           # not a token
    (b"GET /a\x00b HTTP/1.1\r\n\r\n", 400),                     # a control byte
    (b"GET / HTTP/2.0\r\n\r\n", 505),
    (b"GET / FOO/1.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost a\r\n\r\n", 400),                 # no colon
    (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),               # space before the colon
    (b"GET / HTTP/1.1\r\n folded\r\n\r\n", 400),                # obsolete line folding
    (b"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", 400),      # a body
    (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", 431),
])
def test_malformed_heads_are_refused_with_their_status(head: bytes, status: int) -> None:
    with pytest.raises(HttpError) as err:
        parse_head(head)
    assert err.value.status == status


def test_a_response_carries_its_length_and_a_head_leaves_the_body_out() -> None:
    full = response(200, b"hello", "text/plain", close=True, extra=[("Allow", "GET")])
    assert full.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Length: 5\r\n" in full and b"Connection: close\r\n" in full
    assert b"Allow: GET\r\n" in full and full.endswith(b"\r\n\r\nhello")
    head = response(200, b"hello", head_only=True)
    assert b"Content-Length: 5\r\n" in head and head.endswith(b"\r\n\r\n")


@pytest.mark.parametrize(("accept", "openmetrics"), [
    ("", False),
    ("text/plain", False),
    ("*/*", False),
    ("application/openmetrics-text", True),
    ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", True),
    ("text/plain;version=0.0.4,application/openmetrics-text;q=0.5", False),
    ("application/openmetrics-text;q=0", False),
    ("application/openmetrics-text;q=bad", False),
])
def test_openmetrics_is_chosen_when_accept_prefers_it(accept: str, openmetrics: bool) -> None:
    assert prefers_openmetrics(accept) is openmetrics
