"""Opening a partition directory: list segments, then trust or recover them.

:func:`open_dir` is the whole of it (:meth:`odradek.storage.log.Log.open` calls
it): the segments, and the log start, recovery point and high watermark taken
from the checkpoints as far as the segments bear them out.

Start-up work by case:

* Leftovers first: ``*.deleted``, ``*.tmp`` and ``*.cleaned`` files are
  removed, and index files without a ``.log`` are orphans and removed too. A
  ``<base>.log.swap`` is a cleaner swap that was decided but not finished
  (:mod:`odradek.storage.cleaner`): the segments it replaces (those based
  within its offsets) are removed, their ``.txnindex`` entries move to it, and
  it becomes ``<base>.log``, indexed afresh by recovery.
* Clean shutdown: nothing is read; every segment's size comes from ``stat``.
  Inactive segments stay unopened until used. The active segment's end is the
  checkpointed recovery point (a clean close flushed every log to its end, so
  the recovery point is the log end): it is *deferred*
  (:attr:`~odradek.storage.segment.Segment.deferred`), its indexes and the
  bytes after its last offset-index entry read only before its first append or
  truncation (:meth:`~odradek.storage.local_log.LocalLog.load_active`). Where
  that end cannot be the log end (at or below the base of an active segment
  holding batches), the active segment is loaded at once.
* Unclean stop: segments wholly below the recovery point are trusted as after a
  clean shutdown, except that one with a missing index is validated and
  re-indexed (Kafka does the same). The segment holding the recovery point is
  validated from it; later segments are validated whole.
* Damage (``skip_damage``, from ``log.recovery.damaged.batches``): with ``skip``
  (the default) damaged bytes are cut out of a segment that is not the last one
  and every later valid batch and segment is kept, leaving an offset gap that
  is reported (:mod:`odradek.storage.damage`). In the last (active) segment,
  where damage is most likely a torn write and later bytes may be stale, the
  first invalid batch ends the log as after any crash. With ``truncate``
  (Kafka's behaviour) the first invalid batch ends the log: its segment is cut
  there and later segments are deleted.
  Either way a segment whose offsets overlap the next one's ends the log.

Offsets increase from segment to segment but need not be contiguous.

Known limit of ``skip``: a truncation (``Log.truncate_to``) whose segment
deletions were not yet durable when the machine crashed can leave a stale
segment that ``skip`` keeps where ``truncate`` would drop it (the model test,
``tests/unit/storage/test_log_model.py``, runs in ``truncate`` mode for this
reason). A single node never truncates its log; replication must make its
truncations durable (leader-epoch checkpoint) before followers rely on ``skip``.
"""

from __future__ import annotations

import functools
import itertools
import posixpath
import uuid
from bisect import bisect_right
from dataclasses import dataclass, field

from odradek.storage.checkpoint import (
    format_partition_metadata,
    parse_partition_metadata,
    write_atomically,
)
from odradek.storage.config import LogConfig
from odradek.storage.damage import Damage
from odradek.storage.fs import FileSystem, makedirs_durable
from odradek.storage.handles import HandleCache
from odradek.storage.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    PARTITION_METADATA_FILE,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    parse_segment_file_name,
    segment_file_name,
    segment_path,
)
from odradek.storage.recovery import open_active_clean, recover_segment
from odradek.storage.segment import Segment
from odradek.storage.summary import KnownDir
from odradek.storage.txnfiles import SNAPSHOT_SUFFIX, encode_entry, parse_entries
from odradek.wire.batch import BATCH_HEADER_SIZE, read_batch_header


@dataclass(slots=True)
class LoadReport:
    clean: bool
    segments: int = 0
    recovered_segments: int = 0
    validated_bytes: int = 0
    truncated_bytes: int = 0
    deleted_segments: int = 0
    validated_batches: int = 0
    removed_files: list[str] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)


_PLAIN_REPORTS: dict[tuple[bool, int], LoadReport] = {}


