"""What the SASL integration tests share: a broker with a SASL_PLAINTEXT
listener offering PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, its users, tokens
and raw-socket helpers."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.client.security import ClientSecurity
from odradek.wire import scram
from odradek.wire.frames import ClientConnection
from odradek.wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from tests.support.sasl_tokens import unsecured_jws as unsecured_jws

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
"""SCRAM users (both mechanisms) the fixtures create; alice is also a PLAIN user."""


def sasl_props(**extra: str) -> dict[str, str]:
    """Broker overrides for one SASL_PLAINTEXT listener named SASL (no ``_``:
    ``Broker`` turns ``_`` in keyword names into ``.``)."""
    return {"listeners": "SASL://127.0.0.1:0",
            "listener.security.protocol.map": "SASL:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISMS,
            "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS, **extra}


ADMIN = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_username="admin", sasl_password="admin-secret")


def add_scram_users(bootstrap: str, users: dict[str, str] = USERS,
                    iterations: int = 4096) -> None:
    """Create every user for both SCRAM mechanisms (one request per mechanism)."""

    async def run() -> None:
        client = await KafkaClient.connect(bootstrap, security=ADMIN)
        try:
            for mech in scram.MECHANISMS.values():
                ups = []
                for name, password in users.items():
                    salt = f"salt-{name}".encode()
                    ups.append(ScramCredentialUpsertion(
                        name=name, mechanism=mech.id, iterations=iterations, salt=salt,
                        salted_password=scram.salted_password(mech.hash_name, password, salt,
                                                              iterations)))
                resp = await client.request(AlterUserScramCredentialsRequest(upsertions=ups), 0)
                for r in resp.results:
                    check(r.error_code, r.error_message)
        finally:
            await client.close()

    asyncio.run(run())


def wait_until(predicate: Callable[[], bool], timeout_s: float = 20.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class RawClient:
    """A blocking socket speaking Kafka frames, for tests of the SASL states."""

    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.conn = ClientConnection("raw")

    def close(self) -> None:
        self.sock.close()

    def request(self, body: Any, version: int) -> Any:
        self.sock.sendall(self.conn.send(body, version))
        while (got := self.conn.next_response()) is None:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionResetError("closed by the broker")
            self.conn.receive_data(data)
        return got[1]

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def read_raw(self) -> bytes:
        head = self._exactly(4)
        return self._exactly(struct.unpack(">i", head)[0])

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            data = self.sock.recv(n - len(out))
            if not data:
                raise ConnectionResetError("closed by the broker")
            out += data
        return out

    def closed_by_broker(self, timeout_s: float = 5.0) -> bool:
        """True once the broker has closed the connection (EOF or reset), within the timeout."""
        self.sock.settimeout(timeout_s)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
