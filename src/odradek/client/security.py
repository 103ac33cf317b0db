"""How this package's client secures a connection: TLS and SASL settings, read
from Kafka's client property names (``--command-config FILE``, Spark's
``kafka.*`` options, a broker's own inter-broker identity).

:class:`ClientSecurity` is all :meth:`odradek.client.connection.Connection.open`
needs: the TLS context (SSL and SASL_SSL) and the SASL mechanism and
credentials (SASL_PLAINTEXT and SASL_SSL). Passwords and tokens are never
part of ``repr``.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    """``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    ssl_context: ssl.SSLContext | None = None
    """The TLS context of SSL and SASL_SSL connections."""
    check_hostname: bool = True
    """``ssl.endpoint.identification.algorithm`` = https (Kafka's default)."""
    sasl_mechanism: str = "GSSAPI"
    """``sasl.mechanism`` (Kafka's default GSSAPI, which this client does not speak)."""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    sasl_oauth_token: str = field(default="", repr=False)
    """OAUTHBEARER: the token sent as is (unsecured JWS or a signed JWT)."""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From Kafka's Java client names or librdkafka's
        (:mod:`odradek.client.properties`); ValueError, one line, naming the key."""
        from odradek.client.properties import security_from_properties

        return security_from_properties(props)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ClientSecurity()
