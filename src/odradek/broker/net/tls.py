"""TLS for listeners: each SSL and SASL_SSL listener's server context, built from
the broker config with Kafka's ``ssl.*`` names, and the client identity this
node uses towards other nodes.

A listener's setting is ``listener.name.<listener, lower case>.<key>`` when that
is set, else ``<key>`` (Kafka's per-listener override). ``ssl.client.auth``
is the exception Kafka makes: on a SASL_SSL listener only the listener-prefixed
key counts (clients there authenticate with SASL).

:class:`ListenerTls` holds the contexts of every TLS listener for the server
(one ``ssl.SSLContext`` per listener, shared by all its connections, with the
principal mapping of ``ssl.principal.mapping.rules``). A dynamic change of a
listener's keystore (``IncrementalAlterConfigs`` on this broker's resource:
:data:`~odradek.metadata.ssl_configs.KEYSTORE_KEYS`) loads the new key and
chain into the *same* context:
new handshakes present the new certificate, connections already open keep
theirs (OpenSSL copies the certificate into each connection). A keystore that
does not load is logged and the old one kept.

:func:`broker_client_security` is the one place the node's own outgoing
connections (controller channel, quorum, replica fetchers, broker channel)
get their TLS settings: those of the listener they connect to, its keystore
as this node's client certificate.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.broker.cluster_config import KraftSettings, effective_protocol_map
from odradek.broker.listeners import ConfigError
from odradek.broker.net.ssl_principal import PrincipalMapper, RuleError
from odradek.metadata.ssl_configs import (
    KEYSTORE_KEYS,
    SSL_KEYS,
    listener_prefix,
    split_listener_key,
)

if TYPE_CHECKING:
    from odradek.client.security import ClientSecurity

# odradek.client (the keystore readers, ClientSecurity) is imported where it is
# used: a plaintext broker's start-up does not load the client package.

log = logging.getLogger("odradek.broker.tls")

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


Lookup = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """The effective ``ssl.*`` settings of one listener and where each came from."""

    listener: str
    protocol: str
    props: dict[str, str]
    origins: dict[str, str]

    def origin(self, key: str) -> str:
        return self.origins.get(key, key)


def listener_settings(get: Lookup, listener: str, protocol: str) -> ListenerSettings:
    """``get``: the broker config's lookup (``BrokerConfig.get``)."""
    prefix = listener_prefix(listener)
    props: dict[str, str] = {}
    origins: dict[str, str] = {}
    for key in SSL_KEYS:
        own = get(prefix + key)
        if own:
            props[key], origins[key] = own, prefix + key
        elif key == "ssl.client.auth" and protocol == "SASL_SSL":
            continue  # Kafka: only the listener's own ssl.client.auth applies to SASL_SSL
        elif get(key):
            props[key], origins[key] = get(key), key
    return ListenerSettings(listener, protocol, props, origins)


def _mapper(settings: ListenerSettings) -> PrincipalMapper:
    try:
        return PrincipalMapper.from_text(settings.props.get("ssl.principal.mapping.rules", ""))
    except RuleError as exc:
        raise ConfigError(str(exc).replace("ssl.principal.mapping.rules",
                                           settings.origin("ssl.principal.mapping.rules"), 1)) \
            from None


def server_context(settings: ListenerSettings) -> ssl.SSLContext:
    """The server context of a TLS listener (ConfigError, one line, naming the key)."""
    origin = settings.origin
    props = settings.props
    auth = props.get("ssl.client.auth", "none").strip().lower() or "none"
    if auth not in CLIENT_AUTH:
        raise ConfigError(f"{origin('ssl.client.auth')}: expected none, requested or required, "
                          f"got {auth!r}")
    from odradek.client.keystores import StoreError, apply_protocols, load_keystore, load_truststore

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        apply_protocols(ctx, props, origin)
        if not load_keystore(ctx, props, origin):
            raise ConfigError(
                f"listener {settings.listener} ({settings.protocol}) needs a keystore: set "
                f"ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain"
                f"), or the same under {listener_prefix(settings.listener)}")
        ctx.verify_mode = CLIENT_AUTH[auth]
        if auth != "none" and not load_truststore(ctx, props, origin):
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    return ctx


def reload_keystore(ctx: ssl.SSLContext, settings: ListenerSettings) -> None:
    """Load the listener's (new) key and chain into its live context. They are
    loaded into a scratch context first: a key that does not match its
    certificate fails there, not halfway through the live one (OpenSSL would
    keep the new certificate with the old key)."""
    from odradek.client.keystores import StoreError, load_keystore

    try:
        if not load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings.props,
                             settings.origin):
            raise ConfigError(f"listener {settings.listener}: no keystore is set")
        load_keystore(ctx, settings.props, settings.origin)
    except StoreError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(slots=True)
class TlsListener:
    """One TLS listener's context and principal mapping."""

    settings: ListenerSettings
    context: ssl.SSLContext
    mapper: PrincipalMapper


