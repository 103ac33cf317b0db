"""Damaged segment bytes: finding the next good batch, and cutting the damage out.

Recovery validates batches (framing, magic, CRC, offsets that increase). When
a batch fails in the middle of a segment, what follows may still be intact:
a flipped byte in an old segment must not cost every later record, as it
does in Kafka (which cuts the log at the first bad batch and deletes every
later segment). With ``log.recovery.damaged.batches=skip`` (Odradek's
default) recovery searches forward for the next valid batch
(:func:`find_next_batch`). If there is one, the damaged range is cut out of
the segment and the log keeps an offset gap where the damaged batches were.
If there is none, the damage is a torn tail: the segment is cut there, as
after any crash. With ``truncate`` recovery behaves as Kafka does.

Cutting rewrites the segment file (:func:`cut_out`): the kept ranges go to
``<segment>.log.tmp``, which is fsynced and renamed over the ``.log``. The
damaged bytes are kept beside it in ``<segment>.log.<position>.damaged``
for inspection; the loader never reads or deletes such files. Invariant: a
rewritten segment holds only batches that passed validation, in increasing
offset order.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from odradek.storage.fs import FileSystem
from odradek.storage.handles import HandleCache
from odradek.wire.batch import LOG_OVERHEAD, MAGIC_OFFSET, MIN_BATCH_LENGTH, validate_batch
from odradek.wire.primitives import DecodeError

SCAN_CHUNK: Final = 4 << 20
COPY_CHUNK: Final = 4 << 20
DAMAGED_SUFFIX: Final = ".damaged"
_OFFSET_LEN: Final = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes of a segment that hold no valid batch.

    ``first_offset`` is the offset the damaged range should have started at
    (the next offset after the last good batch); ``next_offset`` is the first
    offset found intact after it, or None when nothing after it in the
    segment could be read. ``action`` says what was done: ``"skipped"`` (cut
    out, kept in ``saved_as``), ``"truncated"`` (the segment was cut there and
    later data dropped, Kafka's way), or ``"unread"`` (found while serving; the
    file is left as it is and fetches reaching it get CORRUPT_MESSAGE).
    """

    path: str
    position: int
    length: int
    first_offset: int
    next_offset: int | None
    action: str
    reason: str
    saved_as: str | None = None

    def describe(self) -> str:
        """One line for the broker's log: the file, where, what was lost and what to do."""
        lost = (f"offsets {self.first_offset}..{self.next_offset - 1}"
                if self.next_offset is not None else f"offsets from {self.first_offset}")
        if self.action == "skipped":
            return (f"{self.path}: {self.length} damaged bytes at position {self.position} "
                    f"({self.reason}); {lost} are lost and skipped, every later batch is kept; "
                    f"the damaged bytes are saved in {self.saved_as}")
        if self.action == "truncated":
            return (f"{self.path}: damaged at position {self.position} ({self.reason}); the log "
                    f"was cut there and {lost} dropped (log.recovery.damaged.batches=truncate)")
        return (f"{self.path}: damaged at position {self.position} ({self.reason}); fetches "
                f"reaching it get CORRUPT_MESSAGE. Stop the broker and restart it after removing "
                f"the .kafka_cleanshutdown marker to recover the segment, or restore the file")


def unread_damage(path: str, offset: int, error: Exception) -> Damage:
    """Damage found while serving or scanning ``path`` near ``offset`` (left in
    place, ``"unread"``), its position and reason taken from ``error``'s text
    (``"<path>: <reason> at <position>"``; -1 when it names none)."""
    text = str(error)
    position = -1
    if " at " in text:
        tail = text.rsplit(" at ", 1)[1]
        position = int(tail) if tail.isdigit() else -1
    return Damage(path, position, 0, offset, None, "unread", text.removeprefix(f"{path}: "))


def next_valid_in(buf: bytes, start: int, min_base_offset: int = 0) -> int | None:
    """Position ``>= start`` in ``buf`` of the first batch that validates whole and
    whose base offset is at least ``min_base_offset`` (for tools reading a file
    at once; recovery uses :func:`find_next_batch`)."""
    i = start + MAGIC_OFFSET
    while True:
        i = buf.find(b"\x02", i)
        if i < 0 or i - MAGIC_OFFSET + LOG_OVERHEAD > len(buf):
            return None
        cand = i - MAGIC_OFFSET
        base, length = _OFFSET_LEN.unpack_from(buf, cand)
        if (length >= MIN_BATCH_LENGTH and base >= min_base_offset
                and cand + length + LOG_OVERHEAD <= len(buf)):
            try:
                validate_batch(buf, cand)
                return cand
            except DecodeError:
                pass
        i += 1


def find_next_batch(
    fs: FileSystem, handles: HandleCache, path: str, start: int, end: int, min_base_offset: int
) -> int | None:
    """Position in ``[start, end)`` of the first batch that validates whole (framing,
    magic 2, CRC-32C) and whose base offset is at least ``min_base_offset``."""
    handle = handles.get(path)
    pos = start
    while pos < end:
        buf = handle.pread(pos, min(SCAN_CHUNK, end - pos))
        if len(buf) < MIN_BATCH_LENGTH + LOG_OVERHEAD:
            return None
        i = MAGIC_OFFSET
        while True:
            i = buf.find(b"\x02", i)
            if i < 0 or i - MAGIC_OFFSET + LOG_OVERHEAD > len(buf):
                break
            cand = i - MAGIC_OFFSET
            base, length = _OFFSET_LEN.unpack_from(buf, cand)
            size = length + LOG_OVERHEAD
            if length >= MIN_BATCH_LENGTH and base >= min_base_offset and pos + cand + size <= end:
                whole = buf if cand + size <= len(buf) else handle.pread(pos + cand, size)
                at = cand if whole is buf else 0
                try:
                    validate_batch(whole, at)
                    return pos + cand
                except DecodeError:
                    pass
            i += 1
        # Candidates whose header starts near the chunk's end are tried in the next one.
        pos += max(len(buf) - (MIN_BATCH_LENGTH + LOG_OVERHEAD), 1)
    return None


def cut_out(
    fs: FileSystem, handles: HandleCache, path: str, size: int,
    damaged: Sequence[tuple[int, int]],
) -> tuple[int, list[str]]:
    """Rewrite segment ``path`` without the byte ranges ``damaged`` ((start, end),
    sorted, disjoint), saving each range as ``<path>.<start>.damaged``. Returns the
    new size and the saved files' paths. Crash-safe: the ``.tmp`` file is removed
    by the loader if the rename never happened."""
    handle = handles.get(path)
    saved = []
    for lo, hi in damaged:
        target = f"{path}.{lo}{DAMAGED_SUFFIX}"
        fs.write_file(target, handle.pread(lo, hi - lo))
        fs.fsync(target)
        saved.append(target)
    tmp = path + ".tmp"
    out = handles.get(tmp, create=True)
    out.truncate(0)
    written = 0
    keep_from = 0
    for lo, hi in [*damaged, (size, size)]:
        pos = keep_from
        while pos < lo:
            chunk = handle.pread(pos, min(COPY_CHUNK, lo - pos))
            out.pwrite(written, [chunk])
            written += len(chunk)
            pos += len(chunk)
        keep_from = hi
    handles.discard(tmp)
    fs.fsync(tmp)
    handles.discard(path)
    fs.rename(tmp, path)
    fs.sync_dir(path.rsplit("/", 1)[0] or "/")
    return written, saved