def settled(report: LoadReport) -> LoadReport:
    """``report`` as a log keeps it once loaded: a report of nothing but its
    ``clean`` flag and segment count (the open of an idle or new partition)
    is one shared instance per (clean, segments), so an idle log holds no
    report of its own (three objects, ~216 bytes). Reports are read-only once
    the log is open; nothing may change a settled one."""
    if (report.recovered_segments or report.validated_bytes or report.truncated_bytes
            or report.deleted_segments or report.validated_batches or report.removed_files
            or report.damage or report.segments > 4):
        return report
    key = (report.clean, report.segments)
    shared = _PLAIN_REPORTS.get(key)
    if shared is None:
        _PLAIN_REPORTS[key] = shared = report
    return shared

def _finish_swaps(fs: FileSystem, dir_path: str, report: LoadReport) -> None:
    for name in sorted(fs.listdir(dir_path)):
        if name.endswith(CLEANED_SUFFIX):
            fs.remove(f"{dir_path}/{name}")
            report.removed_files.append(name)
            continue
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        parsed = parse_segment_file_name(name[: -len(SWAP_SUFFIX)])
        if parsed is None:
            continue
        base = parsed[0]
        swap = f"{dir_path}/{name}"
        end, markers = _swap_end(fs, swap, base)
        entries = []
        for other in sorted(fs.listdir(dir_path)):
            found = parse_segment_file_name(other)
            if found is None or not base <= found[0] < end:
                continue
            path = f"{dir_path}/{other}"
            if found[1] == TXN_INDEX_SUFFIX:
                entries.extend(parse_entries(fs.read_file(path)))
            fs.remove(path)
            report.removed_files.append(other)
        fs.rename(swap, segment_path(dir_path, base, LOG_SUFFIX))
        entries = [e for e in entries if e.last_offset in markers]  # markers still there
        if entries:
            data = b"".join(encode_entry(e) for e in sorted(set(entries),
                                                            key=lambda e: e.last_offset))
            fs.write_file(segment_path(dir_path, base, TXN_INDEX_SUFFIX), data)
        fs.sync_dir(dir_path)


def _swap_end(fs: FileSystem, path: str, base: int) -> tuple[int, set[int]]:
    """The offset after the last whole batch of a swap file (``base`` if empty), and
    the offsets of its control batches (the markers the cleaner kept)."""
    handle = fs.open(path)
    try:
        size, pos, end = handle.size(), 0, base
        markers: set[int] = set()
        while pos + BATCH_HEADER_SIZE <= size:
            h = read_batch_header(handle.pread(pos, BATCH_HEADER_SIZE), 0)
            if h.size < BATCH_HEADER_SIZE or pos + h.size > size:
                break
            if h.is_control:
                markers.add(h.base_offset)
            end, pos = h.next_offset, pos + h.size
        return end, markers
    finally:
        handle.close()


def _list_segments(fs: FileSystem, dir_path: str, report: LoadReport,
                   known: KnownDir | None = None) -> tuple[list[int], set[str]]:
    names = list(known.names) if known is not None else fs.listdir(dir_path)
    joined = "/".join(names) + "/"  # one search for both suffixes ("/" is in no name)
    if CLEANED_SUFFIX + "/" in joined or SWAP_SUFFIX + "/" in joined:
        _finish_swaps(fs, dir_path, report)
        names = fs.listdir(dir_path)
    bases: list[int] = []
    present = set(names)
    for name in names:
        parsed = parse_segment_file_name(name)
        if parsed is None:
            if name.endswith((DELETED_SUFFIX, TMP_SUFFIX)):
                fs.remove(f"{dir_path}/{name}")
                report.removed_files.append(name)
                present.discard(name)
            continue
        base, suffix = parsed
        if suffix == LOG_SUFFIX:
            bases.append(base)
        elif name[:-len(suffix)] + LOG_SUFFIX not in present:  # an orphan index
            fs.remove(f"{dir_path}/{name}")
            report.removed_files.append(name)
            present.discard(name)
    bases.sort()
    return bases, present


def _log_size(fs: FileSystem, dir_path: str, name: str, known: dict[str, int]) -> int:
    size = known.get(name)
    return fs.size(f"{dir_path}/{name}") if size is None else size


