"""OAUTHBEARER tokens for tests."""

from __future__ import annotations

import base64
import json
import time
from typing import Any


def unsecured_jws(principal: str = "alice", lifetime_s: int = 3600, **claims: Any) -> str:
    """An unsecured JWS as librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt`` makes."""
    now = int(time.time())

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    body = {"sub": principal, "iat": now, "exp": now + lifetime_s, **claims}
    return f"{part({'alg': 'none'})}.{part(body)}."
