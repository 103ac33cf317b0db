"""Is a page of a file in the page cache? ``mincore(2)`` on a mapping of it.

Unlike a ``preadv2(RWF_NOWAIT)`` probe, which starts read-ahead of a page it
finds missing, ``mincore`` changes nothing, so a test can look without warming
what it then measures.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int64]
_libc.mmap.restype = ctypes.c_void_p
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = mmap.PAGESIZE


def _check(ok: bool) -> None:
    if not ok:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def resident(path: Path | str, offset: int) -> bool:
    """Whether the page holding byte ``offset`` of ``path`` is cached."""
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_SHARED, fd,
                          offset - offset % PAGE)
        _check(addr is not None and addr != _MAP_FAILED)
        try:
            vec = (ctypes.c_ubyte * 1)()
            _check(_libc.mincore(addr, PAGE, vec) == 0)
            return bool(vec[0] & 1)
        finally:
            _libc.munmap(addr, PAGE)
    finally:
        os.close(fd)
