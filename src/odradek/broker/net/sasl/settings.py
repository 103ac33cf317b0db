"""A listener's SASL settings, read by Kafka's names.

Keys, each looked up first with the listener and mechanism prefix
(``listener.name.<listener>.<mechanism>.<key>``, both lower case), then with
the listener prefix (``listener.name.<listener>.<key>``), then bare:

- ``sasl.enabled.mechanisms`` (listener prefix or bare; Kafka's default
  ``GSSAPI``, which Odradek does not serve): the mechanisms offered;
- ``sasl.jaas.config``: PLAIN's users are the ``user_<name>="<password>"``
  options of its ``PlainLoginModule``; OAUTHBEARER's unsecured validator
  reads its ``unsecuredValidator*`` options;
- ``connections.max.reauth.ms`` (0): KIP-368 session lifetime;
- ``sasl.server.max.receive.size`` (524288), ``connection.failed.authentication.delay.ms`` (100);
- OAUTHBEARER: ``sasl.oauthbearer.jwks.endpoint.url`` (when set, tokens are
  signed JWTs checked against that key set, else unsecured JWS),
  ``sasl.oauthbearer.expected.audience``, ``sasl.oauthbearer.expected.issuer``,
  ``sasl.oauthbearer.sub.claim.name`` (``sub``), ``sasl.oauthbearer.scope.claim.name``
  (``scope``), ``sasl.oauthbearer.clock.skew.seconds`` (30).

An enabled mechanism Odradek cannot serve (GSSAPI), or PLAIN without users, is
left out; a listener left with none is a :class:`SaslConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from odradek.broker.net.sasl.authenticator import SessionSettings
from odradek.broker.net.sasl.base import MechanismServer
from odradek.broker.net.sasl.oauthbearer import OAUTHBEARER, OAuthBearerServer, UnsecuredValidator
from odradek.broker.net.sasl.plain import PLAIN, PlainServer, plain_users
from odradek.broker.net.sasl.scram import CredentialLookup, ScramServer
from odradek.common.jaas import JaasError, LoginModule, single_module
from odradek.wire.scram import MECHANISMS as SCRAM_MECHANISMS

if TYPE_CHECKING:  # cryptography is imported only by a listener that verifies JWTs
    from odradek.broker.net.sasl.jwt import JwtValidator, KeySet

Get = Callable[[str], str]
"""A configuration lookup: the value of a key, ``""`` when unset."""
JwksSource = Callable[[str], Callable[[], "KeySet"]]
"""A JWKS URL → a callable returning its current key set (the shell fetches)."""

SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
DEFAULTS = {
    "sasl.enabled.mechanisms": "GSSAPI",
    "connections.max.reauth.ms": "0",
    "sasl.server.max.receive.size": "524288",
    "connection.failed.authentication.delay.ms": "100",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.clock.skew.seconds": "30",
}


class SaslConfigError(ValueError):
    """A listener's SASL settings cannot be served; one sentence naming the key."""


