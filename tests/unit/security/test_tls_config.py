"""TLS listener settings: keystore formats, per-listener overrides, one-line
errors naming the key, and the dynamic keystore keys."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.net.tls import ListenerTls, broker_client_security, listener_settings
from odradek.metadata.broker_configs import alter_broker_configs, broker_config_error, is_dynamic
from odradek.metadata.image import MetadataImage
from odradek.testing.certs import PASSWORD, DevCerts, new_ca, pkcs12_bytes, write_dev_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCerts:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


def _config(tmp_path: Path, **props: str) -> BrokerConfig:
    return BrokerConfig.from_sources(None, {"listeners": "SSL://127.0.0.1:0",
                                            "log.dirs": str(tmp_path), **props})


def test_pem_keystore_file(certs: DevCerts, tmp_path: Path) -> None:
    tls = ListenerTls.for_config(_config(tmp_path, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.path("broker-keystore.pem")}))
    assert tls.listeners["SSL"].context.verify_mode == ssl.CERT_NONE


def test_type_is_found_from_the_file_when_not_given(certs: DevCerts, tmp_path: Path) -> None:
    ListenerTls.for_config(_config(tmp_path, **{
        "ssl.keystore.location": certs.path("broker-keystore.pem")}))
    ListenerTls.for_config(_config(tmp_path, **{
        "ssl.keystore.location": certs.path("broker.p12"), "ssl.keystore.password": PASSWORD}))


def test_inline_pem_keystore_and_truststore(certs: DevCerts, tmp_path: Path) -> None:
    tls = ListenerTls.for_config(_config(tmp_path, **{
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": Path(certs.path("broker.key")).read_text(),
        "ssl.keystore.certificate.chain": Path(certs.path("broker.pem")).read_text(),
        "ssl.truststore.certificates": Path(certs.ca).read_text(),
        "ssl.client.auth": "required"}))
    ctx = tls.listeners["SSL"].context
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert len(ctx.get_ca_certs()) == 1


def test_pkcs12_keystore_and_truststore(certs: DevCerts, tmp_path: Path) -> None:
    ca = new_ca("CN=Other CA")
    trust = tmp_path / "trust.p12"
    trust.write_bytes(pkcs12_bytes(ca, ca, "pw"))
    tls = ListenerTls.for_config(_config(tmp_path, **{
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs.path("broker.p12"),
        "ssl.keystore.password": PASSWORD, "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(trust), "ssl.truststore.password": "pw",
        "ssl.client.auth": "requested"}))
    ctx = tls.listeners["SSL"].context
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert {c["subject"] for c in ctx.get_ca_certs()} == {((("commonName", "Other CA"),),)}


def test_listener_override_wins(certs: DevCerts, tmp_path: Path) -> None:
    config = _config(tmp_path, **{
        "ssl.keystore.location": "/nonexistent",
        "listener.name.ssl.ssl.keystore.location": certs.path("broker-keystore.pem"),
        "listener.name.ssl.ssl.client.auth": "required", "ssl.truststore.location": certs.ca})
    settings = listener_settings(config.get, "SSL", "SSL")
    assert settings.origin("ssl.keystore.location") == "listener.name.ssl.ssl.keystore.location"
    tls = ListenerTls.for_config(config)
    assert tls.listeners["SSL"].context.verify_mode == ssl.CERT_REQUIRED


def test_client_auth_on_sasl_ssl_counts_only_with_the_listener_prefix(tmp_path: Path) -> None:
    get = {"ssl.client.auth": "required"}.get
    assert "ssl.client.auth" not in listener_settings(
        lambda k: get(k, ""), "SASL_SSL", "SASL_SSL").props
    get2 = {"listener.name.sasl_ssl.ssl.client.auth": "required"}.get
    assert listener_settings(lambda k: get2(k, ""), "SASL_SSL",
                             "SASL_SSL").props["ssl.client.auth"] == "required"


@pytest.mark.parametrize(("props", "named"), [
    ({}, "needs a keystore"),
    ({"ssl.keystore.location": "/nonexistent/ks.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}, "convert"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "{p12}",
      "ssl.keystore.password": "wrong"}, "ssl.keystore.password"),
    ({"listener.name.ssl.ssl.keystore.location": "/nope"},
     "listener.name.ssl.ssl.keystore.location"),
    ({"ssl.keystore.location": "{pem}", "ssl.client.auth": "always"}, "ssl.client.auth"),
    ({"ssl.keystore.location": "{pem}", "ssl.enabled.protocols": "TLSv9"},
     "ssl.enabled.protocols"),
    ({"ssl.keystore.location": "{pem}", "ssl.cipher.suites": "NOPE"}, "ssl.cipher.suites"),
    ({"ssl.keystore.location": "{pem}", "ssl.principal.mapping.rules": "RULE:x"},
     "ssl.principal.mapping.rules"),
])
def test_bad_settings_are_one_line_naming_the_key(
    certs: DevCerts, tmp_path: Path, props: dict[str, str], named: str
) -> None:
    props = {k: v.format(p12=certs.path("broker.p12"), pem=certs.path("broker-keystore.pem"))
             for k, v in props.items()}
    with pytest.raises(ConfigError) as info:
        ListenerTls.for_config(_config(tmp_path, **props))
    assert named in str(info.value)
    assert "\n" not in str(info.value)


def test_jks_file_is_recognised(tmp_path: Path) -> None:
    jks = tmp_path / "ks.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 32)
    with pytest.raises(ConfigError, match="PKCS12"):
        ListenerTls.for_config(_config(tmp_path, **{"ssl.keystore.location": str(jks)}))


def test_enabled_protocols_and_java_cipher_names(certs: DevCerts, tmp_path: Path) -> None:
    tls = ListenerTls.for_config(_config(tmp_path, **{
        "ssl.keystore.location": certs.path("broker-keystore.pem"),
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}))
    ctx = tls.listeners["SSL"].context
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES256-GCM-SHA384"]


def test_unknown_keys_do_not_include_ssl_keys(tmp_path: Path) -> None:
    config = BrokerConfig.from_sources(None, {
        "log.dirs": str(tmp_path), "ssl.keystore.password": "x",
        "listener.name.internal.ssl.keystore.location": "/x", "ssl.keystore.passwrd": "y"})
    assert [k for k, _ in config.unknown_keys()] == ["ssl.keystore.passwrd"]


def test_listener_prefixed_keys_are_checked_too(tmp_path: Path) -> None:
    """``listener.name.<l>.[<mechanism>.]<key>``: known keys pass, a misspelt one
    is reported like any unknown key."""
    config = BrokerConfig.from_sources(None, {
        "log.dirs": str(tmp_path),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "x",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.connections.max.reauth.ms": "5",
        "listener.name.sasl.sasl.jaas.confg": "y",
        "listener.name.sasl.oauthbearer.sasl.server.max.receive.sizes": "1"})
    assert [k for k, _ in config.unknown_keys()] == [
        "listener.name.sasl.oauthbearer.sasl.server.max.receive.sizes",
        "listener.name.sasl.sasl.jaas.confg"]


def test_inter_broker_security_uses_the_listener_keystore(certs: DevCerts, tmp_path: Path) -> None:
    config = BrokerConfig.from_sources(None, {
        "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.ssl.keystore.location": certs.path("broker-keystore.pem"),
        "listener.name.internal.ssl.truststore.location": certs.ca})
    security = broker_client_security(config, "INTERNAL")
    assert security.protocol == "SSL" and security.check_hostname
    assert security.ssl_context is not None
    assert len(security.ssl_context.get_ca_certs()) == 1
    assert broker_client_security(config, "PLAINTEXT").protocol == "PLAINTEXT"


def test_security_inter_broker_protocol(tmp_path: Path) -> None:
    base = {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"}
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol"):
        BrokerConfig.from_sources(None, {**base, "security.inter.broker.protocol": "SSL"})
    with pytest.raises(ConfigError, match="not both"):
        BrokerConfig.from_sources(None, {**base, "security.inter.broker.protocol": "PLAINTEXT",
                                         "inter.broker.listener.name": "PLAINTEXT"})


def test_keystore_keys_are_dynamic_per_broker_only() -> None:
    assert is_dynamic("listener.name.ssl.ssl.keystore.location")
    assert is_dynamic("ssl.keystore.password")
    assert not is_dynamic("ssl.truststore.location")
    assert not is_dynamic("listener.name.ssl.ssl.client.auth")
    assert broker_config_error("listener.name.ssl.ssl.truststore.location", "x") is not None
    image = MetadataImage()
    refused = alter_broker_configs(image, "", {"ssl.keystore.location": "/x"})
    assert refused.error and "broker id must be specified" in (refused.message or "")
    done = alter_broker_configs(image, "1", {"listener.name.ssl.ssl.keystore.location": "/x"})
    assert not done.error and len(done.records) == 1


def test_reload_with_a_mismatched_key_keeps_the_live_context_whole(
    certs: DevCerts, tmp_path: Path
) -> None:
    from odradek.broker.net.tls import reload_keystore

    config = _config(tmp_path, **{"ssl.keystore.location": certs.path("broker-keystore.pem")})
    tls = ListenerTls.for_config(config)
    ctx = tls.listeners["SSL"].context
    other = write_dev_certs(tmp_path / "other")
    bad = tmp_path / "mismatch.pem"
    bad.write_bytes(Path(other.path("client.key")).read_bytes()
                    + Path(other.path("broker.pem")).read_bytes())
    bad_config = _config(tmp_path, **{"ssl.keystore.location": str(bad)})
    with pytest.raises(ConfigError, match=r"ssl\.keystore"):
        reload_keystore(ctx, listener_settings(bad_config.get, "SSL", "SSL"))
    # The live context still serves a handshake with its own key and chain.
    client = ssl.create_default_context(cafile=certs.ca)
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = ctx.wrap_bio(server_in, server_out, server_side=True)
    peer = client.wrap_bio(client_in, client_out, server_hostname="localhost")
    for _ in range(10):
        for side, out, into in ((peer, client_out, server_in), (server, server_out, client_in)):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
            into.write(out.read())
    assert peer.version() is not None and server.version() is not None
