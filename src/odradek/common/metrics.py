"""One registry of the broker's metrics, and its Prometheus text rendering.

Three kinds, each a family of series told apart by label values:

- :class:`Counter`: a number that only goes up (requests, bytes, errors),
  added to by the broker or read when rendered (a callable, for totals kept
  elsewhere);
- :class:`Gauge`: a number read when rendered (a callable), for what the
  broker already knows (connections open, log end offsets);
- :class:`Histogram`: observations counted into cumulative buckets, with their
  sum and count (request latency), as Prometheus histograms are.

A family is registered once, by name, with its label names; a series is made on
its first use. :func:`render` writes the registry in the Prometheus text
exposition format (version 0.0.4): per family a ``# HELP`` and a ``# TYPE``
line, then one line per series, ``name{label="value",...} number``; a
histogram's series are ``name_bucket{...,le="B"}`` (cumulative, ``+Inf``
last), ``name_sum`` and ``name_count``. Label values are escaped (backslash,
double quote, newline). Pure: no I/O, no clock; the endpoint that serves the
text belongs to the shell. :func:`render_openmetrics` writes the same
families in OpenMetrics 1.0.0 text: a counter's family is named without its
``_total`` suffix (the series keep it; so a counter's name must end in
``_total``), double quotes in HELP are escaped too, and the text ends with
``# EOF``.

Invariant: a family's label names are fixed at registration and every series
gives a value for each; a name registered twice must be the same kind with
the same labels (it is the same family, returned again).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                     1.0, 2.5, 5.0, 10.0, 30.0)
"""Request latency buckets, in seconds (a long-polling Fetch waits up to
``fetch.max.wait.ms``, 500 ms by default, and a Produce with acks=all waits for
its followers)."""

Labels = tuple[str, ...]


class _Family:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.labels: Labels = tuple(labels)
        self.rendered: dict[tuple[str, Labels], str] = {}
        """The rendering's line prefix (``name_suffix{k="v",...} ``) of each
        series rendered, by (suffix, label values): a scrape escapes and joins
        the labels of a new series only (emptied when most are gone)."""

    def _check(self, values: Labels) -> None:
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name}: labels {self.labels}, got values {values}")

    def _checked(self, read: Iterable[tuple[Labels, float]]) -> Iterable[tuple[Labels, float]]:
        n = len(self.labels)
        for labels, value in read:
            if len(labels) != n:
                self._check(labels)
            yield labels, value

    def samples(self) -> Iterable[tuple[str, Labels, Labels, float]]:
        """(name suffix, label names, label values, value) of every series."""
        raise NotImplementedError


class Cell:
    """One series' number, for a caller that adds to it on a hot path (keep the
    cell, skip the lookup by labels)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0


class Counter(_Family):
    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 read: Callable[[], Iterable[tuple[Labels, float]]] | None = None) -> None:
        super().__init__(name, help_text, labels)
        self.values: dict[Labels, Cell] = {}
        self.read = read
        """Called at each rendering for (label values, total) pairs, when given
        (totals that never go down, kept by their owner)."""

    def cell(self, *labels: str) -> Cell:
        """The series of ``labels`` (made at 0 on first use)."""
        cell = self.values.get(labels)
        if cell is None:
            self._check(labels)
            cell = self.values[labels] = Cell()
        return cell

    def inc(self, *labels: str, by: float = 1.0) -> None:
        self.cell(*labels).value += by

    def get(self, *labels: str) -> float:
        cell = self.values.get(labels)
        return cell.value if cell is not None else 0.0

    def samples(self) -> Iterable[tuple[str, Labels, Labels, float]]:
        current = {labels: cell.value for labels, cell in self.values.items()}
        if self.read is not None:
            current.update(self._checked(self.read()))
        names = self.labels
        for labels, value in sorted(current.items()):
            yield "", names, labels, value


class Gauge(_Family):
    kind = "gauge"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 read: Callable[[], Iterable[tuple[Labels, float]]] | None = None) -> None:
        super().__init__(name, help_text, labels)
        self.values: dict[Labels, float] = {}
        self.read = read
        """Called at each rendering for (label values, value) pairs, when given."""

    def set(self, value: float, *labels: str) -> None:
        self._check(labels)
        self.values[labels] = value

    def samples(self) -> Iterable[tuple[str, Labels, Labels, float]]:
        current = dict(self.values)
        if self.read is not None:
            current.update(self._checked(self.read()))
        names = self.labels
        for labels, value in sorted(current.items()):
            yield "", names, labels, value


