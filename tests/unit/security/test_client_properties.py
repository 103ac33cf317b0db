"""ClientSecurity.from_properties: Kafka's Java client names and librdkafka's."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.client.properties import parse_jaas
from odradek.client.security import ClientSecurity
from odradek.testing.certs import PASSWORD, DevCerts, write_dev_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCerts:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


def test_plaintext_by_default() -> None:
    security = ClientSecurity.from_properties({"request.timeout.ms": "5000"})
    assert security.protocol == "PLAINTEXT" and security.ssl_context is None


def test_java_names_pkcs12_keystore_pem_truststore(certs: DevCerts) -> None:
    security = ClientSecurity.from_properties(certs.java_client_properties())
    assert security.uses_tls and security.check_hostname
    assert security.ssl_context is not None
    assert len(security.ssl_context.get_ca_certs()) == 1


def test_librdkafka_names(certs: DevCerts) -> None:
    security = ClientSecurity.from_properties(certs.librdkafka_settings())
    assert security.protocol == "SSL"
    assert security.ssl_context is not None


def test_inline_pem_and_no_hostname_check(certs: DevCerts) -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "ssl",
        "ssl.truststore.certificates": Path(certs.ca).read_text(),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": Path(certs.path("client.key")).read_text(),
        "ssl.keystore.certificate.chain": Path(certs.path("client.pem")).read_text(),
        "ssl.endpoint.identification.algorithm": ""})
    assert not security.check_hostname
    assert security.ssl_context is not None and not security.ssl_context.check_hostname


def test_sasl_from_jaas_and_from_librdkafka_names() -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="s3\\"cret";'})
    assert (security.sasl_mechanism, security.sasl_username, security.sasl_password) == (
        "SCRAM-SHA-512", "alice", 's3"cret')
    assert "s3" not in repr(security)
    other = ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT",
                                            "sasl.mechanisms": "PLAIN", "sasl.username": "bob",
                                            "sasl.password": "pw"})
    assert (other.sasl_mechanism, other.sasl_username, other.sasl_password) == (
        "PLAIN", "bob", "pw")


def test_jaas_parser() -> None:
    module, options = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        "  username=admin password=\"a b\" ;")
    assert module.endswith("PlainLoginModule")
    assert options == {"username": "admin", "password": "a b"}


@pytest.mark.parametrize(("props", "named"), [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"ssl.truststore.locaton": "/x"}, "ssl.truststore.locaton"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent"},
     "ssl.truststore.location"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "{p12}",
      "ssl.keystore.password": "wrong"}, "ssl.keystore.password"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "{cert}"}, "ssl.key.location"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
     "ssl.endpoint.identification.algorithm"),
    ({"sasl.mechanism": "DIGEST"}, "sasl.mechanism"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "x.y.Krb5LoginModule required;"},
     "sasl.jaas.config"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "garbage"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "JKS", "ssl.keystore.location": "/k"},
     "PKCS12"),
])
def test_bad_values_are_one_line_value_errors(
    certs: DevCerts, props: dict[str, str], named: str
) -> None:
    props = {k: v.format(p12=certs.path("client.p12"), cert=certs.path("client.pem"))
             for k, v in props.items()}
    with pytest.raises(ValueError) as info:
        ClientSecurity.from_properties(props)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_pkcs12_password(certs: DevCerts) -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "SSL", "ssl.keystore.location": certs.path("client.p12"),
        "ssl.keystore.password": PASSWORD, "ssl.ca.location": certs.ca})
    assert security.ssl_context is not None
