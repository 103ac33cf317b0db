"""The client-suite runner's pure parts (tools/client_suites): the security
table rendered per transport, the switches, the test certificates (a real TLS
handshake in memory), the fixture's client settings and the junit counts."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from tools.client_suites import certs
from tools.client_suites.__main__ import CONFLUENT_FILES, SUITES, Counts, read_junit
from tools.client_suites.broker import (
    PROBE_KEYS,
    missing_features,
    odradek_knows,
    resolve_switches,
)
from tools.client_suites.kafka_python_plugin import OdradekKafkaFixture
from tools.client_suites.security import (
    ACL,
    SWITCHES,
    TLS,
    Login,
    broker_properties,
    parse_overrides,
)

ALL = {"tls", "sasl", "acl"}


def props(transport: str, features: set[str], mechanism: str | None = None) -> dict[str, str]:
    return broker_properties(transport, features, port=9093, setup_port=9094, certs="/c",
                             mechanism=mechanism, login=Login())


def test_every_transport_has_its_listener_and_a_plain_setup_listener() -> None:
    for transport in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        p = props(transport, set())
        assert p["listeners"] == f"{transport}://127.0.0.1:9093,SETUP://127.0.0.1:9094"
        assert p["listener.security.protocol.map"] == f"{transport}:{transport},SETUP:PLAINTEXT"
        assert p["advertised.listeners"].startswith(f"{transport}://localhost:9093,")


def test_ssl_gets_the_pem_keystore_and_nothing_of_sasl() -> None:
    p = props("SSL", ALL)
    assert p["ssl.keystore.type"] == "PEM"
    assert p["ssl.keystore.location"] == "/c/server.keystore.pem"
    assert p["ssl.truststore.location"] == "/c/ca-cert"
    assert not any(k.startswith("sasl.") or ".sasl." in k for k in p)
    assert set(TLS) <= set(p)


def test_sasl_plain_gets_the_mechanism_and_a_per_listener_jaas_config() -> None:
    p = props("SASL_PLAINTEXT", ALL, "PLAIN")
    assert p["sasl.enabled.mechanisms"] == "PLAIN"
    jaas = p["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas == ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="alice" password="alice-secret" user_alice="alice-secret";')
    assert "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config" in p
    assert "ssl.keystore.location" not in p


def test_acls_are_kafkas_standard_authorizer_with_the_suite_login_as_super_user() -> None:
    p = props("PLAINTEXT", {"acl"})
    assert p["authorizer.class.name"] == \
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert p["allow.everyone.if.no.acl.found"] == "true"
    assert p["super.users"] == "User:alice"
    assert not set(ACL) & set(props("PLAINTEXT", {"tls", "sasl"}))


def test_a_transport_names_the_features_it_misses() -> None:
    assert missing_features("PLAINTEXT", set()) == []
    assert missing_features("SASL_SSL", {"sasl"}) == ["tls"]
    assert missing_features("SASL_PLAINTEXT", {"sasl"}) == []


def test_switch_overrides_are_checked() -> None:
    assert parse_overrides("sasl=on, tls=off") == {"sasl": "on", "tls": "off"}
    for bad in ("sasl", "kerberos=on", "tls=yes"):
        with pytest.raises(ValueError, match="FEATURE=auto"):
            parse_overrides(bad)


def test_auto_means_whether_this_odradek_reads_the_features_key() -> None:
    assert set(SWITCHES) == set(PROBE_KEYS) == ALL
    resolved = resolve_switches()
    for feature, key in PROBE_KEYS.items():
        assert resolved[feature] == ("on" if odradek_knows(key) else "off")
    assert resolve_switches("tls=on,acl=off")["tls"] == "on"
    assert resolve_switches("tls=on,acl=off")["acl"] == "off"
    assert not odradek_knows("no.such.key")
    assert odradek_knows("num.partitions")


def test_the_certificates_make_a_tls_handshake_for_localhost(tmp_path: Path) -> None:
    folder = certs.write(tmp_path / "ssl")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "server.keystore.pem")
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, hostname checked
    client.load_verify_locations(folder / "ca-cert")
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(10):
        for name, obj in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values())
    assert c.version() in ("TLSv1.2", "TLSv1.3")
    assert (folder / "server.keystore.pem").stat().st_mode & 0o077 == 0


def test_the_kafka_python_fixture_gives_kafkas_client_settings(tmp_path: Path) -> None:
    sasl = OdradekKafkaFixture(0, transport="sasl_plaintext", sasl_mechanism="scram-sha-256",
                               tmp_dir=tmp_path)
    assert sasl._enrich_client_params({"client_id": "mine"}, client_id="x") == {
        "client_id": "mine", "bootstrap_servers": "localhost:0",
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    tls = OdradekKafkaFixture(0, transport="SSL", tmp_dir=tmp_path)
    settings = tls._enrich_client_params({})
    assert settings["ssl_cafile"] == str(tmp_path / "broker" / "ssl" / "ca-cert")
    assert settings["ssl_check_hostname"] is False


def test_junit_counts(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(
        '<testsuites><testsuite><testcase name="a"/><testcase name="b"><failure/></testcase>'
        '<testcase name="c"><skipped/></testcase><testcase name="d"><error/></testcase>'
        '<testcase name="e"/></testsuite></testsuites>')
    assert read_junit(path) == Counts(passed=2, failed=1, skipped=1, errors=1)
    assert read_junit(tmp_path / "missing.xml") == Counts()


def test_the_selections_name_the_tests_of_issue_35() -> None:
    security = {f for s in SUITES if s.part == "security" for f in s.files}
    assert {"test/integration/test_sasl_integration.py",
            "test/integration/test_ssl_integration.py",
            "tests/integration/admin/test_basic_operations.py",
            "tests/integration/admin/test_user_scram_credentials.py"} <= security
    for s in SUITES:
        if s.suite == "confluent-kafka":
            for f in s.files:
                assert any(f == c or f.startswith(c + "/") for c in CONFLUENT_FILES), f


def test_the_integration_parts_cover_each_suite_and_the_kip848_rerun() -> None:
    parts = {(s.suite, s.part): s for s in SUITES if s.part.startswith("integration")}
    assert set(parts) == {("kafka-python", "integration"), ("confluent-kafka", "integration"),
                          ("confluent-kafka", "integration-kip848"),
                          ("aiokafka", "integration")}
    assert parts[("kafka-python", "integration")].files == ("test/integration",)
    kip848 = parts[("confluent-kafka", "integration-kip848")]
    assert dict(kip848.env) == {"TEST_CONSUMER_GROUP_PROTOCOL": "consumer"}
    assert kip848.files == parts[("confluent-kafka", "integration")].files


def test_a_cluster_run_gives_a_plaintext_cluster_at_rf3(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.client_suites.broker import OdradekServer
    from tools.client_suites.cluster import OdradekClusterServer, make_server

    monkeypatch.delenv("ODRADEK_SUITES_CLUSTER", raising=False)
    assert isinstance(make_server(tmp_path, "PLAINTEXT"), OdradekServer)
    monkeypatch.setenv("ODRADEK_SUITES_CLUSTER", "3")
    monkeypatch.setenv("ODRADEK_SUITES_CONTROLLERS", "separate")
    server = make_server(tmp_path, "PLAINTEXT", partitions=2)
    assert isinstance(server, OdradekClusterServer)
    assert (server.brokers, server.separate) == (3, True)
    props = server.properties()
    assert props["num.partitions"] == "2"
    for key in ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor"):
        assert props[key] == "3", key
    assert props["min.insync.replicas"] == props["transaction.state.log.min.isr"] == "2"
    with pytest.raises(ValueError, match="SSL"):
        make_server(tmp_path, "SSL")