class Histogram(_Family):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 buckets: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        super().__init__(name, help_text, labels)
        if list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{name}: buckets must increase: {buckets}")
        self.buckets = tuple(buckets)
        self._bounds = (*(_number(b) for b in self.buckets), "+Inf")
        """The ``le`` label value of each bucket, +Inf last."""
        self.series: dict[Labels, list[float]] = {}
        """Per series: a count per bucket (not cumulative; the last for +Inf),
        then the sum."""

    def row(self, *labels: str) -> list[float]:
        """The series of ``labels`` (made empty on first use), for
        :func:`observe_into` on a hot path."""
        row = self.series.get(labels)
        if row is None:
            self._check(labels)
            row = self.series[labels] = [0.0] * (len(self.buckets) + 2)
        return row

    def observe(self, value: float, *labels: str) -> None:
        observe_into(self.buckets, self.row(*labels), value)

    def count(self, *labels: str) -> int:
        row = self.series.get(labels)
        return int(sum(row[:-1])) if row is not None else 0

    def quantile(self, q: float, *labels: str) -> float:
        """An estimate of the ``q`` quantile (0 ≤ q ≤ 1) of a series, as
        Prometheus's ``histogram_quantile`` makes it: linear within the bucket
        it falls in (from 0 for the first); the largest finite bound when it
        falls in +Inf; NaN for a series with no observations."""
        row = self.series.get(labels)
        total = sum(row[:-1]) if row is not None else 0
        if row is None or total == 0:
            return math.nan
        rank = q * total
        running = 0.0
        for i, bound in enumerate(self.buckets):
            n = row[i]
            if running + n >= rank and n > 0:
                lower = self.buckets[i - 1] if i else 0.0
                return lower + (bound - lower) * (rank - running) / n
            running += n
        return self.buckets[-1]

    def samples(self) -> Iterable[tuple[str, Labels, Labels, float]]:
        names = (*self.labels, "le")
        for labels, row in sorted(self.series.items()):
            running = 0.0
            for bound, n in zip(self._bounds, row[:-1], strict=True):
                running += n
                yield "_bucket", names, (*labels, bound), running
            yield "_sum", self.labels, labels, row[-1]
            yield "_count", self.labels, labels, running


def observe_into(buckets: tuple[float, ...], row: list[float], value: float) -> None:
    """Count ``value`` into a histogram series (:meth:`Histogram.row`)."""
    row[bisect.bisect_left(buckets, value)] += 1
    row[-1] += value


Family = Counter | Gauge | Histogram


class Registry:
    """Every metric family of one broker, by name."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def _add(self, family: Family) -> Family:
        have = self.families.get(family.name)
        if have is None:
            self.families[family.name] = family
            return family
        if type(have) is not type(family) or have.labels != family.labels:
            raise ValueError(f"metric {family.name} is already registered as a {have.kind} "
                             f"with labels {have.labels}")
        return have

    def counter(self, name: str, help_text: str, labels: Sequence[str] = (),
                read: Callable[[], Iterable[tuple[Labels, float]]] | None = None) -> Counter:
        family = self._add(Counter(name, help_text, labels, read))
        assert isinstance(family, Counter)
        return family

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = (),
              read: Callable[[], Iterable[tuple[Labels, float]]] | None = None) -> Gauge:
        family = self._add(Gauge(name, help_text, labels, read))
        assert isinstance(family, Gauge)
        return family

    def histogram(self, name: str, help_text: str, labels: Sequence[str] = (),
                  buckets: Sequence[float] = LATENCY_BUCKETS_S) -> Histogram:
        family = self._add(Histogram(name, help_text, labels, buckets))
        assert isinstance(family, Histogram)
        return family


def render(registry: Registry) -> str:
    """The registry in the Prometheus text exposition format (see the module)."""
    lines = _render_lines(registry, openmetrics=False)
    return "\n".join(lines) + "\n" if lines else ""


def render_openmetrics(registry: Registry) -> str:
    """The registry in OpenMetrics 1.0.0 text (see the module); always ends with
    ``# EOF``."""
    return "\n".join([*_render_lines(registry, openmetrics=True), "# EOF"]) + "\n"


CONTENT_TYPE_TEXT = "text/plain; version=0.0.4; charset=utf-8"
"""The content type of :func:`render`."""
CONTENT_TYPE_OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
"""The content type of :func:`render_openmetrics`."""


def _render_lines(registry: Registry, openmetrics: bool) -> list[str]:
    lines: list[str] = []
    for name in sorted(registry.families):
        family = registry.families[name]
        family_name = name
        if openmetrics and family.kind == "counter":
            family_name = name.removesuffix("_total")
        help_text = _escape_help(family.help)
        if openmetrics:  # OpenMetrics escapes double quotes in HELP too
            help_text = help_text.replace('"', '\\"')
        lines.append(f"# HELP {family_name} {help_text}")
        lines.append(f"# TYPE {family_name} {family.kind}")
        known = family.rendered
        append = lines.append
        count = 0
        for suffix, names, values, value in family.samples():
            count += 1
            prefix = known.get((suffix, values))
            if prefix is None:
                if names:
                    pairs = ",".join(f'{k}="{_escape_label(v)}"'
                                     for k, v in zip(names, values, strict=True))
                    prefix = f"{name}{suffix}{{{pairs}}} "
                else:
                    prefix = f"{name}{suffix} "
                known[(suffix, values)] = prefix
            if -_EXACT < value < _EXACT:  # _number's common case, inline
                whole = int(value)
                append(prefix + (str(whole) if whole == value else repr(float(value))))
            else:
                append(prefix + _number(value))
        if len(known) > 2 * count + 16:  # many series gone since: forget them
            family.rendered = {}
    return lines


def _number(value: float) -> str:
    if -_EXACT < value < _EXACT:  # finite, not NaN
        whole = int(value)
        return str(whole) if whole == value else repr(float(value))
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


_EXACT = float(2**53)


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")
