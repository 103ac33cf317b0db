"""Is the machine short of memory? The kernel's answer, read cheaply.

Drop-behind (:mod:`odradek.storage.pagecache`) keeps what partitions wrote in
the page cache while the kernel has room for it, and drops it behind each
partition's window once the kernel reports memory pressure. This module is
that report:

- :class:`MemoryReading` is one look at the kernel: Linux PSI's
  ``/proc/pressure/memory`` line ``some avg10=F`` (the share of the last ten
  seconds in which some task stalled waiting for memory, in percent; None
  where the file is missing, as in many containers) and ``MemTotal`` /
  ``MemAvailable`` from ``/proc/meminfo`` (bytes; 0 when unknown);
- :func:`under_pressure` is the pure decision on a reading: PSI above
  :data:`PSI_SOME_AVG10`, or (with or without PSI) ``MemAvailable`` below
  :data:`MIN_AVAILABLE_FRACTION` of ``MemTotal``. A reading with no total and
  no PSI is no pressure;
- :class:`PressureGauge` reads at most once per ``interval_ms`` of an injected
  monotonic clock and answers from its last reading in between, so a caller
  may ask on every step of its writes without touching ``/proc`` each time.

The reader is a seam: tests hand the gauge readings of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

PSI_SOME_AVG10 = 10.0
"""Percent of the last 10 s in which some task waited for memory, above which
the kernel is under pressure."""
MIN_AVAILABLE_FRACTION = 0.10
"""``MemAvailable`` below this share of ``MemTotal`` is pressure (the check
where PSI is missing, and a second one where it is present)."""
READ_INTERVAL_MS = 1000
"""A gauge reads ``/proc`` at most this often."""


@dataclass(frozen=True, slots=True)
class MemoryReading:
    """One look at the kernel's memory (see the module docstring)."""

    psi_some_avg10: float | None
    """``some avg10`` of ``/proc/pressure/memory`` in percent; None: no PSI here."""
    available_bytes: int
    """``MemAvailable`` (bytes; 0 when unknown)."""
    total_bytes: int
    """``MemTotal`` (bytes; 0 when unknown)."""


NO_READING = MemoryReading(None, 0, 0)
"""What a machine that tells nothing reads as: no pressure, no total."""

MemoryReader = Callable[[], MemoryReading]


def under_pressure(reading: MemoryReading, psi_threshold: float = PSI_SOME_AVG10,
                   min_available: float = MIN_AVAILABLE_FRACTION) -> bool:
    """Whether ``reading`` says the kernel is short of memory."""
    if reading.psi_some_avg10 is not None and reading.psi_some_avg10 > psi_threshold:
        return True
    return reading.total_bytes > 0 and (
        reading.available_bytes < reading.total_bytes * min_available)


def parse_psi(text: str) -> float | None:
    """``avg10`` of the ``some`` line of a PSI file (None if there is none)."""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind != "some":
            continue
        for field in rest.split():
            key, _, value = field.partition("=")
            if key == "avg10":
                try:
                    return float(value)
                except ValueError:
                    return None
    return None


def parse_meminfo(text: str) -> tuple[int, int]:
    """(MemAvailable, MemTotal) in bytes from ``/proc/meminfo`` text (0 if absent)."""
    found = {"MemAvailable": 0, "MemTotal": 0}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in found:
            fields = rest.split()
            if fields and fields[0].isdigit():
                found[key] = int(fields[0]) * 1024  # the kernel writes kB
    return found["MemAvailable"], found["MemTotal"]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_proc(root: str = "/proc") -> MemoryReading:
    """The kernel's memory now (two small reads of ``root``'s files; what is
    missing reads as unknown)."""
    psi = _read(f"{root}/pressure/memory")
    meminfo = _read(f"{root}/meminfo")
    available, total = parse_meminfo(meminfo) if meminfo is not None else (0, 0)
    return MemoryReading(parse_psi(psi) if psi is not None else None, available, total)


class PressureGauge:
    """:func:`under_pressure` of the last reading, read again once ``interval_ms``
    of ``now_ms`` (a monotonic clock in ms) have passed since the one before."""

    __slots__ = ("_last", "_next_ms", "_now_ms", "_read", "interval_ms", "reads")

    def __init__(self, read: MemoryReader, now_ms: Callable[[], int],
                 interval_ms: int = READ_INTERVAL_MS) -> None:
        self._read = read
        self._now_ms = now_ms
        self.interval_ms = interval_ms
        self._next_ms: int | None = None
        self._last = False
        self.reads = 0
        """Readings taken so far."""

    def under_pressure(self) -> bool:
        now = self._now_ms()
        if self._next_ms is None or now >= self._next_ms:
            self._next_ms = now + self.interval_ms
            self.reads += 1
            self._last = under_pressure(self._read())
        return self._last
