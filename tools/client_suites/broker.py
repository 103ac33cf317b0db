"""One Odradek broker for a client library's own test suite: an ``odradek
serve`` process (the real command line, in its own process) with the
settings of :mod:`tools.client_suites.security` for the transport the suite
asks for.

The broker listens on two ports of 127.0.0.1: the client listener (named
after its protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``...) and
``SETUP`` (plain). The runner waits until ApiVersions is answered on SETUP,
then creates the suite's SCRAM user there (AlterUserScramCredentials) when
the mechanism is SCRAM. The
process's output goes to ``odradek.log`` in the broker's folder
(:meth:`OdradekServer.log_tail` shows its end when something fails), at the
level ``ODRADEK_SUITES_LOG_LEVEL`` names (WARNING unless set).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from tools.client_suites import certs
from tools.client_suites.security import (
    FEATURE_KEYS,
    NEEDS,
    SWITCHES,
    Login,
    broker_properties,
    parse_overrides,
)

PROBE_KEYS = {"tls": "ssl.keystore.location", "sasl": "sasl.enabled.mechanisms",
              "acl": "authorizer.class.name"}
"""The key whose being known to Odradek's config says a feature is there ("auto")."""

SCRAM = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
"""SCRAM mechanism → its code in AlterUserScramCredentials and its hash."""

ENV_SECURITY = "ODRADEK_SUITES_SECURITY"
"""How the runner tells the suites' plugins which features are on: ``tls=on,...``."""

BASE = {
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "2",
}
"""Settings of every suite broker besides the table (those of the suites' own
Kafka fixtures for one broker: kafka-python's ``kafka.properties`` lowers
``group.min.session.timeout.ms`` to 1000, its ``test_group`` joins with a
3 s session, and has two ``__consumer_offsets`` partitions)."""


def odradek_knows(key: str) -> bool:
    """Does the Odradek on ``sys.path`` read ``key`` (not unknown, not ignored)?"""
    from odradek.broker.config import BrokerConfig

    probe = "PLAIN" if key.startswith("sasl.") else "x"
    try:
        config = BrokerConfig.from_sources(None, {key: probe})
    except ValueError:
        return True  # read, and the probe value refused: the key is known
    return not config.unknown_keys() and not config.ignored_kafka_keys()


def resolve_switches(overrides: str = "") -> dict[str, str]:
    """Each feature's switch after ``overrides`` and "auto" detection: on or off."""
    switches = {**SWITCHES, **parse_overrides(overrides)}
    out = {}
    for feature, value in switches.items():
        if value == "auto":
            value = "on" if odradek_knows(PROBE_KEYS[feature]) else "off"
        out[feature] = value
    return out


def features_from_env() -> set[str]:
    """The features the runner switched on (all off when run by hand without it)."""
    text = os.environ.get(ENV_SECURITY, "")
    return {name for name, value in parse_overrides(text).items() if value == "on"}


def missing_features(transport: str, features: set[str]) -> list[str]:
    """The features ``transport`` needs that are off."""
    return [f for f in NEEDS[transport] if f not in features]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def api_versions_answered(port: int, timeout_s: float = 2.0) -> bool:
    """Send ApiVersions v0 to 127.0.0.1:``port``; True on an answer with error 0."""
    client_id = b"client-suites"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = _read(sock, 4)
            (size,) = struct.unpack(">i", head)
            answer = _read(sock, size)
    except OSError:
        return False
    correlation, error = struct.unpack(">ih", answer[:6])
    return bool(correlation == 1 and error == 0)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class OdradekServer:
    """``odradek serve`` for one suite fixture; ``start()``, ``stop()``."""

    def __init__(self, folder: Path, transport: str = "PLAINTEXT", *,
                 mechanism: str | None = None, partitions: int = 4,
                 features: set[str] | None = None, login: Login | None = None,
                 extra: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.transport = transport.upper()
        self.mechanism = mechanism.upper() if mechanism else None
        self.partitions = partitions
        self.features = features_from_env() if features is None else features
        self.login = login or Login()
        self.extra = extra or {}
        self.port = 0
        self.setup_port = 0
        self.certs = folder / "ssl"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.port}"

    @property
    def setup_bootstrap(self) -> str:
        return f"127.0.0.1:{self.setup_port}"

    def properties(self) -> dict[str, str]:
        props = {"log.dirs": str(self.folder / "data"), "num.partitions": str(self.partitions),
                 **BASE}
        props.update(broker_properties(
            self.transport, self.features, port=self.port, setup_port=self.setup_port,
            certs=str(self.certs), mechanism=self.mechanism, login=self.login))
        props.update(self.extra)
        return props

    def start(self, timeout_s: float = 60.0) -> OdradekServer:
        missing = missing_features(self.transport, self.features)
        if missing:
            raise RuntimeError(f"{self.transport} needs {', '.join(missing)}, switched off in "
                               "tools/client_suites/security.py")
        self.folder.mkdir(parents=True, exist_ok=True)
        if "tls" in NEEDS[self.transport]:
            certs.write(self.certs)
        self.port, self.setup_port = free_port(), free_port()
        path = self.folder / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        self._log = open(self.folder / "odradek.log", "ab")  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "serve", str(path), "--log-level",
             os.environ.get("ODRADEK_SUITES_LOG_LEVEL", "WARNING")],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while not api_versions_answered(self.setup_port):
            if self._proc.poll() is not None:
                raise RuntimeError(f"odradek serve exited with {self._proc.returncode}:\n"
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"odradek serve did not answer in {timeout_s:.0f} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)
        if self.mechanism and self.mechanism.startswith("SCRAM-"):
            self._add_scram_user()
        return self

    def _add_scram_user(self) -> None:
        """The suite's login as a SCRAM credential: AlterUserScramCredentials v0
        sent straight to the SETUP listener (not through a client that would
        follow Metadata to another listener), the salted password computed here
        as a client does (PBKDF2, 4096 iterations)."""
        from odradek.wire.frames import ClientConnection
        from odradek.wire.messages.alter_user_scram_credentials_request import (
            AlterUserScramCredentialsRequest,
            ScramCredentialUpsertion,
        )

        assert self.mechanism is not None
        mechanism, digest = SCRAM[self.mechanism]
        salt, iterations = secrets.token_bytes(24), 4096
        salted = hashlib.pbkdf2_hmac(digest, self.login.password.encode(), salt, iterations)
        request = AlterUserScramCredentialsRequest(upsertions=[ScramCredentialUpsertion(
            name=self.login.user, mechanism=mechanism, iterations=iterations, salt=salt,
            salted_password=salted)])
        conn = ClientConnection("client-suites-setup")
        with socket.create_connection(("127.0.0.1", self.setup_port), timeout=30) as sock:
            sock.sendall(conn.send(request, 0))
            while (got := conn.next_response()) is None:
                data = sock.recv(65536)
                if not data:
                    raise RuntimeError("the broker closed the connection on "
                                       f"AlterUserScramCredentials:\n{self.log_tail()}")
                conn.receive_data(data)
        failed = [(r.user, r.error_code, r.error_message) for r in got[1].results
                  if r.error_code]
        if failed:
            raise RuntimeError(f"could not create the SCRAM user: {failed}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        path = self.folder / "odradek.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


__all__ = ["ENV_SECURITY", "FEATURE_KEYS", "OdradekServer", "features_from_env",
           "missing_features", "resolve_switches"]
