"""The chaos harness's model: its fault schedule, what a run records, and the
checks of that history (pure: no processes, no clients; :mod:`odradek.testing.chaos`
runs the cluster and fills a :class:`History`).

Fault kinds. The default set (``KINDS``), one node at a time:

``kill``
    ``kill -9`` of the leader of partition 0, restarted after the hold.
``controller``
    ``kill -9`` of the active controller (the quorum leader, asked with
    DescribeQuorum), restarted after the hold.
``pause``
    SIGSTOP of the leader of a partition for longer than
    ``broker.session.timeout.ms``, then SIGCONT.
``isolate``
    the leader of a partition cut off from the other nodes (quorum and
    replication links; clients still reach it), then the links healed.
``slowdisk``
    every fsync of the leader of a partition delayed
    (``ODRADEK_TEST_FSYNC_DELAY_FILE``, :mod:`odradek.common.crashpoints`)
    while the topic has ``flush.messages=1`` so that fsyncs are on the
    produce path, then both undone.

Restarts (``RESTART_KINDS``, issue 40's matrix):

``restart``
    every node stopped cleanly (SIGTERM to all at once), started again after
    the hold.
``restart9``
    ``kill -9`` of every node at once, started again after the hold.
``rolling``
    each node in turn stopped cleanly and started again, the next one only
    once every ISR is full again.
``ctlbroker``
    ``kill -9`` of the active controller together with another node (the
    leader of a partition, or the next node), both started after the hold.
``wipe``
    ``kill -9`` of the leader of a partition, its data directory deleted and
    formatted again with the cluster id (a replaced disk), then started.
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("kill", "controller", "pause", "isolate", "slowdisk")
RESTART_KINDS = ("restart", "restart9", "rolling", "ctlbroker", "wipe")
ALL_KINDS = KINDS + RESTART_KINDS
TOPIC = "chaos"
TXN_TOPIC = "chaos-txn"
PARTITIONS = 3
NODES = 3
SESSION_TIMEOUT_MS = 3000


# -- the schedule ---------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    kind: str
    partition: int
    """The fault hits the leader of this partition (kill, pause, isolate, slowdisk)."""
    hold_s: float
    """How long the fault lasts before its heal."""
    settle_s: float
    """Traffic without a fault before it."""
    delay_ms: int = 0
    """slowdisk: added to every fsync."""

    def describe(self) -> str:
        whole = {"restart": "SIGTERM to every node, down",
                 "restart9": "kill -9 of every node, down",
                 "rolling": "a rolling restart, each node down"}
        if self.kind in whole:
            return f"{whole[self.kind]} for {self.hold_s:.1f} s"
        target = ("the active controller" if self.kind == "controller"
                  else "the active controller and another node" if self.kind == "ctlbroker"
                  else f"the leader of {TOPIC}-{self.partition}")
        what = {"kill": "kill -9", "controller": "kill -9", "pause": "SIGSTOP",
                "isolate": "isolate", "slowdisk": f"slow disk (+{self.delay_ms} ms per fsync)",
                "ctlbroker": "kill -9", "wipe": "kill -9, wipe and format"}
        return f"{what[self.kind]} {target} for {self.hold_s:.1f} s"


def schedule(seed: int, rounds: int, faults: Iterable[str] = KINDS) -> list[Fault]:
    """``rounds`` faults of each kind in ``faults``, in an order, with targets and
    holds, all drawn from ``seed``."""
    rng = random.Random(seed)
    kinds = [k for k in faults for _ in range(rounds)]
    rng.shuffle(kinds)
    out = []
    pause_s = SESSION_TIMEOUT_MS / 1000
    for kind in kinds:
        partition = 0 if kind in ("kill", "controller") else rng.randrange(PARTITIONS)
        if kind in ("pause", "isolate"):
            hold = rng.uniform(pause_s + 0.3, pause_s + 1.5)  # longer than the session
        elif kind == "slowdisk":
            hold = rng.uniform(1.5, 3.0)
        else:
            hold = rng.uniform(0.5, 3.0)
        delay = rng.choice((50, 200, 500, 1000)) if kind == "slowdisk" else 0
        out.append(Fault(kind, partition, round(hold, 2), round(rng.uniform(0.3, 1.0), 2),
                         delay))
    return out


# -- what happened ----------------------------------------------------------------------


@dataclass
class Injected:
    fault: Fault
    node: int
    start: float
    healed: float = 0.0
    recovered: float = 0.0
    gap_s: float = 0.0
    gap_partition: int = -1


@dataclass
class Acked:
    producer: str
    seq: int
    partition: int
    offset: int
    value: str
    at: float


@dataclass
class History:
    acked: list[Acked] = field(default_factory=list)
    produce_errors: Counter[str] = field(default_factory=Counter)
    fatal_errors: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, producer, message) of each fatal producer error (the producer is replaced)."""
    unresolved: int = 0
    """Records whose delivery was still unknown when the producers were closed."""
    tailed: list[tuple[int, int, str]] = field(default_factory=list)
    grouped: list[tuple[int, int, str]] = field(default_factory=list)
    final: list[tuple[int, int, str]] = field(default_factory=list)
    commits: list[tuple[float, int, int]] = field(default_factory=list)
    final_committed: dict[int, int] = field(default_factory=dict)
    hws: list[tuple[float, int, int]] = field(default_factory=list)
    final_hw: dict[int, int] = field(default_factory=dict)
    client_errors: Counter[str] = field(default_factory=Counter)
    group_events: list[tuple[float, str]] = field(default_factory=list)
    """Rebalances of the group's member and failed commits, with their times."""
    faults: list[Injected] = field(default_factory=list)
    tracebacks: dict[int, str] = field(default_factory=dict)
    txn_committed: list[int] = field(default_factory=list)
    """Transactions (numbers) whose commit was acknowledged."""
    txn_aborted: list[int] = field(default_factory=list)
    """Transactions aborted (by the producer, or after a commit it was told to abort)."""
    txn_fatal: list[tuple[float, str]] = field(default_factory=list)
    """Fatal errors of the transactional producer (it is replaced: a new id epoch)."""
    txn_undecided: list[int] = field(default_factory=list)
    """Transactions whose end a fatal error left unknown: whole or absent."""
    txn_sizes: dict[int, int] = field(default_factory=dict)
    """Records written in each transaction."""
    txn_read: list[tuple[int, int, str]] = field(default_factory=list)
    ctp_committed: dict[int, int] = field(default_factory=dict)
    """The consume-transform-produce group's committed offsets at the end, per
    partition of ``TOPIC`` (how far it got)."""
    """``TXN_TOPIC`` read back with read_committed at the end."""
    strays: list[str] = field(default_factory=list)
    """``-stray`` directories found in the nodes' data directories at the end."""

    def during(self, t: float) -> str:
        """Which round was under way at ``t`` (for the evidence of a failed check)."""
        for i, f in enumerate(self.faults, 1):
            if f.start <= t <= (f.recovered or float("inf")):
                return (f"round {i}, {f.fault.kind} of node {f.node}, "
                        f"{t - f.start:.1f} s after the fault")
        return "between rounds"


