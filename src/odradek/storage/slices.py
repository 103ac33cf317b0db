"""A byte range of a segment file: what a read of the log returns.

Storage and the network shell share this one type: reads return slices
covering whole batches, and the shell writes them with ``sendfile``
(:mod:`odradek.broker.net.transfer`), or copies them where it must.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.fs import FileHandle


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes at ``position`` of the segment file ``path`` (open as
    ``file``): whole batches, the first of which starts at ``first_offset``."""

    path: str
    position: int
    length: int
    first_offset: int
    file: FileHandle

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        data = self.file.pread(self.position, self.length)
        if len(data) != self.length:
            raise OSError(f"short read: {len(data)} of {self.length} bytes")
        return data

    def rest(self, skip: int) -> FileSlice:
        """The slice without its first ``skip`` bytes (what a partial send left)."""
        return FileSlice(self.path, self.position + skip, self.length - skip,
                         self.first_offset, self.file)