def lookup(get: Get, listener: str, key: str, mechanism: str = "") -> str:
    """The value of ``key`` for ``listener`` (and ``mechanism``), most specific first."""
    prefix = f"listener.name.{listener.lower()}."
    names = ([f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []) + [prefix + key, key]
    for name in names:
        value = get(name)
        if value.strip():
            return value.strip()
    return DEFAULTS.get(key, "")


def _int(get: Get, listener: str, key: str, mechanism: str = "") -> int:
    text = lookup(get, listener, key, mechanism)
    try:
        value = int(text)
    except ValueError:
        raise SaslConfigError(f"{key}: expected an integer, got {text!r}") from None
    if value < 0:
        raise SaslConfigError(f"{key}: must not be negative")
    return value


def jaas_module(get: Get, listener: str, mechanism: str) -> LoginModule | None:
    text = lookup(get, listener, "sasl.jaas.config", mechanism)
    if not text:
        return None
    try:
        return single_module(text)
    except JaasError as exc:
        raise SaslConfigError(f"listener {listener}, {mechanism}: {exc}") from None


def enabled_mechanisms(get: Get, listener: str) -> list[str]:
    text = lookup(get, listener, "sasl.enabled.mechanisms")
    return [m.strip().upper() for m in text.split(",") if m.strip()]


def listener_settings(get: Get, listener: str, scram: CredentialLookup,
                      jwks: JwksSource | None = None,
                      warn: Callable[[str], None] | None = None) -> SessionSettings:
    """The SASL settings of ``listener``; SaslConfigError when it can serve no mechanism."""
    enabled = enabled_mechanisms(get, listener)
    servers: dict[str, Callable[[], MechanismServer]] = {}
    skipped: list[str] = []
    for mech in enabled:
        factory = _server_factory(get, listener, mech, scram, jwks, warn)
        if factory is None:
            skipped.append(mech)
        else:
            servers[mech] = factory
    if not servers:
        raise SaslConfigError(
            f"listener {listener}: sasl.enabled.mechanisms={','.join(enabled) or '(empty)'} "
            f"leaves no mechanism Odradek can serve; set it (or listener.name."
            f"{listener.lower()}.sasl.enabled.mechanisms) to some of "
            f"{', '.join(SERVED_MECHANISMS)}, PLAIN with a JAAS config listing its users")
    if skipped and warn is not None:
        warn(f"listener {listener}: not offering SASL mechanism(s) {', '.join(skipped)} "
             "(not served, or PLAIN without users)")
    return SessionSettings(
        mechanisms=tuple(servers),
        servers=servers,
        reauth_ms={m: _int(get, listener, "connections.max.reauth.ms", m) for m in servers},
        max_receive_size=_int(get, listener, "sasl.server.max.receive.size"),
        failed_delay_ms=_int(get, listener, "connection.failed.authentication.delay.ms"),
    )


def _server_factory(get: Get, listener: str, mech: str, scram: CredentialLookup,
                    jwks: JwksSource | None, warn: Callable[[str], None] | None
                    ) -> Callable[[], MechanismServer] | None:
    if mech == PLAIN:
        module = jaas_module(get, listener, mech)
        users = plain_users(module.options) if module is not None else {}
        return partial(PlainServer, users) if users else None
    if mech in SCRAM_MECHANISMS:
        return partial(ScramServer, SCRAM_MECHANISMS[mech], scram)
    if mech == OAUTHBEARER:
        url = lookup(get, listener, "sasl.oauthbearer.jwks.endpoint.url", mech)
        validator: UnsecuredValidator | JwtValidator
        if url:
            from odradek.broker.net.sasl.jwt import JwtValidator

            if jwks is None:
                raise SaslConfigError("sasl.oauthbearer.jwks.endpoint.url: no JWKS source")
            validator = JwtValidator(
                jwks(url),
                audience=lookup(get, listener, "sasl.oauthbearer.expected.audience", mech),
                issuer=lookup(get, listener, "sasl.oauthbearer.expected.issuer", mech),
                sub_claim=lookup(get, listener, "sasl.oauthbearer.sub.claim.name", mech),
                scope_claim=lookup(get, listener, "sasl.oauthbearer.scope.claim.name", mech),
                skew_s=_int(get, listener, "sasl.oauthbearer.clock.skew.seconds", mech))
        else:
            module = jaas_module(get, listener, mech)
            try:
                validator = UnsecuredValidator(module.options if module is not None else {})
            except ValueError as exc:
                raise SaslConfigError(f"listener {listener}, OAUTHBEARER: {exc}") from None
        return partial(OAuthBearerServer, validator, warn)
    return None


class NodeConfig(Protocol):
    """What :func:`inter_broker_sasl` reads of a broker configuration (``BrokerConfig``)."""

    def get(self, key: str) -> str: ...

    def controller_listener_names(self) -> list[str]: ...


def inter_broker_sasl(config: NodeConfig, listener_name: str) -> tuple[str, str, str]:
    """(mechanism, username, password) this node authenticates with when it
    connects to ``listener_name`` of another node (a SASL_* listener): the
    mechanism is ``sasl.mechanism.controller.protocol`` for a controller
    listener, else ``sasl.mechanism.inter.broker.protocol`` (both GSSAPI by
    default), the identity the ``username``/``password`` options of that
    listener's JAAS config for the mechanism (Kafka's rule). SaslConfigError
    when they are missing or the mechanism is not served."""
    controller = listener_name.upper() in config.controller_listener_names()
    key = ("sasl.mechanism.controller.protocol" if controller
           else "sasl.mechanism.inter.broker.protocol")
    mechanism = (config.get(key).strip() or "GSSAPI").upper()
    if mechanism not in SERVED_MECHANISMS or mechanism == OAUTHBEARER:
        raise SaslConfigError(f"{key}={mechanism}: a node authenticates to its peers with "
                              "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    module = jaas_module(config.get, listener_name, mechanism)
    options = module.options if module is not None else {}
    username, password = options.get("username", ""), options.get("password", "")
    if not username or not password:
        raise SaslConfigError(
            f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config: "
            "needs username and password options, the identity this node authenticates with")
    return mechanism, username, password