def save_history(history: History, path: Path) -> None:
    """Keep a run's history beside its logs (``python -m odradek.testing.chaos_model
    PATH`` checks it again), so that a long run's record survives whatever
    happens to its report."""
    import pickle

    with open(path, "wb") as f:
        pickle.dump(history, f)


def load_history(path: Path) -> History:
    import pickle

    with open(path, "rb") as f:
        history: History = pickle.load(f)
    return history


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class ChaosReport:
    seed: int
    history: History
    checks: list[Check]
    elapsed_s: float
    directory: Path

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def format(self) -> str:
        h = self.history
        kinds = Counter(f.fault.kind for f in h.faults)
        lines = [
            f"chaos seed {self.seed}: {len(h.faults)} faults "
            f"({', '.join(f'{k} {n}' for k, n in kinds.items())}) in {self.elapsed_s:.0f} s; "
            f"nodes' logs under {self.directory}",
            f"records: {len(h.acked)} acknowledged, {len(h.final)} in the log at the end, "
            f"{len({(p, o) for p, o, _ in h.tailed})} consumed by the assign() consumer, "
            f"{len({(p, o) for p, o, _ in h.grouped})} by the group; "
            f"{h.unresolved} unresolved at close",
            f"produce errors (retried or failed): {_counts(h.produce_errors)}",
            f"client errors reported: {_counts(h.client_errors)}",
            *(f"fatal producer error ({h.during(t)}): {name}: {message}"
              for t, name, message in h.fatal_errors),
            f"group: {sum(e.startswith('assigned') for _, e in h.group_events)} assignments, "
            f"{sum(e.startswith('commit failed') for _, e in h.group_events)} failed commits, "
            f"{sum(e.endswith('member was replaced') for _, e in h.group_events)} members "
            f"replaced after a commit unanswered for 30 s; "
            f"group commits acknowledged: {len(h.commits)}; "
            f"high watermarks sampled: {len(h.hws)}",
            f"consume-transform-produce: {len(h.txn_committed)} transactions committed, "
            f"{len(h.txn_aborted)} aborted, {len(h.txn_fatal)} fatal errors; "
            f"{len(h.txn_read)} records read back (read_committed); its group committed "
            f"{_by_partition(h.ctp_committed)} (high watermarks {_by_partition(h.final_hw)})",
            "availability: longest time a partition had no acknowledgement, from the "
            "fault to its recovery (full ISRs, every partition acknowledging again):",
        ]
        by_kind: dict[str, list[Injected]] = defaultdict(list)
        for f in h.faults:
            by_kind[f.fault.kind].append(f)
        for kind, done in by_kind.items():
            gaps = [f.gap_s for f in done]
            recover = [f.recovered - f.start for f in done]
            lines.append(
                f"  {kind:<10} {len(done)} faults: gap max {max(gaps):.1f} s, median "
                f"{statistics.median(gaps):.1f} s; fault to recovery median "
                f"{statistics.median(recover):.1f} s")
        lines.append("checks:")
        for c in self.checks:
            lines.append(f"  {'ok  ' if c.ok else 'FAIL'} {c.name}"
                         + (f": {c.detail}" if c.detail else ""))
        for node, text in sorted(h.tracebacks.items()):
            # Whole (the check's line shows a few hundred characters): a failed
            # run's node logs may be gone before anyone reads them.
            lines.append(f"node {node}'s log around its first traceback:")
            lines.extend(f"  | {line}" for line in text.splitlines())
        lines.append("result: " + ("every check passed" if self.ok else
                                   f"{sum(not c.ok for c in self.checks)} check(s) failed "
                                   f"(seed {self.seed})"))
        return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in counter.most_common()) or "none"


