"""What every SASL mechanism server is: a state machine fed the client's tokens.

A :class:`MechanismServer` takes one client token per :meth:`step` and returns
the token to send back; once :attr:`complete`, :attr:`authorization_id` is the
authenticated user (the principal is ``User:<authorization id>``). A failure
raises :class:`AuthenticationFailed`; its ``message`` goes to the client only
when ``explicit`` (otherwise the client reads Kafka's generic "invalid
credentials" sentence, so an unknown user and a wrong password look alike).
"""

from __future__ import annotations

from typing import Protocol


class AuthenticationFailed(Exception):
    """The client's credentials or tokens were refused."""

    def __init__(self, message: str, *, explicit: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.explicit = explicit


class MechanismServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential stops being valid (an OAUTHBEARER token's ``exp``), if ever."""
        ...

    def step(self, token: bytes, now_ms: int) -> bytes: ...


def generic_failure(mechanism: str) -> str:
    return f"Authentication failed: invalid credentials with SASL mechanism {mechanism}"
