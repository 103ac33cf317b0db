"""UpdateFeatures (key 57), versions 0–2: change finalized feature levels
(``kafka-features.sh upgrade|downgrade``, ``odradek features``).

Behaviour: the updates are decided together by the active controller
(:func:`odradek.metadata.features.update`: unknown feature or unsupported
level INVALID_UPDATE_VERSION, a lower level without a downgrade type
INVALID_UPDATE_VERSION, a feature named twice INVALID_REQUEST) and written as
``FeatureLevelRecord``\\s to the metadata log, so they survive restarts and
every broker's ApiVersions answers with them; ``validate_only`` writes nothing.
A cluster broker forwards the request to the active controller.

``kraft.version`` is the Raft layer's (KIP-853): an update of it goes to the
metadata log (``upgrade_kraft_version``: 0 → 1 turns the static voters into a
VotersRecord; the rules in :func:`odradek.raft.membership.check_upgrade`), and
the answer comes once it is committed. The other updates of the request are
checked first (``validate_only``) and written after it, so a refusal of either
writes nothing; a request that names ``kraft.version`` alone changes only it.

Version notes: v0 has ``allow_downgrade`` (a downgrade is then a safe one) and
no ``upgrade_type``; v1 ``upgrade_type`` (1 upgrade, 2 safe downgrade, 3 unsafe
downgrade) and ``validate_only``; v2 answers with the top-level error only (no
per-feature results), as Kafka does.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.raft_voters import quorum_change
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import features
from odradek.metadata.image import MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.update_features_request import UpdateFeaturesRequest
from odradek.wire.messages.update_features_response import (
    UpdatableFeatureResult,
    UpdateFeaturesResponse,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


def error_response(request: UpdateFeaturesRequest, code: int,
                   message: str | None = None) -> UpdateFeaturesResponse:
    """The request refused with ``code`` (each feature too, for v0–1)."""
    return UpdateFeaturesResponse(error_code=code, error_message=message, results=[
        UpdatableFeatureResult(u.feature, code, message) for u in request.feature_updates])


def _decide(image: MetadataImage, updates: list[features.FeatureUpdate]) -> Outcome:
    return features.update(image, updates)


@handler(57, (0, 2), error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    updates = [features.FeatureUpdate(
        u.feature, u.max_version_level,
        (features.SAFE_DOWNGRADE if u.allow_downgrade else features.UPGRADE)
        if ctx.api_version == 0 else u.upgrade_type)
        for u in request.feature_updates]
    kraft = [u for u in updates if u.feature == features.KRAFT_VERSION]
    others = [u for u in updates if u.feature != features.KRAFT_VERSION]
    if kraft:
        if len(kraft) > 1:
            return error_response(request, ErrorCode.INVALID_REQUEST,
                                  f"Feature {features.KRAFT_VERSION} was specified more than once.")
        if others:
            outcome = await ctx.broker.write(partial(_decide, updates=others), apply=False)
            if outcome.error:
                return error_response(request, outcome.error, outcome.message)
        code, message = await _kraft(ctx, kraft[0], bool(request.validate_only),
                                     request.timeout_ms)
        if code:
            return error_response(request, code, message)
    if others or not kraft:
        outcome = await ctx.broker.write(partial(_decide, updates=others),
                                         apply=not request.validate_only)
        if outcome.error:
            return error_response(request, outcome.error, outcome.message)
    return UpdateFeaturesResponse(error_code=0, error_message=None, results=[
        UpdatableFeatureResult(u.feature, 0, None) for u in request.feature_updates])


async def _kraft(ctx: RequestContext, update: features.FeatureUpdate, validate_only: bool,
                 timeout_ms: int) -> tuple[int, str | None]:
    """(error code, message) of changing ``kraft.version`` at the metadata log."""
    # a downgrade is refused whatever its type (the core's rule)
    return await quorum_change(lambda: ctx.broker.metadata.upgrade_kraft_version(
        update.level, validate_only, max(timeout_ms, 1000) / 1000))