def load_segments(
    fs: FileSystem,
    handles: HandleCache,
    dir_path: str,
    config: LogConfig,
    *,
    now_ms: int,
    clean: bool,
    recovery_point: int,
    skip_damage: bool = True,
    listed: set[str] | None = None,
    known: KnownDir | None = None,
) -> tuple[list[Segment], LoadReport]:
    """The segments of ``dir_path`` in offset order, recovered as needed (see module doc).
    Returns an empty list for a directory without segments. ``listed``, if given,
    receives the names of the directory's files once leftovers are gone.
    ``known``: the directory as the log directory's clean-shutdown summary has
    it (:mod:`odradek.storage.summary`), read instead of listing it and asking
    each ``.log`` file's size."""
    report = LoadReport(clean=clean)
    bases, present = _list_segments(fs, dir_path, report, known)
    sizes = known.log_sizes if known is not None else {}
    if listed is not None:
        listed |= present
    segments = [
        Segment(
            fs,
            handles,
            dir_path,
            base,
            max_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            size=_log_size(fs, dir_path, segment_file_name(base, LOG_SUFFIX), sizes),
            created_ms=now_ms,
        )
        for base in bases
    ]
    report.segments = len(segments)
    if not segments:
        return segments, report
    for seg, nxt in itertools.pairwise(segments):
        seg.next_offset = nxt.base_offset
    if clean:
        active = segments[-1]
        if _defer_active(active, recovery_point):
            return segments, report
        if not open_active_clean(active):
            _recover(active, None, report, skip_damage, None)
        return segments, report
    first = max(bisect_right(bases, recovery_point) - 1, 0)
    last = len(segments) - 1
    for i, seg in enumerate(segments[:first]):
        indexed = all(
            segment_file_name(seg.base_offset, s) in present
            for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        if not indexed and _ends_log(
            _recover(seg, None, report, skip_damage, segments[i + 1].base_offset),
            segments, i, skip_damage,
        ):
            return _drop_after(segments, seg, report), report
    for i in range(first, len(segments)):
        seg = segments[i]
        point = recovery_point if i == first else None
        next_base = segments[i + 1].base_offset if i < last else None
        cut = _recover(seg, point, report, skip_damage, next_base)
        if i < last and _ends_log(cut, segments, i, skip_damage):
            return _drop_after(segments, seg, report), report
    return segments, report


def _defer_active(active: Segment, recovery_point: int) -> bool:
    """After a clean shutdown: leave ``active`` unread, ending at ``recovery_point``
    (the log end a clean close checkpointed) if that end is above its base; an
    empty one ends at its base."""
    if active.size == 0:
        end = active.base_offset  # nothing in it to disagree with
    elif recovery_point > active.base_offset:
        end = recovery_point
    else:
        return False
    active.next_offset = end
    active.deferred = True
    return True


def _ends_log(cut: bool, segments: list[Segment], i: int, skip_damage: bool) -> bool:
    """Must segments after ``segments[i]`` go? (They overlap it, or, without
    ``skip_damage``, it was cut.) A gap between the two is kept: compaction
    leaves them."""
    if i + 1 >= len(segments):
        return False
    seg, nxt = segments[i], segments[i + 1]
    if skip_damage:
        return seg.next_offset > nxt.base_offset
    return cut or seg.next_offset > nxt.base_offset


def _recover(
    seg: Segment, recovery_point: int | None, report: LoadReport, skip_damage: bool,
    next_base: int | None,
) -> bool:
    # Damage in the last (active) segment is cut as Kafka does: there it is most
    # likely a torn write, and bytes after it may be stale (written before a
    # truncation whose own write was lost).
    skip = skip_damage and next_base is not None
    result = recover_segment(seg, recovery_point, skip_damage=skip, next_base=next_base)
    report.recovered_segments += 1
    report.validated_bytes += result.validated_bytes
    report.validated_batches += result.validated_batches
    report.truncated_bytes += result.truncated_bytes
    report.damage.extend(result.damage)
    return result.truncated_bytes > 0


def _drop_after(segments: list[Segment], keep_last: Segment, report: LoadReport) -> list[Segment]:
    i = segments.index(keep_last)
    for seg in segments[i + 1 :]:
        for path in seg.paths:
            seg.handles.discard(path)
            if seg.fs.exists(path):
                seg.fs.remove(path)
        report.deleted_segments += 1
    return segments[: i + 1]


@dataclass(frozen=True)
class OpenedDir:
    """What :func:`open_dir` found: the log's segments (never empty) and bounds."""

    segments: list[Segment]
    report: LoadReport
    log_start_offset: int
    recovery_point: int
    high_watermark: int
    topic_id: uuid.UUID | None
    dir_changed: bool = True
    """Files may have been created, renamed or removed (not after a clean shutdown
    that left nothing to tidy): the directory wants a sync at the next flush."""
    names: frozenset[str] | None = None
    """The names of the directory's transaction files (``.txnindex``,
    ``.snapshot``) as listed, when nothing was changed (a clean shutdown that
    left nothing to tidy): for the partition's first look at them
    (:attr:`~odradek.storage.txnfiles.TxnFiles.listing`). Most logs have none:
    then the one empty frozenset."""


def open_dir(fs: FileSystem, handles: HandleCache, dir_path: str, config: LogConfig,
             now_ms: int, *, clean_shutdown: bool, recovery_point: int, log_start_offset: int,
             high_watermark: int | None, topic_id: uuid.UUID | None,
             skip_damage: bool, existing: bool = False,
             known: KnownDir | None = None) -> OpenedDir:
    """Open (creating if needed) a partition directory. ``recovery_point``,
    ``log_start_offset`` and ``high_watermark`` come from the log directory's
    checkpoint files; ``clean_shutdown`` from its marker; ``skip_damage`` from
    ``log.recovery.damaged.batches``. ``topic_id`` is checked against (or written
    to) ``partition.metadata``. ``existing``: the directory is known to exist
    (listed in its log directory just now), so it is not looked for. ``known``:
    the directory as the clean-shutdown summary has it (:func:`load_segments`);
    ``partition.metadata`` is read from the directory all the same."""
    created = False if existing else makedirs_durable(fs, dir_path)
    listed: set[str] = set()
    segments, report = load_segments(fs, handles, dir_path, config, now_ms=now_ms,
                                     clean=clean_shutdown, recovery_point=recovery_point,
                                     skip_damage=skip_damage, listed=listed, known=known)
    start = max(log_start_offset, segments[0].base_offset if segments else log_start_offset)
    changed = (created or not clean_shutdown or bool(report.removed_files)
               or report.deleted_segments > 0)
    if not segments or start > segments[-1].next_offset:
        changed = True
        # Nothing on disk, or everything below the checkpointed start is gone:
        # start empty at the log start so offsets never repeat.
        for seg in segments:
            seg.rename_deleted()
        for name in fs.listdir(dir_path):
            if name.endswith(DELETED_SUFFIX):
                fs.remove(f"{dir_path}/{name}")
        segments = [Segment.create(fs, handles, dir_path, start,
                                   max_index_bytes=config.segment_index_bytes,
                                   index_interval_bytes=config.index_interval_bytes,
                                   now_ms=now_ms)]
        segments[0].defer_empty()  # an idle new partition keeps no index objects
    leo = segments[-1].next_offset
    recovery = min(max(recovery_point, start), leo) if not created else leo
    if clean_shutdown:
        recovery = leo
    hw = min(max(high_watermark if high_watermark is not None else start, start), leo)
    return OpenedDir(segments, report, start, recovery, hw,
                     _partition_metadata(fs, dir_path, topic_id),
                     dir_changed=changed,
                     names=None if changed else _txn_names(listed))


_NO_NAMES: frozenset[str] = frozenset()


def _txn_names(listed: set[str]) -> frozenset[str]:
    """The transaction files among ``listed``; none: the one shared empty set (an
    empty frozenset built from an iterable is a new object of 216 bytes)."""
    found = [n for n in listed if n.endswith((TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX))]
    return frozenset(found) if found else _NO_NAMES


def _partition_metadata(fs: FileSystem, dir_path: str,
                        topic_id: uuid.UUID | None) -> uuid.UUID | None:
    path = posixpath.join(dir_path, PARTITION_METADATA_FILE)
    try:
        stored = _stored_topic_id(fs.read_file(path))
    except FileNotFoundError:
        stored = None
    if stored is not None and (topic_id is None or stored == topic_id):
        return stored
    if topic_id is not None:
        write_atomically(fs, path, format_partition_metadata(topic_id))
    return topic_id


@functools.lru_cache(maxsize=1024)
def _stored_topic_id(data: bytes) -> uuid.UUID | None:
    """The topic id a ``partition.metadata`` holds (None: unreadable). Every
    partition of a topic holds the same bytes: parsed once, one UUID shared."""
    try:
        return parse_partition_metadata(data)
    except ValueError:
        return None
