"""``odradek dev certs DIR``: the files, their permissions, the broker certificate's
names, the printed settings, and the refusal to overwrite."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509

from odradek.cli.main import main
from odradek.testing.certs import FILES


def test_dev_certs_writes_files_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "certs"
    assert main(["dev", "certs", str(target)]) == 0
    printed = capsys.readouterr().out
    assert f"ssl.keystore.location={target}/broker-keystore.pem" in printed
    assert f"ssl.ca.location={target}/ca.pem" in printed
    for name in (*FILES, "broker-keystore.pem"):
        assert (target / name).is_file(), name
    for key in ("ca.key", "broker.key", "client.key", "broker-keystore.pem", "broker.p12"):
        assert stat.S_IMODE((target / key).stat().st_mode) == 0o600, key
    assert b"BEGIN PRIVATE KEY" in (target / "broker.key").read_bytes()  # PKCS#8
    cert = x509.load_pem_x509_certificate((target / "broker.pem").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    client = x509.load_pem_x509_certificate((target / "client.pem").read_bytes())
    assert client.subject.rfc4514_string() == "CN=client"
    before = (target / "ca.pem").read_bytes()

    assert main(["dev", "certs", str(target)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("odradek: ") and "--force" in err and "\n" not in err
    assert (target / "ca.pem").read_bytes() == before
    assert main(["dev", "certs", str(target), "--force"]) == 0
    assert (target / "ca.pem").read_bytes() != before
