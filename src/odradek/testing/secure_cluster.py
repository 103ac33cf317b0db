"""The settings of a secured local cluster (``LocalCluster(sasl=True)``,
``odradek dev cluster --secure``): SASL_SSL on every listener and ACLs on.

Clients and brokers authenticate with SCRAM-SHA-512 on the client listener, as
the users of :data:`SASL_USERS` (created at format with ``--add-scram``; the
brokers are ``User:broker``); controllers with PLAIN on theirs, as Kafka
advises: SCRAM credentials live in the metadata log, which a quorum that has
not elected its first leader cannot read. ``User:broker``, ``User:controller``
and ``User:admin`` are super users; everyone else needs ACLs.

These passwords are for development only.
"""

from __future__ import annotations

SASL_USERS = {"broker": "broker-secret", "admin": "admin-secret"}
"""The SCRAM-SHA-512 users a secured cluster is formatted with."""
CONTROLLER_PASSWORD = "controller-secret"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLIENT_LISTENER = "SASL_SSL"


def sasl_lines() -> list[str]:
    """A node's SASL and ACL settings (``server.properties`` lines); the TLS
    keystore and truststore come from the development certificates."""
    scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
             f'username="broker" password="{SASL_USERS["broker"]}";')
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             f'username="controller" password="{CONTROLLER_PASSWORD}" '
             f'user_controller="{CONTROLLER_PASSWORD}";')
    return [
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram}",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.controller.plain.sasl.jaas.config={plain}",
        f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "super.users=User:broker;User:admin;User:controller",
    ]


def add_scram_arguments() -> list[str]:
    """``odradek storage format`` arguments creating :data:`SASL_USERS`."""
    return [arg for user, password in SASL_USERS.items() for arg in (
        "--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")]


def admin_properties(ca: str) -> dict[str, str]:
    """Kafka's client properties of the ``admin`` user (``--command-config``)."""
    return {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                            f'required username="admin" password="{SASL_USERS["admin"]}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": ca,
    }
