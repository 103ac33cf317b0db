"""Development certificates: a CA, a broker certificate and a client certificate.

``odradek dev certs DIR`` and ``Broker(ssl=True)`` write them with
``cryptography``. Keys are EC P-256, PKCS#8 PEM (what Kafka's PEM keystores
need), written 0600. The broker certificate's SAN is ``DNS:localhost`` and
``IP:127.0.0.1`` (librdkafka checks DNS names only, Python and Java also IP
addresses), so hostname verification passes on ``localhost`` and on
``127.0.0.1``. Files in DIR:

=================  ===================================================
``ca.pem``         the CA certificate (the truststore of both sides)
``ca.key``         the CA key (to issue more certificates)
``broker.pem``     the broker's certificate chain (its own, then the CA)
``broker.key``     the broker's key
``broker.p12``     the broker's PKCS12 keystore (password :data:`PASSWORD`)
``client.pem``     a client certificate, subject ``CN=client``
``client.key``     its key
``client.p12``     the client's PKCS12 keystore (password :data:`PASSWORD`)
=================  ===================================================
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PASSWORD = "odradek-dev"
"""The password of the PKCS12 keystores (development only)."""

FILES = ("ca.pem", "ca.key", "broker.pem", "broker.key", "broker.p12",
         "client.pem", "client.key", "client.p12")
_DAYS = 825


@dataclass(frozen=True, slots=True)
class Issued:
    """A key and its certificate (``cryptography`` objects)."""

    key: Any
    cert: Any

    @property
    def cert_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.cert.public_bytes(serialization.Encoding.PEM)  # type: ignore[no-any-return]

    @property
    def key_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.key.private_bytes(  # type: ignore[no-any-return]
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())


def _name(dn: str) -> Any:
    """``CN=a,OU=b`` (most specific first, as RFC 2253 writes it) → an x509 Name."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "O": NameOID.ORGANIZATION_NAME, "L": NameOID.LOCALITY_NAME,
            "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME}
    parts = [p.split("=", 1) for p in dn.split(",")]
    return x509.Name([x509.NameAttribute(oids[k.strip()], v.strip()) for k, v in reversed(parts)])


def new_ca(dn: str = "CN=Odradek Dev CA") -> Issued:
    """A self-signed CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(dn)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(key, hashes.SHA256()))
    return Issued(key, cert)


def issue(ca: Issued, dn: str, hosts: tuple[str, ...] = ()) -> Issued:
    """A certificate for ``dn`` signed by ``ca``; ``hosts``: DNS names and IP
    addresses for its SAN (a server certificate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(dn)).issuer_name(ca.cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=_DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]),
                              critical=False))
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def pkcs12_bytes(issued: Issued, ca: Issued, password: str = PASSWORD, name: str = "key") -> bytes:
    """A PKCS12 keystore holding ``issued``'s key, its certificate and the CA."""
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

    return pkcs12.serialize_key_and_certificates(
        name.encode(), issued.key, issued.cert, [ca.cert],
        BestAvailableEncryption(password.encode()))


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


@dataclass(frozen=True, slots=True)
class DevCerts:
    """Where :func:`write_dev_certs` put the files, and the settings that use them."""

    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    def broker_properties(self, listener: str = "SSL://localhost:9093",
                          client_auth: str = "required") -> dict[str, str]:
        """A broker's ``server.properties`` lines for an SSL listener (PEM files)."""
        return {
            "listeners": listener,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.path("broker-keystore.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "ssl.client.auth": client_auth,
        }

    def java_client_properties(self) -> dict[str, str]:
        """Kafka's Java client names (``--command-config``): PKCS12 keystore."""
        return {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": self.path("client.p12"),
            "ssl.keystore.password": PASSWORD,
        }

    def librdkafka_settings(self) -> dict[str, str]:
        """confluent-kafka / librdkafka / kcat settings with the client certificate."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": self.ca,
            "ssl.certificate.location": self.path("client.pem"),
            "ssl.key.location": self.path("client.key"),
        }

    def kafka_python_settings(self) -> dict[str, Any]:
        """kafka-python's (and aiokafka's ``create_ssl_context``) keyword arguments."""
        return {"security_protocol": "SSL", "ssl_cafile": self.ca,
                "ssl_certfile": self.path("client.pem"), "ssl_keyfile": self.path("client.key")}


def write_dev_certs(directory: Path | str, force: bool = False,
                    hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> DevCerts:
    """Write the files of the module docstring (plus ``broker-keystore.pem``, key
    and chain in one file, Kafka's PEM keystore file) into ``directory``.
    FileExistsError, naming the first, when one exists and not ``force``."""
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    if not force:
        for name in (*FILES, "broker-keystore.pem"):
            if (base / name).exists():
                raise FileExistsError(str(base / name))
    ca = new_ca()
    broker = issue(ca, "CN=localhost,O=Odradek Dev", hosts)
    client = issue(ca, "CN=client")
    _write(base / "ca.pem", ca.cert_pem, False)
    _write(base / "ca.key", ca.key_pem, True)
    _write(base / "broker.pem", broker.cert_pem + ca.cert_pem, False)
    _write(base / "broker.key", broker.key_pem, True)
    _write(base / "broker-keystore.pem", broker.key_pem + broker.cert_pem + ca.cert_pem, True)
    _write(base / "broker.p12", pkcs12_bytes(broker, ca, name="broker"), True)
    _write(base / "client.pem", client.cert_pem + ca.cert_pem, False)
    _write(base / "client.key", client.key_pem, True)
    _write(base / "client.p12", pkcs12_bytes(client, ca, name="client"), True)
    return DevCerts(base)