class ListenerTls:
    """The TLS listeners of a broker config (built at start-up, before anything
    else, so a bad keystore stops the broker at once)."""

    def __init__(self, listeners: Mapping[str, TlsListener]) -> None:
        self.listeners = dict(listeners)

    @classmethod
    def for_config(cls, config: KraftSettings) -> ListenerTls:
        protocols = effective_protocol_map(config)
        out: dict[str, TlsListener] = {}
        for lis in config.listeners():
            protocol = protocols.get(lis.name, "PLAINTEXT")
            if protocol not in TLS_PROTOCOLS:
                continue
            settings = listener_settings(config.get, lis.name, protocol)
            out[lis.name] = TlsListener(settings, server_context(settings), _mapper(settings))
        return cls(out)

    def get(self, listener: str) -> TlsListener | None:
        return self.listeners.get(listener)

    def reconfigure(self, config: KraftSettings, changed: set[str]) -> None:
        """Dynamic configs changed: reload the keystore of each TLS listener whose
        keystore keys are among ``changed``; one that fails keeps its old one."""
        for name, tls in self.listeners.items():
            prefix = listener_prefix(name)
            if not any(k in KEYSTORE_KEYS or (k.startswith(prefix) and k[len(prefix):]
                                              in KEYSTORE_KEYS) for k in changed):
                continue
            settings = listener_settings(config.get, name, tls.settings.protocol)
            try:
                reload_keystore(tls.context, settings)
            except ConfigError as exc:
                log.warning("listener %s keeps its keystore: the new one does not load: %s",
                            name, exc)
                continue
            tls.settings = settings
            log.info("listener %s: keystore reloaded; new connections get the new certificate",
                     name)


def validate_ssl_keys(get: Lookup, keys: list[str]) -> None:
    """Values that must parse whatever listener uses them (ConfigError, one line)."""
    for key in keys:
        split = split_listener_key(key)
        base = split[1] if split else key
        value = get(key).strip()
        if base == "ssl.client.auth" and value.lower() not in CLIENT_AUTH:
            raise ConfigError(f"{key}: expected none, requested or required, got {value!r}")
        if base == "ssl.endpoint.identification.algorithm" and value.lower() not in ("", "https"):
            raise ConfigError(f"{key}: expected https or empty, got {value!r}")
        if base == "ssl.principal.mapping.rules":
            try:
                PrincipalMapper.from_text(value)
            except RuleError as exc:
                raise ConfigError(str(exc).replace("ssl.principal.mapping.rules", key, 1)) \
                    from None


def broker_client_security(config: KraftSettings, listener_name: str | None) -> ClientSecurity:
    """How this node connects to a peer's ``listener_name`` (the inter-broker or a
    controller listener): plaintext, or TLS with the listener's truststore and
    its keystore as this node's certificate (``ssl.endpoint.identification.algorithm``,
    https by default, checks the peer's host name), and on a SASL_* listener the
    identity :func:`odradek.broker.net.sasl.settings.inter_broker_sasl` reads
    (``sasl.mechanism.inter.broker.protocol`` or ``.controller.protocol``, the
    listener's JAAS ``username``/``password``). None: plaintext."""
    from odradek.client.keystores import StoreError, apply_protocols, load_keystore, load_truststore
    from odradek.client.security import PLAINTEXT, ClientSecurity

    if not listener_name:
        return PLAINTEXT
    protocol = effective_protocol_map(config).get(listener_name.upper(), "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    mechanism, username, password = "GSSAPI", "", ""
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        from odradek.broker.net.sasl.settings import SaslConfigError, inter_broker_sasl

        try:
            mechanism, username, password = inter_broker_sasl(config, listener_name)
        except SaslConfigError as exc:
            raise ConfigError(str(exc)) from None
    if protocol not in TLS_PROTOCOLS:
        return ClientSecurity(protocol=protocol, sasl_mechanism=mechanism,
                              sasl_username=username, sasl_password=password)
    settings = listener_settings(config.get, listener_name.upper(), protocol)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    check = settings.props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    ctx.check_hostname = check
    try:
        apply_protocols(ctx, settings.props, settings.origin)
        load_keystore(ctx, settings.props, settings.origin)
        if not load_truststore(ctx, settings.props, settings.origin):
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    return ClientSecurity(protocol=protocol, ssl_context=ctx, check_hostname=check,
                          sasl_mechanism=mechanism, sasl_username=username,
                          sasl_password=password)


def inter_broker_listener(config: KraftSettings) -> str | None:
    """The listener brokers reach each other on: ``inter.broker.listener.name``,
    else the listener whose protocol is ``security.inter.broker.protocol``, else
    None (the first advertised one, plaintext as before)."""
    name = config.get("inter.broker.listener.name").strip().upper()
    if name:
        return name
    wanted = config.get("security.inter.broker.protocol").strip().upper()
    if wanted:
        protocols = effective_protocol_map(config)
        for lis in config.listeners():
            if protocols.get(lis.name) == wanted and lis.name not in \
                    config.controller_listener_names():
                return str(lis.name)
    return None


def controller_listener(config: KraftSettings) -> str | None:
    """The listener this node reaches controllers on (the first of
    ``controller.listener.names``)."""
    names = config.controller_listener_names()
    return names[0] if names else None
