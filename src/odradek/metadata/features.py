"""Finalized feature levels (KIP-584): what this build supports, what a new
cluster finalizes, and UpdateFeatures' decisions (``kafka-features.sh``).

A level is kept in the metadata log as a ``FeatureLevelRecord`` (name, level;
level 0 removes the feature: "off"), replayed into
:attr:`odradek.metadata.image.MetadataImage.features`, so every broker and a
restart see the same levels. Supported ranges, as Kafka 4.0's:

- ``metadata.version`` 25–25 (4.0-IV3, the format of Odradek's records);
- ``kraft.version`` 0–1 (0: static voters, ``controller.quorum.voters``; 1:
  the voters in the metadata log, KIP-853). Its level is the Raft layer's, not
  a FeatureLevelRecord: :func:`finalized` takes it from the metadata log, and
  UpdateFeatures hands an upgrade to the quorum (0 → 1 only);
- ``group.version`` 0–1 (1: the KIP-848 consumer protocol);
- ``transaction.version`` 0–2 (1: flexible ``__transaction_state`` records;
  2: transactions v2, KIP-890 part 2: EndTxn v5 bumps the epoch, Produce v12
  and TxnOffsetCommit v5 add partitions implicitly).

A new cluster finalizes ``metadata.version`` 25, ``group.version`` 1 and
``transaction.version`` 2, as Kafka 4.0 formats a new cluster
(``kafka-storage.sh format`` without ``--feature``); ``odradek storage format
--feature NAME=N`` picks another level. A cluster whose log predates
``transaction.version`` keeps level 0 until it is upgraded. A log without a
``group.version`` record (formatted by an Odradek that always served the
consumer protocol) keeps level 1 (:data:`ABSENT`); so a level 0 of
``group.version`` is written as a record of its own, never left out, and the
image keeps it. At ``group.version`` 0 the KIP-848 consumer protocol is off:
ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION,
as Kafka's brokers do.

UpdateFeatures rules (Kafka's ``FeatureControlManager``): an unknown feature
or a level outside the supported range is INVALID_UPDATE_VERSION; a lower
level needs a downgrade type (v1+: ``upgrade_type`` 2 safe or 3 unsafe; v0:
``allow_downgrade``), else INVALID_UPDATE_VERSION; ``metadata.version``
cannot be changed here (one level in this build), and ``kraft.version`` is
not changed by records (see above). All updates of a request are decided
together: one refusal refuses the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from odradek.metadata.image import MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.feature_level_record import FeatureLevelRecord

METADATA_VERSION: Final = "metadata.version"
TRANSACTION_VERSION: Final = "transaction.version"
KRAFT_VERSION: Final = "kraft.version"
GROUP_VERSION: Final = "group.version"
METADATA_VERSION_LEVEL: Final = 25

SUPPORTED: Final[dict[str, tuple[int, int]]] = {
    METADATA_VERSION: (METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
    KRAFT_VERSION: (0, 1),
    GROUP_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 2),
}
"""Feature name -> (min, max) level this build supports."""

FIXED: Final[dict[str, int]] = {METADATA_VERSION: METADATA_VERSION_LEVEL}
"""Levels reported finalized whatever the log holds."""

ABSENT: Final[dict[str, int]] = {GROUP_VERSION: 1}
"""Levels of features a log holds no record of (see the module docstring);
their level 0 is written as a record."""

NEW_CLUSTER: Final[dict[str, int]] = {METADATA_VERSION: METADATA_VERSION_LEVEL,
                                      GROUP_VERSION: 1, TRANSACTION_VERSION: 2}
"""What a new cluster finalizes (Kafka 4.0's defaults for a new cluster)."""

RELEASES: Final[dict[str, int]] = {"4.0": METADATA_VERSION_LEVEL,
                                   "4.0-IV3": METADATA_VERSION_LEVEL}
"""``--release-version`` values this build formats, with their
``metadata.version`` (Kafka's names: a release, or a release and its
metadata.version's "IV" step)."""

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def parse_release(text: str) -> int:
    """The ``metadata.version`` level of ``--release-version TEXT``; ValueError
    with one clear line for a release this build cannot format."""
    level = RELEASES.get(text.strip())
    if level is None:
        raise ValueError(
            f"--release-version {text}: not supported; this build formats 4.0 "
            f"(4.0-IV3, metadata.version {METADATA_VERSION_LEVEL}) only")
    return level


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """One ``FeatureUpdateKey`` of UpdateFeatures: the level wanted and the
    upgrade type (1 upgrade, 2 safe downgrade, 3 unsafe downgrade)."""

    feature: str
    level: int
    upgrade_type: int = UPGRADE


def finalized(image: MetadataImage, kraft_version: int = 0) -> dict[str, int]:
    """The levels in force: the log's, with the fixed ones and ``kraft.version``
    (the metadata log's, given by the caller), 0s left out."""
    levels = {**ABSENT, **image.features, **FIXED, KRAFT_VERSION: kraft_version}
    return {name: levels[name] for name in SUPPORTED if levels.get(name, 0) > 0}


def level(image: MetadataImage, feature: str) -> int:
    """The finalized level of ``feature`` (0 when it is off)."""
    return finalized(image).get(feature, 0)


def new_cluster_records(overrides: dict[str, int] | None = None) -> list[FeatureLevelRecord]:
    """The FeatureLevelRecords a new cluster starts with (``overrides`` from
    ``storage format --feature``; level 0 is left out, but for the features
    of :data:`ABSENT`)."""
    levels = {**NEW_CLUSTER, **(overrides or {})}
    return [FeatureLevelRecord(name, lvl) for name, lvl in levels.items()
            if lvl > 0 or name in ABSENT]


def consumer_protocol_enabled(image: MetadataImage) -> bool:
    """Is the KIP-848 consumer group protocol on (``group.version`` >= 1)?"""
    return level(image, GROUP_VERSION) >= 1


def parse_level(text: str) -> tuple[str, int]:
    """``name=level`` as ``--feature`` takes it; ValueError with one clear line."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"--feature {text!r}: expected name=level")
    try:
        lvl = int(value)
    except ValueError:
        raise ValueError(f"--feature {text!r}: the level must be a whole number") from None
    problem = check_level(name, lvl)
    if problem:
        raise ValueError(problem)
    return name, lvl


def check_level(feature: str, lvl: int) -> str | None:
    """Why ``feature`` cannot be at ``lvl`` in this build (None: it can)."""
    if feature not in SUPPORTED:
        return f"unknown feature {feature!r} (known: {', '.join(SUPPORTED)})"
    lo, hi = SUPPORTED[feature]
    if not (lo <= lvl <= hi) and not (lvl == 0 and lo == 0):
        return f"{feature} level {lvl} is not supported (supported: {lo}-{hi})"
    return None


def update(image: MetadataImage, updates: list[FeatureUpdate]) -> Outcome:
    """UpdateFeatures' decision (the module's rules): the records, or the refusal."""
    records = []
    seen: set[str] = set()
    for u in updates:
        if u.feature in seen:
            return Outcome.fail(ErrorCode.INVALID_REQUEST,
                                f"Feature {u.feature} was specified more than once.")
        seen.add(u.feature)
        problem = check_level(u.feature, u.level)
        if problem:
            return Outcome.fail(ErrorCode.INVALID_UPDATE_VERSION, problem)
        if u.feature in FIXED or u.feature == KRAFT_VERSION:
            return Outcome.fail(ErrorCode.INVALID_UPDATE_VERSION,
                                f"{u.feature} cannot be changed by a record")
        current = level(image, u.feature)
        if u.level < current and u.upgrade_type not in (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return Outcome.fail(
                ErrorCode.INVALID_UPDATE_VERSION,
                f"Can't downgrade the level of {u.feature} from {current} to {u.level} "
                "without setting the upgrade type to safe or unsafe downgrade.")
        if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return Outcome.fail(ErrorCode.INVALID_REQUEST,
                                f"unknown upgrade type {u.upgrade_type}")
        if u.level != current:
            records.append(FeatureLevelRecord(u.feature, u.level))
    return Outcome(records=records)
