"""THE SECURITY TABLE: what the client-suite runner configures on the Odradek
broker for each transport the suites ask for, in Kafka's own key names.

This is the integrator's switch. Each feature (``tls``, ``sasl``, ``acl``) has
a row in :data:`SWITCHES`:

``"auto"`` (the default)
    on when the Odradek under test knows every key the feature sets (its
    config reports none of them unknown), off otherwise; so the suites'
    SASL, SSL and ACL tests start running by themselves once those branches
    are merged, and are *skipped, with the reason* until then.
``"on"``
    always on: the broker gets the keys whether it knows them or not (a
    broker that does not ignores them with a warning, and the tests fail:
    use this to see what is missing).
``"off"``
    never: the tests that need it are skipped.

``python -m tools.client_suites run --security sasl=on,tls=off`` overrides a
row for one run.

The properties below are what Kafka's own test fixtures set (kafka-python's
``test/integration/fixtures.py`` renders the same keys into its
``kafka.properties``), except that:

* every broker also has a plain ``SETUP`` listener (``PLAINTEXT`` protocol)
  on another port: the runner uses it to see that the broker is up and to
  create the SCRAM users the suites log in as (AlterUserScramCredentials,
  where Kafka's fixture runs ``kafka-storage.sh format --add-scram``);
* keystores are PEM files (``ssl.keystore.type=PEM``), written by
  :mod:`tools.client_suites.certs`, where Kafka's fixture uses JKS, which
  Python cannot read.

Placeholders: ``{port}`` the client listener's port, ``{setup_port}`` the
SETUP listener's, ``{certs}`` the folder of :mod:`~tools.client_suites.certs`,
``{mechanism}`` the SASL mechanism (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``), ``{user}``/``{password}`` the suite's login.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# --------------------------------------------------------------------------
# The switches: "auto", "on" or "off" per feature (see the module docstring).
# --------------------------------------------------------------------------
SWITCHES: dict[str, str] = {
    "tls": "auto",
    "sasl": "auto",
    "acl": "auto",
}

# --------------------------------------------------------------------------
# The table: broker properties per feature, Kafka's names.
# --------------------------------------------------------------------------
LISTENERS: dict[str, dict[str, str]] = {
    # Every transport: the client listener, named after its protocol, and SETUP.
    "PLAINTEXT": {
        "listeners": "PLAINTEXT://127.0.0.1:{port},SETUP://127.0.0.1:{setup_port}",
        "advertised.listeners": "PLAINTEXT://localhost:{port},SETUP://127.0.0.1:{setup_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SETUP:PLAINTEXT",
    },
    "SSL": {
        "listeners": "SSL://127.0.0.1:{port},SETUP://127.0.0.1:{setup_port}",
        "advertised.listeners": "SSL://localhost:{port},SETUP://127.0.0.1:{setup_port}",
        "listener.security.protocol.map": "SSL:SSL,SETUP:PLAINTEXT",
    },
    "SASL_PLAINTEXT": {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:{port},SETUP://127.0.0.1:{setup_port}",
        "advertised.listeners": "SASL_PLAINTEXT://localhost:{port},SETUP://127.0.0.1:{setup_port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,SETUP:PLAINTEXT",
    },
    "SASL_SSL": {
        "listeners": "SASL_SSL://127.0.0.1:{port},SETUP://127.0.0.1:{setup_port}",
        "advertised.listeners": "SASL_SSL://localhost:{port},SETUP://127.0.0.1:{setup_port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SETUP:PLAINTEXT",
    },
}

TLS: dict[str, str] = {
    # Server identity: a PEM file with the PKCS#8 key and the chain (server, CA);
    # clients trust {certs}/ca-cert. No client certificates asked for.
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "{certs}/server.keystore.pem",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "{certs}/ca-cert",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
}

SASL: dict[str, str] = {
    "sasl.enabled.mechanisms": "{mechanism}",
    # PLAIN: the users are in the JAAS config (user_<name>="<password>").
    "listener.name.{listener}.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="{user}" password="{password}" user_{user}="{password}";',
    # SCRAM: the users are UserScramCredentialRecords, created through SETUP.
    "listener.name.{listener}.scram-sha-256.sasl.jaas.config":
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="{user}" password="{password}";',
    "listener.name.{listener}.scram-sha-512.sasl.jaas.config":
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="{user}" password="{password}";',
}

ACL: dict[str, str] = {
    # As kafka-python's fixture for Kafka 4: the KRaft authorizer, everyone
    # allowed on resources with no ACL (the suites create ACLs on their own
    # topics and groups only); the suites' login is a super user.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:{user}",
}

FEATURE_KEYS: dict[str, dict[str, str]] = {"tls": TLS, "sasl": SASL, "acl": ACL}
NEEDS: dict[str, tuple[str, ...]] = {
    "PLAINTEXT": (),
    "SSL": ("tls",),
    "SASL_PLAINTEXT": ("sasl",),
    "SASL_SSL": ("tls", "sasl"),
}
"""The features each transport needs."""


@dataclass(frozen=True)
class Login:
    """Who the suites log in as (kafka-python's fixture: alice / alice-secret)."""

    user: str = "alice"
    password: str = "alice-secret"


def render(template: Mapping[str, str], **values: str | int) -> dict[str, str]:
    """Fill the placeholders of a table's keys and values."""
    return {k.format(**values): v.format(**values) for k, v in template.items()}


def broker_properties(transport: str, features: set[str], *, port: int, setup_port: int,
                      certs: str, mechanism: str | None, login: Login) -> dict[str, str]:
    """The properties of a broker serving ``transport`` with ``features`` on
    (the caller checked that the transport's :data:`NEEDS` are among them)."""
    values: dict[str, str | int] = {
        "port": port, "setup_port": setup_port, "certs": certs,
        "mechanism": mechanism or "", "user": login.user, "password": login.password,
        "listener": transport.lower(),
    }
    props = render(LISTENERS[transport], **values)
    if "tls" in features and "tls" in NEEDS[transport]:
        props.update(render(TLS, **values))
    if "sasl" in features and "sasl" in NEEDS[transport]:
        props.update(render(SASL, **values))
    if "acl" in features:
        props.update(render(ACL, **values))
    return props


def parse_overrides(text: str) -> dict[str, str]:
    """``sasl=on,tls=off`` → ``{"sasl": "on", "tls": "off"}`` (checked)."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in SWITCHES or value not in ("auto", "on", "off"):
            raise ValueError(f"--security expects FEATURE=auto|on|off with FEATURE one of "
                             f"{', '.join(SWITCHES)}, got {item!r}")
        out[name] = value
    return out
