"""The JWKS an OAUTHBEARER listener verifies signed tokens with
(``sasl.oauthbearer.jwks.endpoint.url``): fetched at start-up, refreshed every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (3600000) on a worker thread.

``file://`` URLs are read from disk; ``http://`` and ``https://`` with
urllib (10 s timeout). A failed refresh keeps the keys it had (logged); a
failed first fetch is a start-up error.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.broker.net.sasl.jwt import KeySet

log = logging.getLogger("odradek.broker")


class JwksCache:
    def __init__(self, url: str, refresh_ms: str | int = 3600000) -> None:
        self.url = url
        try:
            self.refresh_s = max(int(refresh_ms), 1000) / 1000
        except ValueError:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.refresh.ms: not an integer: "
                             f"{refresh_ms!r}") from None
        self.keys: KeySet = {}

    def __call__(self) -> KeySet:
        return self.keys

    def _read(self) -> bytes:
        parsed = urllib.parse.urlparse(self.url)
        if parsed.scheme == "file":
            return Path(urllib.request.url2pathname(parsed.path)).read_bytes()
        if parsed.scheme in ("http", "https"):
            with urllib.request.urlopen(self.url, timeout=10) as resp:
                data: bytes = resp.read(1 << 20)
                return data
        raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url: {self.url!r} is not a file://, "
                         "http:// or https:// URL")

    def fetch(self) -> None:
        """Read the key set now (blocking); ValueError saying why it could not."""
        try:
            data = self._read()
        except OSError as exc:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url: cannot read {self.url}: "
                             f"{exc}") from None
        from odradek.broker.net.sasl.jwt import parse_jwks

        keys = parse_jwks(data)
        if not keys:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url: {self.url} holds no RSA "
                             "or P-256 signing key")
        self.keys = keys

    async def refresh(self) -> None:
        """Fetch again every refresh period, until cancelled."""
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await asyncio.to_thread(self.fetch)
            except ValueError as exc:
                log.warning("keeping the previous JWKS: %s", exc)
