"""SCRAM-SHA-256 and SCRAM-SHA-512 servers (RFC 5802, RFC 7677), as Kafka's.

Two client tokens: client-first (answered with server-first) and
client-final (answered with server-final). Rules:

- the GS2 header must be ``n,,`` or ``n,a=<authzid>,`` (no channel binding);
  an authzid must equal the user name;
- the user's credential is looked up by name for this mechanism
  (:data:`CredentialLookup`: the metadata image's SCRAM credentials); an
  unknown user, or a credential below the mechanism's minimum iterations,
  fails generically;
- extensions other than ``tokenauth`` are ignored; ``tokenauth=true``
  (delegation tokens) is refused;
- the client-final nonce must *end with* the combined nonce (librdkafka
  before 2.6.1 sends client nonce + combined nonce), its channel binding must
  be the base64 GS2 header, and its proof must verify (constant-time compare);
- anything after server-final, or a token out of order, fails.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable

from odradek.broker.net.sasl.base import AuthenticationFailed, generic_failure
from odradek.wire import scram
from odradek.wire.scram import ScramCredential, ScramMechanism

CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(user name, mechanism name) → the stored credential, or None."""


def _nonce() -> str:
    return secrets.token_urlsafe(24)


class ScramServer:
    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup,
                 nonce: Callable[[], str] = _nonce) -> None:
        self.mechanism = mechanism.name
        self._mech = mechanism
        self._lookup = lookup
        self._nonce = nonce
        self._state = "first"
        self._user = ""
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self._cred: ScramCredential | None = None

    def __repr__(self) -> str:
        return f"ScramServer({self.mechanism}, state={self._state})"

    @property
    def complete(self) -> bool:
        return self._state == "done"

    @property
    def authorization_id(self) -> str:
        return self._user if self.complete else ""

    @property
    def credential_expiry_ms(self) -> int | None:
        return None

    def step(self, token: bytes, now_ms: int) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            self._state = "failed"
            raise AuthenticationFailed("SCRAM message is not UTF-8", explicit=True) from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        self._state = "failed"
        raise AuthenticationFailed("Unexpected SCRAM message after authentication",
                                   explicit=True)

    def _fail(self, message: str, explicit: bool = True) -> AuthenticationFailed:
        self._state = "failed"
        return AuthenticationFailed(message, explicit=explicit)

    def _first(self, text: str) -> bytes:
        cbind, sep, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not sep or not sep2 or cbind != "n":
            raise self._fail("Invalid SCRAM client first message: only GS2 header "
                             "'n' (no channel binding) is supported")
        if authz and not authz.startswith("a="):
            raise self._fail("Invalid SCRAM client first message: bad authzid")
        items = bare.split(",")
        if items and items[0].startswith("m="):
            items = items[1:]  # RFC 5802's reserved mandatory extension: ignored, as Kafka does
        try:
            if len(items) < 2 or items[0][:2] != "n=" or items[1][:2] != "r=":
                raise ValueError("expected n= and r=")
            user = scram.unescape_name(items[0][2:])
            client_nonce = items[1][2:]
            authzid = scram.unescape_name(authz[2:]) if authz else ""
        except ValueError as exc:
            raise self._fail(f"Invalid SCRAM client first message: {exc}") from None
        if not user or not scram.is_printable_nonce(client_nonce):
            raise self._fail("Invalid SCRAM client first message")
        # Extensions (key=value) are ignored, but for tokenauth (delegation tokens).
        if any(item.lower() == "tokenauth=true" for item in items[2:]):
            raise self._fail("Delegation tokens are not supported")
        if authzid and authzid != user:
            raise self._fail("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        cred = self._lookup(user, self.mechanism)
        if cred is None or cred.iterations < self._mech.min_iterations:
            raise self._fail(generic_failure(self.mechanism), explicit=False)
        self._user, self._cred = user, cred
        self._gs2 = f"{cbind},{authz},"
        self._client_first_bare = bare
        self._combined_nonce = client_nonce + self._nonce()
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={self._combined_nonce},s={salt},i={cred.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        cred = self._cred
        assert cred is not None
        try:
            attrs = scram.attributes(text)
        except ValueError as exc:
            raise self._fail(f"Invalid SCRAM client final message: {exc}") from None
        if (len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r"
                or attrs[-1][0] != "p"):
            raise self._fail("Invalid SCRAM client final message")
        nonce = attrs[1][1]
        if not nonce.endswith(self._combined_nonce):
            raise self._fail("Invalid SCRAM client final message: nonce mismatch")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True).decode()
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except (binascii.Error, UnicodeDecodeError):
            raise self._fail("Invalid SCRAM client final message: bad base64") from None
        if binding != self._gs2:
            raise self._fail("Invalid SCRAM client final message: channel binding mismatch")
        without_proof = text[: text.rindex(",p=")]
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        h = self._mech.hash_name
        signature = scram.hmac_(h, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail(generic_failure(self.mechanism), explicit=False)
        computed = hashlib.new(h, scram.xor(proof, signature)).digest()
        if not hmac.compare_digest(computed, cred.stored_key):
            raise self._fail(generic_failure(self.mechanism), explicit=False)
        self._state = "done"
        server_signature = scram.hmac_(h, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
