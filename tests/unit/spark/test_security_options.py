"""Spark's Java security option names rewritten for librdkafka (odradek.spark.security)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.spark.options import OptionError, parse_sink, parse_source
from odradek.spark.security import SecurityOptionError, to_librdkafka

JAAS_SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="alice-secret";')


def test_scram_jaas_becomes_username_and_password() -> None:
    out = to_librdkafka({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS_SCRAM})
    assert out == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                   "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                   "sasl.password": "alice-secret"}


def test_unsecured_oauthbearer_jaas_becomes_librdkafka_unsecure_jwt() -> None:
    out = to_librdkafka({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
                         "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                         'required unsecuredLoginStringClaim_sub="bob" '
                         'unsecuredLoginLifetimeSeconds="60";'})
    assert out["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert out["sasl.oauthbearer.config"] == "principal=bob lifeSeconds=60"


def test_pem_stores_and_hostname_check_off() -> None:
    out = to_librdkafka({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
                         "ssl.keystore.type": "PEM", "ssl.keystore.location": "/both.pem",
                         "ssl.endpoint.identification.algorithm": ""})
    assert out == {"ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/both.pem",
                   "ssl.key.location": "/both.pem",
                   "ssl.endpoint.identification.algorithm": "none"}
    inline = to_librdkafka({"ssl.truststore.certificates": "CA", "ssl.keystore.key": "K",
                            "ssl.keystore.certificate.chain": "C"})
    assert inline == {"ssl.ca.pem": "CA", "ssl.key.pem": "K", "ssl.certificate.pem": "C"}


def test_a_pkcs12_keystore_passes_through_and_jks_is_refused() -> None:
    out = to_librdkafka({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12",
                         "ssl.keystore.password": "pw"})
    assert out == {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}
    with pytest.raises(SecurityOptionError, match=r"ssl\.keystore\.type' JKS"):
        to_librdkafka({"ssl.keystore.location": "/k.jks"})
    with pytest.raises(SecurityOptionError, match=r"ssl\.truststore\.type' JKS"):
        to_librdkafka({"ssl.truststore.location": "/t.jks"})


def _ca(tmp_path: Path) -> tuple[bytes, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    store = pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(cert, b"ca")],
        serialization.BestAvailableEncryption(b"changeit"))
    path = tmp_path / "trust.p12"
    path.write_bytes(store)
    return cert.public_bytes(serialization.Encoding.PEM), path


def test_a_pkcs12_truststore_is_written_as_pem_for_librdkafka(tmp_path: Path) -> None:
    pem, store = _ca(tmp_path)
    out = to_librdkafka({"ssl.truststore.type": "PKCS12",
                         "ssl.truststore.location": str(store),
                         "ssl.truststore.password": "changeit"})
    assert set(out) == {"ssl.ca.location"}
    assert Path(out["ssl.ca.location"]).read_bytes() == pem
    with pytest.raises(SecurityOptionError, match="password"):
        to_librdkafka({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(store),
                       "ssl.truststore.password": "wrong"})


def test_librdkafka_accepts_every_rewritten_configuration(tmp_path: Path) -> None:
    """librdkafka refuses unknown property names when a client is made: what
    to_librdkafka gives must build a client."""
    _, store = _ca(tmp_path)
    for config in (
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
         "sasl.jaas.config": JAAS_SCRAM},
        {"security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
         "ssl.truststore.location": str(store), "ssl.truststore.password": "changeit",
         "ssl.endpoint.identification.algorithm": ""},
    ):
        Producer({"bootstrap.servers": "127.0.0.1:1", **to_librdkafka(config)}).flush(0)


def test_source_and_sink_options_carry_the_rewrite_and_its_errors() -> None:
    options = {"kafka.bootstrap.servers": "h:1", "subscribe": "t",
               "kafka.security.protocol": "SASL_PLAINTEXT",
               "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config":
               'org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="u" password="p";'}
    assert parse_source(options, True).config()["sasl.username"] == "u"
    assert parse_sink(options).config()["sasl.password"] == "p"
    with pytest.raises(OptionError, match=r"kafka\.sasl\.jaas\.config"):
        parse_source({**options, "kafka.sasl.jaas.config": "broken"}, True)
