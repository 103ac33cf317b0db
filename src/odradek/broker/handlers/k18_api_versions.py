"""ApiVersions (key 18), versions 0–3.

Behaviour: the list is built from the handler registrations, so only served
versions are advertised. An ApiVersions request of a version we do not serve
gets a v0 body with UNSUPPORTED_VERSION and the full list (KIP-511); the client
retries with a version from it. The response header is always v0 (see
``wire/api.py``).

Version notes: v3 adds client software name/version (request) and tagged
feature fields (response); v4 (kafka-python 3's first try) is answered through
the KIP-511 fallback.
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.registry import advertised, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse


def _api_list() -> list[ApiVersion]:
    return [ApiVersion(key, lo, hi) for key, lo, hi in advertised()]


def unsupported_version_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_list())


@handler(18, (0, 3))
async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=_api_list())
