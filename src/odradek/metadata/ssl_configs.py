"""Kafka's broker ``ssl.*`` config names: which exist, which a running broker
takes (the keystore, per broker), which are passwords. Pure names; the TLS
listeners that read them are ``broker/net/tls.py``.

Every key may carry a listener prefix, ``listener.name.<listener>.<key>``
(the listener's name in lower case), which takes precedence for that listener.
"""

from __future__ import annotations

SSL_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
)
"""The ``ssl.*`` keys Odradek reads."""

KEYSTORE_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain"})
"""The keys a running broker takes (Kafka's per-broker dynamic SSL configs that
Odradek applies: a new certificate without a restart)."""

PASSWORD_KEYS = frozenset({"ssl.keystore.password", "ssl.key.password",
                           "ssl.truststore.password", "ssl.keystore.key"})
"""Kafka's PASSWORD-type keys: DescribeConfigs reports them sensitive, without a value."""

JVM_ONLY_KEYS = frozenset({
    "ssl.engine.factory.class", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.provider"})
"""Kafka's JVM-only TLS settings: accepted and ignored."""

_PREFIX = "listener.name."


def listener_prefix(listener: str) -> str:
    """``listener.name.<listener in lower case>.``"""
    return f"{_PREFIX}{listener.lower()}."


def split_listener_key(key: str) -> tuple[str, str] | None:
    """``listener.name.<l>.ssl.x`` → (l, ``ssl.x``) for a key of :data:`SSL_KEYS`
    (or a JVM-only one); None for any other key."""
    if not key.startswith(_PREFIX):
        return None
    listener, dot, inner = key[len(_PREFIX):].partition(".")
    if not dot or not listener or (inner not in SSL_KEYS and inner not in JVM_ONLY_KEYS):
        return None
    return listener, inner


def base_key(key: str) -> str:
    """The key without its listener prefix."""
    split = split_listener_key(key)
    return split[1] if split else key


def is_ssl_key(key: str) -> bool:
    """A key of :data:`SSL_KEYS` or :data:`JVM_ONLY_KEYS`, with or without a listener prefix."""
    return key in SSL_KEYS or key in JVM_ONLY_KEYS or split_listener_key(key) is not None


def is_dynamic_ssl_key(key: str) -> bool:
    """A keystore key (:data:`KEYSTORE_KEYS`), with or without a listener prefix."""
    return is_ssl_key(key) and base_key(key) in KEYSTORE_KEYS


def is_password_key(key: str) -> bool:
    return is_ssl_key(key) and base_key(key) in PASSWORD_KEYS