# -- the checks -------------------------------------------------------------------------


def _examples(items: list[Any], n: int = 3) -> str:
    shown = "; ".join(str(i) for i in items[:n])
    return shown + (f"; … ({len(items)} in all)" if len(items) > n else "")


def check_history(h: History) -> list[Check]:
    checks = []
    final_at = {(p, o): v for p, o, v in h.final}
    final_where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, o, v in h.final:
        final_where[v].append((p, o))

    # (a) every acknowledged record is in the log, where its acknowledgement said.
    lost = [a for a in h.acked if a.value not in final_where]
    moved = [a for a in h.acked if a.value in final_where and a.offset >= 0
             and (a.partition, a.offset) not in final_where[a.value]]
    checks.append(Check(
        "(a) every acknowledged record is in the log at its offset", not lost and not moved,
        (f"{len(lost)} lost: " + _examples([(a.partition, a.offset, a.value, h.during(a.at))
                                            for a in lost])
         if lost else "") + (f" {len(moved)} at another offset: " + _examples(
             [(a.value, (a.partition, a.offset), final_where[a.value]) for a in moved])
             if moved else "") or f"{len(h.acked)} acknowledged, all there"))

    # (b) no value at two offsets, in any read.
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for p, o, v in _observations(h):
        where[v].add((p, o))
    dups = sorted((v, sorted(s)) for v, s in where.items() if len(s) > 1)
    checks.append(Check("(b) no value at two offsets (no duplicates)", not dups,
                        f"{len(dups)} values: " + _examples(dups) if dups else
                        f"{len(where)} distinct values"))

    # (c) per producer and partition, acknowledged offsets grow with the sequence.
    order_bad = []
    series: dict[tuple[str, int], list[Acked]] = defaultdict(list)
    for a in h.acked:
        if a.offset >= 0:  # (an acknowledgement that named no offset is checked by (a))
            series[(a.producer, a.partition)].append(a)
    for (producer, partition), acks in series.items():
        acks.sort(key=lambda a: a.seq)
        for x, y in itertools.pairwise(acks):
            if y.offset <= x.offset:
                order_bad.append((producer, partition, (x.seq, x.offset), (y.seq, y.offset)))
    checks.append(Check("(c) each producer's order is kept within a partition", not order_bad,
                        _examples(order_bad) if order_bad else
                        f"{len(series)} producer-partition series"))

    # (d) committed offsets never go back.
    back: list[Any] = []
    last: dict[int, int] = {}
    for t, p, o in h.commits:
        if p in last and o < last[p]:
            back.append((p, last[p], o, round(t, 1)))
        last[p] = max(o, last.get(p, o))
    for p, o in h.final_committed.items():
        if p in last and o < last[p]:
            back.append((p, last[p], f"final committed {o}"))
    short = {p: (h.final_committed.get(p), hw) for p, hw in h.final_hw.items()
             if h.final_committed.get(p) != hw}
    if short:
        back.append(f"the drained group's final committed offsets are not the high "
                    f"watermarks (partition: (committed, HW)) {short}; group events: "
                    + _examples([(e, h.during(t)) for t, e in h.group_events][-6:], 6))
    checks.append(Check("(d) the group's committed offsets never go back, and reach the end",
                        not back,
                        _examples(back) if back else
                        f"{len(h.commits)} commits; at the end {_by_partition(h.final_committed)}"
                        f" (high watermarks {_by_partition(h.final_hw)})"))

    # (e) the high watermark never goes back.
    hw_back = []
    seen: dict[int, tuple[int, float]] = {}
    for t, p, hw in sorted(h.hws):
        if p in seen and hw < seen[p][0]:
            hw_back.append((f"{TOPIC}-{p}", f"{seen[p][0]} then {hw}",
                            f"{t - seen[p][1]:.1f} s later", h.during(t)))
        if p not in seen or hw >= seen[p][0]:
            seen[p] = (hw, t)
    checks.append(Check("(e) the high watermark never goes back", not hw_back,
                        _examples(hw_back) if hw_back else f"{len(h.hws)} samples"))

    # (f) one value per offset across every read.
    values: dict[tuple[int, int], set[str]] = defaultdict(set)
    for p, o, v in _observations(h):
        values[(p, o)].add(v)
    split = sorted((po, sorted(vs), final_at.get(po)) for po, vs in values.items()
                   if len(vs) > 1)
    checks.append(Check("(f) each offset holds one value in every read", not split,
                        f"{len(split)} offsets: " + _examples(split) if split else
                        f"{len(values)} offsets"))

    checks.append(Check("(g) no internal error (traceback) in a node's log", not h.tracebacks,
                        "; ".join(f"node {n}: …{text[300:600]!r}…"
                                  for n, text in h.tracebacks.items())))

    checks.append(Check("(h) no directory moved aside (no topic was deleted)", not h.strays,
                        _examples(h.strays) if h.strays else ""))

    # (i) read_committed sees every committed transaction whole, nothing aborted.
    txns: dict[int, set[str]] = defaultdict(set)
    for _, _, v in h.txn_read:
        txns[int(v.split("|", 1)[0].split("-")[1])].add(v)
    partial = sorted(n for n in [*h.txn_committed, *(u for u in h.txn_undecided if u in txns)]
                     if len(txns.get(n, ())) != h.txn_sizes.get(n))
    leaked = sorted(set(txns) & set(h.txn_aborted))
    unknown = sorted(set(txns) - set(h.txn_committed) - set(h.txn_aborted)
                     - set(h.txn_undecided))
    dup_txn = len(h.txn_read) - sum(map(len, txns.values()))
    checks.append(Check(
        "(i) read_committed: each committed transaction whole, no aborted record",
        not partial and not leaked and not dup_txn and bool(h.txn_committed) and not unknown,
        (f"committed but not whole: {_examples(partial)} " if partial else "")
        + (f"aborted but visible: {_examples(leaked)} " if leaked else "")
        + (f"visible but never acknowledged: {_examples(unknown)} " if unknown else "")
        + (f"{dup_txn} duplicates" if dup_txn else "")
        or f"{len(h.txn_committed)} committed, {len(h.txn_aborted)} aborted"))
    checks.append(Check("(j) no fatal error of the transactional producer", not h.txn_fatal,
                        _examples([(h.during(t), m) for t, m in h.txn_fatal])))

    # (k) consume-transform-produce: every input record the group committed past
    # is in the output exactly once; none is there twice, none past it.
    sources = Counter(v.split("|", 1)[1] for _, _, v in h.txn_read)
    done = {v for p, o, v in h.final if o < h.ctp_committed.get(p, 0)}
    rest = {v for p, o, v in h.final if o >= h.ctp_committed.get(p, 0)}
    missing = sorted(done - set(sources))
    twice = sorted(v for v, c in sources.items() if c > 1)
    beyond = sorted(set(sources) & rest)
    foreign = sorted(set(sources) - done - rest)
    checks.append(Check(
        "(k) consume-transform-produce: each input record the group committed past is in "
        "the output exactly once, none twice, none past it",
        bool(done) and not missing and not twice and not foreign and not beyond,
        (f"{len(missing)} missing: {_examples(missing)} " if missing else "")
        + (f"{len(twice)} twice: {_examples(twice)} " if twice else "")
        + (f"{len(beyond)} past the committed offsets: {_examples(beyond)} " if beyond
           else "")
        + (f"{len(foreign)} not in the input: {_examples(foreign)}" if foreign else "")
        or f"{len(done)} of {len(done) + len(rest)} input records transformed, each once"))
    return checks


def _by_partition(offsets: dict[int, int]) -> str:
    return ", ".join(f"{p}: {o}" for p, o in sorted(offsets.items())) or "none"


def record_of(m: Any) -> tuple[int, int, str]:
    """A consumed message as (partition, offset, value)."""
    return int(m.partition()), int(m.offset()), bytes(m.value() or b"").decode()


def _observations(h: History) -> Iterable[tuple[int, int, str]]:
    for a in h.acked:
        if a.offset >= 0:
            yield a.partition, a.offset, a.value
    yield from h.tailed
    yield from h.grouped
    yield from h.final


def main(argv: list[str]) -> int:
    """Check a saved history again: ``python -m odradek.testing.chaos_model PATH``."""
    history = load_history(Path(argv[0]))
    failed = 0
    for c in check_history(history):
        failed += not c.ok
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}" + (f": {c.detail}" if c.detail else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
