"""The cleaner's segment swap: cleaned bytes replace the segments they came from.

The steps, each a crash point (:mod:`odradek.storage.loader` finishes a swap
that was decided and not done; :mod:`odradek.storage.cleaner` has the whole
protocol)::

    <base>.log.cleaned  --rename-->  <base>.log.swap   (+ directory sync: decided)
    the old segments    --rename-->  *.deleted          (removed later)
    <base>.log.swap     --rename-->  <base>.log         (indexed afresh)

The ``.txnindex`` entries of the old segments whose ABORT marker the cleaner
kept move to the new segment; the offsets of the markers it removed are
returned, for the partition to forget those aborted transactions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from odradek.common import crashpoints
from odradek.storage.local_log import LocalLog
from odradek.storage.names import LOG_SUFFIX, SWAP_SUFFIX, segment_path
from odradek.storage.segment import Segment
from odradek.storage.txnfiles import TxnFiles
from odradek.wire.primitives import DecodeError


def swap_cleaned(local: LocalLog, txn_files: TxnFiles, old: Sequence[Segment],
                 cleaned_path: str) -> set[int] | None:
    """Swap ``cleaned_path`` in for ``old`` (consecutive inactive segments of
    ``local``). Returns the offsets of the ABORT markers the cleaning removed;
    None (and the cleaned file removed) when the log changed meanwhile
    (retention, truncation, deletion took a segment)."""
    local.drain_writes()
    fs = local.fs
    segments = local.segments
    n = len(old)
    i = next((k for k, seg in enumerate(segments) if seg is old[0]), -1)
    if i < 0 or list(segments[i:i + n]) != list(old) or i + n >= len(segments):
        with contextlib.suppress(OSError):
            fs.remove(cleaned_path)
        return None
    base = old[0].base_offset
    live = segment_path(local.dir_path, base, LOG_SUFFIX)
    swap = live + SWAP_SUFFIX
    local.rewrites += 1
    crashpoints.reach("cleaner.after_write")
    config = local.config
    try:
        entries = txn_files.aborted([s.base_offset for s in old])
        fs.rename(cleaned_path, swap)
        fs.sync_dir(local.dir_path)  # the decision: recovery finishes it
        crashpoints.reach("cleaner.after_decide")
        local.schedule_delete(old)
        crashpoints.reach("cleaner.after_delete")
        fs.rename(swap, live)
        crashpoints.reach("cleaner.after_rename")
        seg = Segment(fs, local.handles, local.dir_path, base,
                      max_index_bytes=config.segment_index_bytes,
                      index_interval_bytes=config.index_interval_bytes,
                      size=fs.size(live), created_ms=old[0].created_ms)
        seg.rebuild_indexes()
        seg.next_offset = segments[i + n].base_offset
        kept_markers = {h.base_offset for _, h in seg.iter_headers(0) if h.is_control}
        gone = {e.last_offset for e in entries if e.last_offset not in kept_markers}
        for entry in entries:
            if entry.last_offset in kept_markers:
                txn_files.append_aborted(base, entry)
        fs.sync_dir(local.dir_path)
    except (OSError, DecodeError) as e:
        error = e if isinstance(e, OSError) else OSError(str(e))
        raise local.io_failed("segment swap", error) from e
    local.swap(i, n, seg)
    return gone
