"""ApiVersions (key 18), versions 0–4.

Behaviour: the list is built from the handler registrations, so only served
versions are advertised. An ApiVersions request of a version we do not serve
gets a v0 body with UNSUPPORTED_VERSION and the full list (KIP-511); the client
retries with a version from it. The response header is always v0 (see
``wire/api.py``).

Feature levels (KIP-584), answered from v3 on: what this build supports
(``SupportedFeatures``: name, min and max level) and the levels in force
(``FinalizedFeatures``: name and level, as both min and max), Kafka 4.0's four
features (:mod:`odradek.metadata.features`): ``metadata.version`` 25–25,
``kraft.version`` 0–1 (finalized at the metadata log's level),
``group.version`` 0–1 (finalized 1) and
``transaction.version`` 0–2, finalized at the level the metadata log holds
(2 on a new cluster; ``odradek features upgrade|downgrade`` changes it).

As Kafka's brokers do, a finalized level of 0 is left out of
``FinalizedFeatures`` (0 is "off"), and a v3 answer leaves out the supported
features whose minimum is 0 (clients older than ApiVersions v4 could not
parse a 0 there, KAFKA-17011), so at v3 only ``metadata.version`` is listed as
supported. A Java producer from Kafka 4.0 runs transactions v2 once it sees
``transaction.version`` >= 2 finalized (with a features epoch it has not seen)
and Produce v12, TxnOffsetCommit v5 and EndTxn v5 served; librdkafka skips
these tagged fields, kafka-python reads them only in ``describe_features``.
``FinalizedFeaturesEpoch`` is the offset of the last metadata record in the
image this broker answers from, as Kafka's brokers give it (-1 before any):
it grows with every change of the features (and of anything else), so a
client that sees a larger one knows its feature levels may be newer.

Version notes: v3 adds client software name/version (request) and the tagged
feature fields (response); v4 (KAFKA-17011) is v3 whose answer may list
supported features with a minimum level of 0.
"""

from __future__ import annotations

from typing import Final

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, advertised, handler
from odradek.metadata import features
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

SUPPORTED_FEATURES: Final = features.SUPPORTED
"""Feature name -> (min, max) level this build supports."""


def _api_list() -> list[ApiVersion]:
    return [ApiVersion(key, lo, hi) for key, lo, hi in advertised()]


def unsupported_version_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_list())


def supported_features(version: int) -> list[SupportedFeatureKey]:
    """The SupportedFeatures of an answer at ``version`` (KAFKA-17011: below v4,
    none whose minimum level is 0)."""
    return [SupportedFeatureKey(name, lo, hi) for name, (lo, hi) in SUPPORTED_FEATURES.items()
            if version >= 4 or lo > 0]


def finalized_features(image: MetadataImage, kraft_version: int = 0,
                       ) -> list[FinalizedFeatureKey]:
    """The FinalizedFeatures of an answer: every feature in force at a level above 0."""
    return [FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in features.finalized(image, kraft_version).items()]


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS: tuple[Access, ...] = ()  # answered before authentication


@handler(18, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0, api_keys=_api_list(),
        supported_features=supported_features(ctx.api_version),
        finalized_features_epoch=ctx.broker.metadata.applied - 1,
        finalized_features=finalized_features(ctx.broker.image,
                                              ctx.broker.metadata.kraft_version),
    )
