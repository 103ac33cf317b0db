"""SCRAM against RFC 5802 (SHA-1) and RFC 7677 (SHA-256) test vectors: the
server and the client compute the messages and signatures of the RFCs."""

from __future__ import annotations

import base64

import pytest

from odradek.broker.net.sasl.base import AuthenticationFailed
from odradek.broker.net.sasl.scram import ScramServer
from odradek.client.sasl import ScramClient
from odradek.wire import scram
from odradek.wire.scram import ScramMechanism

SHA1 = ScramMechanism("SCRAM-SHA-1", 9, "sha1")
VECTORS = [
    # mechanism, client nonce, server nonce part, salt, client-final, server-final
    (SHA1, "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j", "QSXCR+Q6sek8bf92",
     "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
     "v=rmF9pqV8S7suAoZWja4dJRkFsKQ="),
    (scram.SCRAM_SHA_256, "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
     "W22ZaJ0SNY7soEsUEjb6gQ==",
     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
]


@pytest.mark.parametrize(("mech", "cnonce", "snonce", "salt", "final", "server_final"), VECTORS)
def test_rfc_vectors(mech: ScramMechanism, cnonce: str, snonce: str, salt: str, final: str,
                     server_final: str) -> None:
    cred = scram.credential(mech.hash_name, "pencil", base64.b64decode(salt), 4096)
    server = ScramServer(mech, lambda user, _m: cred if user == "user" else None,
                         nonce=lambda: snonce)
    client = ScramClient.__new__(ScramClient)
    ScramClient.__init__(client, "SCRAM-SHA-256", "user", "pencil", nonce=cnonce)
    client._mech = mech  # the RFC's hash
    first = client.respond(None)
    assert first == f"n,,n=user,r={cnonce}".encode()
    server_first = server.step(first, 0)
    assert server_first == f"r={cnonce}{snonce},s={salt},i=4096".encode()
    client_final = client.respond(server_first)
    assert client_final == final.encode()
    assert server.step(client_final, 0) == server_final.encode()
    assert server.complete and server.authorization_id == "user"
    assert client.respond(server_final.encode()) is None  # the client checks the signature


def _server(password: str = "pw") -> ScramServer:
    cred = scram.credential("sha256", password, b"salt", 4096)
    return ScramServer(scram.SCRAM_SHA_256, lambda u, _m: cred if u == "a,b=c" else None,
                       nonce=lambda: "SERVER")


def test_names_are_escaped() -> None:
    assert scram.escape_name("a,b=c") == "a=2Cb=3Dc"
    assert scram.unescape_name("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        scram.unescape_name("a=2Xb")
    server = _server()
    client = ScramClient("SCRAM-SHA-256", "a,b=c", "pw")
    server_first = server.step(client.respond(None) or b"", 0)
    server.step(client.respond(server_first) or b"", 0)
    assert server.authorization_id == "a,b=c"


def test_wrong_password_and_unknown_user_fail_alike() -> None:
    msgs = []
    for user, pw in (("a,b=c", "wrong"), ("nobody", "pw")):
        server = _server()
        client = ScramClient("SCRAM-SHA-256", user, pw)
        with pytest.raises(AuthenticationFailed) as info:
            server_first = server.step(client.respond(None) or b"", 0)
            server.step(client.respond(server_first) or b"", 0)
        assert not info.value.explicit
        msgs.append(info.value.message)
        assert not server.complete
    assert msgs[0] == msgs[1]


def test_too_few_stored_iterations_fail() -> None:
    cred = scram.credential("sha256", "pw", b"salt", 1000)
    server = ScramServer(scram.SCRAM_SHA_256, lambda u, _m: cred)
    with pytest.raises(AuthenticationFailed):
        server.step(b"n,,n=u,r=abc", 0)


def test_unknown_extensions_are_ignored_and_m_too() -> None:
    out = _server().step(b"n,,n=a=2Cb=3Dc,r=abc,ext=1", 0)
    assert out.startswith(b"r=abcSERVER,")
    out = _server().step(b"n,,m=reserved,n=a=2Cb=3Dc,r=abc", 0)
    assert out.startswith(b"r=abcSERVER,")


def test_credential_from_salted_matches_password_derivation() -> None:
    salted = scram.salted_password("sha512", "secret", b"salt", 4096)
    assert scram.credential_from_salted("sha512", salted, b"salt", 4096) == scram.credential(
        "sha512", "secret", b"salt", 4096)
    text = repr(scram.credential("sha512", "secret", b"s", 4096))
    assert "stored_key" not in text and "server_key" not in text
