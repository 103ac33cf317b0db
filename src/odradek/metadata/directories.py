"""Which log directory holds each replica, and which replicas lost their data.

Kafka's KIP-858 gives every log directory an id (``directory.id`` in its
``meta.properties``); a broker registers the ids of its log directories
(BrokerRegistration ``LogDirs``, kept in RegisterBrokerRecord), and each
partition names, per replica, the directory it lives in (PartitionRecord and
PartitionChangeRecord ``Directories``, aligned with ``Replicas``). Two ids are
reserved, as in Kafka: ``UNASSIGNED`` (all zeros: not known) and ``LOST``
(…01: the directory the replica lived in is gone).

How Odradek uses them (the rules live in :mod:`odradek.metadata.partition_changes`):

* a new replica is placed in its broker's directory when the broker registered
  exactly one, else ``UNASSIGNED`` (a broker with several log directories does
  not report where each replica went, so its losses are not detected);
* a broker that registers without the directory a replica lived in (its disk
  was wiped and formatted again, or that directory is gone) lost that
  replica's data: the replica becomes ``LOST``, leaves the ISR even if it was
  its last member (a partition whose data now lives on no live ISR member has
  no leader rather than an empty one), and stays ``LOST`` until its leader
  adds it back to the ISR after it copied the log again;
* a ``LOST`` replica is never elected, clean or unclean, while any replica of
  the partition is not ``LOST``: electing it would make an empty log the
  truth. When every replica is ``LOST`` nothing is left to keep, and the first
  live one leads again (Kafka's behaviour for a lost single replica).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from odradek.metadata.image import MetadataImage, PartitionImage

UNASSIGNED = uuid.UUID(int=0)
LOST = uuid.UUID(int=1)
RESERVED = frozenset({UNASSIGNED, LOST, uuid.UUID(int=2)})
"""UNASSIGNED, LOST and MIGRATING (Kafka's ``DirectoryId``)."""


def homes(image: MetadataImage) -> dict[int, uuid.UUID]:
    """Each registered broker's directory for new replicas: its only log
    directory, or UNASSIGNED when it registered none or several."""
    return {b.node_id: b.log_dirs[0] if len(b.log_dirs) == 1 else UNASSIGNED
            for b in image.brokers.values()}


def directory_map(p: PartitionImage) -> dict[int, uuid.UUID]:
    """Replica → directory (UNASSIGNED for all when the partition names none)."""
    if len(p.directories) != len(p.replicas):
        return dict.fromkeys(p.replicas, UNASSIGNED)
    return dict(zip(p.replicas, p.directories, strict=True))


def lost_replicas(p: PartitionImage) -> set[int]:
    return {r for r, d in directory_map(p).items() if d == LOST}


def directories_for(replicas: Sequence[int], current: Mapping[int, uuid.UUID],
                    home: Mapping[int, uuid.UUID], isr: Sequence[int]) -> list[uuid.UUID]:
    """The directories of ``replicas``: a replica keeps the one it has, a new one
    goes to its broker's home; a LOST replica in ``isr`` (it copied the log
    again and its leader took it back) is at home again."""
    out = []
    for r in replicas:
        d = current.get(r, home.get(r, UNASSIGNED))
        if d == LOST and r in isr:
            d = home.get(r, UNASSIGNED)
        out.append(d)
    return out


def lost_on_registration(image: MetadataImage, node_id: int,
                         log_dirs: Sequence[uuid.UUID]) -> list[tuple[str, int]]:
    """The partitions whose replica on ``node_id`` lived in a directory the
    broker no longer registers (``log_dirs``, not empty): their data is gone."""
    if not log_dirs:
        return []
    have = set(log_dirs)
    out = []
    for t in image.topics.values():
        for p in t.partitions.values():
            if node_id not in p.replicas:  # most of a large cluster's: no map built
                continue
            d = directory_map(p).get(node_id)
            if d is not None and d not in RESERVED and d not in have:
                out.append((t.name, p.partition))
    return out
