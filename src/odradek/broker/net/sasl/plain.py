"""SASL/PLAIN (RFC 4616) against the users of a JAAS config.

The client sends one token, ``[authzid] NUL authcid NUL password`` (UTF-8,
exactly three fields). An empty user name or password, an authzid that is
neither empty nor the user name, an unknown user or a wrong password fail;
the server answers an empty token on success. Passwords are compared in
constant time. Users are the ``user_<name>="<password>"`` options of the
listener's ``PlainLoginModule``.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.broker.net.sasl.base import AuthenticationFailed, generic_failure

PLAIN = "PLAIN"


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """``user_<name>`` JAAS options → {name: password}."""
    return {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}


class PlainServer:
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user = ""

    def __repr__(self) -> str:
        return f"PlainServer(users={len(self._users)}, complete={self.complete})"

    @property
    def complete(self) -> bool:
        return bool(self._user)

    @property
    def authorization_id(self) -> str:
        return self._user

    @property
    def credential_expiry_ms(self) -> int | None:
        return None

    def step(self, token: bytes, now_ms: int) -> bytes:
        if self._user:
            raise AuthenticationFailed("PLAIN takes a single token", explicit=True)
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("PLAIN token is not UTF-8", explicit=True) from None
        parts = text.split("\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens",
                                       explicit=True)
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified",
                                       explicit=True)
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified",
                                       explicit=True)
        expected = self._users.get(user)
        # Compare even for an unknown user, so its answer takes as long.
        good = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not good:
            raise AuthenticationFailed(generic_failure(PLAIN))
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username", explicit=True)
        self._user = user
        return b""
