"""The client's side of SASL mechanisms: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER.

Each :class:`SaslClient` produces the next token from the server's last one
(:meth:`SaslClient.respond`, given ``None`` for the first), or ``None`` once
the exchange is over. A SCRAM client checks the
server's final signature; a server that cannot prove it knows the password is
an error. :meth:`odradek.client.connection.Connection._authenticate` carries
the tokens in SaslHandshake v1 + SaslAuthenticate requests.
"""

from __future__ import annotations

import base64
import hmac
import secrets

from odradek.client.security import ClientSecurity
from odradek.wire import scram


class SaslError(Exception):
    """The exchange failed on the client's side (bad server message, bad signature)."""


class SaslClient:
    mechanism = ""

    def respond(self, challenge: bytes | None) -> bytes | None:
        raise NotImplementedError


class PlainClient(SaslClient):
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\x00{username}\x00{password}".encode()

    def __repr__(self) -> str:
        return "PlainClient()"

    def respond(self, challenge: bytes | None) -> bytes | None:
        return self._token if challenge is None else None


class OAuthBearerClient(SaslClient):
    mechanism = "OAUTHBEARER"

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "OAuthBearerClient()"

    def respond(self, challenge: bytes | None) -> bytes | None:
        if challenge is None:
            return f"n,,\x01auth=Bearer {self._token}\x01\x01".encode()
        if challenge:  # an error challenge: acknowledge it; the server then fails
            return b"\x01"
        return None


class ScramClient(SaslClient):
    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._mech = scram.MECHANISMS[mechanism]
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={scram.escape_name(username)},r={self._nonce}"
        self._step = 0
        self._server_signature = b""

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism})"

    def respond(self, challenge: bytes | None) -> bytes | None:
        self._step += 1
        if self._step == 1:
            return f"n,,{self._first_bare}".encode()
        if self._step == 2:
            return self._final(challenge or b"")
        self._verify(challenge or b"")
        return None

    def _final(self, challenge: bytes) -> bytes:
        server_first = challenge.decode()
        try:
            attrs = dict(scram.attributes(server_first))
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise SaslError(f"bad SCRAM server-first message: {exc}") from None
        if not nonce.startswith(self._nonce) or iterations < self._mech.min_iterations:
            raise SaslError("bad SCRAM server-first message (nonce or iterations)")
        h = self._mech.hash_name
        salted = scram.salted_password(h, self._password, salt, iterations)
        key = scram.client_key(h, salted)
        stored = scram.credential_from_salted(h, salted, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth = ",".join((self._first_bare, server_first, without_proof)).encode()
        proof = scram.xor(key, scram.hmac_(h, stored.stored_key, auth))
        self._server_signature = scram.hmac_(h, stored.server_key, auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, challenge: bytes) -> None:
        text = challenge.decode(errors="replace")
        if text.startswith("e="):
            raise SaslError(f"SCRAM server error: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
                base64.b64decode(text[2:]), self._server_signature):
            raise SaslError("the server's SCRAM signature does not verify")


def client_for(security: ClientSecurity) -> SaslClient:
    """The mechanism client of ``security``; SaslError for a mechanism not spoken."""
    mech = security.sasl_mechanism.upper()
    if mech == "PLAIN":
        return PlainClient(security.sasl_username, security.sasl_password)
    if mech in scram.MECHANISMS:
        return ScramClient(mech, security.sasl_username, security.sasl_password)
    if mech == "OAUTHBEARER":
        return OAuthBearerClient(security.sasl_oauth_token)
    raise SaslError(f"SASL mechanism {security.sasl_mechanism} is not supported by this client "
                    "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)")
