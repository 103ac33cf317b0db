"""The offset checkpoints of the log directories, as the log manager keeps them.

Each log directory holds four offset checkpoint files (the file format, and
how a file is replaced atomically, are in :mod:`odradek.storage.checkpoint`),
each with one entry per log in that directory, future logs included::

    recovery-point-offset-checkpoint   offsets below are fsynced
    log-start-offset-checkpoint        the log start offset
    replication-offset-checkpoint      the high watermark
    cleaner-offset-checkpoint          the cleaner's first dirty offset

This module owns three things about them:

* **Reading** at start-up (:func:`read_dir_checkpoints`). An unreadable
  recovery-point checkpoint counts as an unclean stop (everything is
  recovered); an unreadable other checkpoint reads as empty. A missing file
  reads as empty.
* **What is written** (:func:`checkpoint_contents`, :func:`checkpoint_files`):
  the state of every log as of now, in the directory it lives in. The cleaner
  checkpoint lists only logs a pass has ended in, and is not created until it
  has an entry.
* **When** (:class:`CheckpointSchedule`): the first three files every
  ``log.flush.offset.checkpoint.interval.ms``,
  ``log.flush.start.offset.checkpoint.interval.ms`` and
  ``replica.high.watermark.checkpoint.interval.ms``; the cleaner checkpoint
  once after each pass; any of them sooner when asked. At most one write is in
  flight (:class:`CheckpointJob`, run off the event loop).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.storage.checkpoint import (
    CheckpointFormatError,
    TopicPartition,
    clean_shutdown_path,
    format_offsets,
    read_offsets,
    write_atomically,
)
from odradek.storage.config import LogManagerConfig
from odradek.storage.fs import FileSystem
from odradek.storage.names import (
    CLEANER_OFFSET_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)

Offsets = dict[str, dict[TopicPartition, int]]
"""Checkpoint file name -> its entries."""


class _Checkpointed(Protocol):
    """What the checkpoints record of a log (``odradek.storage.log.Log`` is one)."""

    @property
    def parent_dir(self) -> str: ...

    @property
    def recovery_point(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def cleaner_checkpoint(self) -> int: ...


class _CheckpointOwner(Protocol):
    def checkpoint_done(self, error: BaseException | None) -> None: ...


@dataclass(slots=True)
class CheckpointJob:
    """Replace some checkpoint files (write, fsync, rename, sync dir) off the loop."""

    fs: FileSystem
    manager: _CheckpointOwner
    files: list[tuple[str, bytes]]
    done: bool = field(default=False)

    def run(self) -> None:
        for path, data in self.files:
            write_atomically(self.fs, path, data)

    def complete(self, error: BaseException | None = None) -> None:
        if not self.done:
            self.done = True
            self.manager.checkpoint_done(error)


def _read_checkpoint(fs: FileSystem, directory: str,
                     name: str) -> dict[TopicPartition, int] | None:
    """Entries of a checkpoint; None when it is unreadable (then recover everything)."""
    try:
        return read_offsets(fs, posixpath.join(directory, name))
    except (CheckpointFormatError, UnicodeDecodeError):
        return None


def read_dir_checkpoints(fs: FileSystem, directory: str) -> tuple[bool, Offsets]:
    """(whether the directory's clean-shutdown marker is there and its recovery-point
    checkpoint readable, the entries of each checkpoint file). The marker is
    left in place."""
    clean = fs.exists(clean_shutdown_path(directory))
    recovery = _read_checkpoint(fs, directory, RECOVERY_POINT_CHECKPOINT)
    if recovery is None:
        clean, recovery = False, {}
    return clean, {
        RECOVERY_POINT_CHECKPOINT: recovery,
        LOG_START_OFFSET_CHECKPOINT:
            _read_checkpoint(fs, directory, LOG_START_OFFSET_CHECKPOINT) or {},
        HIGH_WATERMARK_CHECKPOINT:
            _read_checkpoint(fs, directory, HIGH_WATERMARK_CHECKPOINT) or {},
        CLEANER_OFFSET_CHECKPOINT:
            _read_checkpoint(fs, directory, CLEANER_OFFSET_CHECKPOINT) or {},
    }


def checkpoint_contents(dirs: Sequence[str],
                        logs: Iterable[Mapping[TopicPartition, _Checkpointed]],
                        ) -> dict[str, Offsets]:
    """Directory → checkpoint file name → entries."""
    out: dict[str, Offsets] = {
        d: {RECOVERY_POINT_CHECKPOINT: {}, LOG_START_OFFSET_CHECKPOINT: {},
            HIGH_WATERMARK_CHECKPOINT: {}, CLEANER_OFFSET_CHECKPOINT: {}}
        for d in dirs}
    for by_partition in logs:
        for tp, log in by_partition.items():
            contents = out.get(log.parent_dir)
            if contents is None:
                continue
            contents[RECOVERY_POINT_CHECKPOINT][tp] = log.recovery_point
            contents[LOG_START_OFFSET_CHECKPOINT][tp] = log.log_start_offset
            contents[HIGH_WATERMARK_CHECKPOINT][tp] = log.high_watermark
            if log.cleaner_checkpoint >= 0:
                contents[CLEANER_OFFSET_CHECKPOINT][tp] = log.cleaner_checkpoint
    return out


def checkpoint_files(fs: FileSystem, contents: Mapping[str, Offsets],
                     names: list[str] | None) -> list[tuple[str, bytes]]:
    """(path, bytes) of the named checkpoint files (None or empty: all) of every
    directory in ``contents``."""
    files: list[tuple[str, bytes]] = []
    for directory, offsets in contents.items():
        chosen = names or list(offsets)
        if not offsets[CLEANER_OFFSET_CHECKPOINT] and not fs.exists(
                posixpath.join(directory, CLEANER_OFFSET_CHECKPOINT)):
            chosen = [n for n in chosen if n != CLEANER_OFFSET_CHECKPOINT]  # none yet
        files += [(posixpath.join(directory, n), format_offsets(offsets[n])) for n in chosen]
    return files


def _intervals(config: LogManagerConfig) -> dict[str, int]:
    """The checkpoints written periodically, and how often (ms)."""
    return {
        RECOVERY_POINT_CHECKPOINT: config.recovery_point_checkpoint_interval_ms,
        LOG_START_OFFSET_CHECKPOINT: config.log_start_offset_checkpoint_interval_ms,
        HIGH_WATERMARK_CHECKPOINT: config.high_watermark_checkpoint_interval_ms,
    }


class CheckpointSchedule:
    """When each checkpoint file is next due (monotonic ms), and whether a write of
    them is in flight."""

    def __init__(self, config: LogManagerConfig, now_ms: int) -> None:
        self.next: dict[str, int] = {
            name: now_ms + interval for name, interval in _intervals(config).items()}
        self.in_flight = False

    def write_soon(self, name: str, now_ms: int) -> None:
        """Write ``name`` at the next tick (one not written periodically is written
        once)."""
        self.next[name] = now_ms

    def write_all_soon(self, now_ms: int) -> None:
        """Write every checkpoint that is due at all at the next tick."""
        for name in self.next:
            self.next[name] = now_ms

    def take_due(self, now_ms: int, config: LogManagerConfig) -> list[str]:
        """The checkpoints to write now (none while a write is in flight): each
        periodic one is due again an interval later, one asked for is forgotten.
        When there are any, a write is in flight until :attr:`in_flight` is reset."""
        if self.in_flight:
            return []
        names = [name for name, due in self.next.items() if due <= now_ms]
        if not names:
            return []
        intervals = _intervals(config)
        for name in names:
            if name in intervals:
                self.next[name] = now_ms + intervals[name]
            else:
                del self.next[name]  # written once when asked for (after a pass)
        self.in_flight = True
        return names
