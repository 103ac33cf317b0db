"""The JSON files of ``odradek reassign`` (Kafka's ``kafka-reassign-partitions.sh``)
and the pure decisions on them: parsing and checking a plan, the throttle lists
of a move, a generated proposal.

A *plan* (``--reassignment-json-file``) is Kafka's::

    {"version": 1,
     "partitions": [{"topic": "foo", "partition": 0, "replicas": [3, 1],
                     "log_dirs": ["any", "any"]}]}

``log_dirs`` is optional; when given it has one entry per replica, and only
``"any"`` is accepted (moving a replica between a broker's log directories is
AlterReplicaLogDirs, which this tool does not drive). The *topics to move*
file (``--topics-to-move-json-file``) is ``{"topics": [{"topic": "foo"}],
"version": 1}``. Output plans are written the same way, compact, one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.cli.common import CliError

Assignment = dict[tuple[str, int], list[int]]
"""(topic, partition) -> replicas, in plan order."""


@dataclass(frozen=True, slots=True)
class Throttles:
    """What ``--throttle`` sets for a set of moves (Kafka's computation): per topic,
    the leader list (every current replica of a moving partition, any of which may
    lead) and the follower list (the replicas the move adds); the brokers whose
    rates are set (every current and target replica)."""

    leader: dict[str, str]
    follower: dict[str, str]
    brokers: list[int]


def _load(path: Path, what: str) -> object:
    try:
        text = path.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} {path} is not valid JSON: {exc.msg} at line {exc.lineno} "
                       f"column {exc.colno}") from None


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_plan(path: Path) -> Assignment:
    """The moves of a reassignment plan file, checked as Kafka checks them."""
    doc = _load(path, "reassignment plan")
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CliError(f'reassignment plan {path}: expected {{"version":1,"partitions":[...]}}')
    if not entries:
        raise CliError("Partition reassignment list cannot be empty")
    plan: Assignment = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str) or not _int(
                entry.get("partition")) or not isinstance(entry.get("replicas"), list) or not all(
                _int(r) for r in entry["replicas"]):
            raise CliError(f"reassignment plan {path}: each partition needs \"topic\" (a string), "
                           f"\"partition\" (a number) and \"replicas\" (broker ids), got "
                           f"{json.dumps(entry)}")
        key = (entry["topic"], entry["partition"])
        name = f"{key[0]}-{key[1]}"
        replicas: list[int] = entry["replicas"]
        if key in plan:
            raise CliError(f"Partition reassignment contains duplicate topic partitions: {name}")
        if not replicas:
            raise CliError(f"Partition replica list cannot be empty: {name}")
        if len(set(replicas)) != len(replicas):
            raise CliError(f"Partition replica lists may not contain duplicate entries: {name} "
                           f"has {replicas}")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise CliError(f"Partition {name}: log_dirs must list one directory per replica")
            if any(d != "any" for d in dirs):
                raise CliError(f"Partition {name}: moving replicas between log directories is "
                               f'not supported here; use "any" in log_dirs')
        plan[key] = replicas
    return plan


def parse_topics(path: Path) -> list[str]:
    """The topic names of a ``--topics-to-move-json-file``."""
    doc = _load(path, "topics-to-move file")
    topics = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(topics, list) or not topics or not all(
            isinstance(t, dict) and isinstance(t.get("topic"), str) for t in topics):
        raise CliError(f'topics-to-move file {path}: expected {{"topics":[{{"topic":"NAME"}}],'
                       f'"version":1}} with at least one topic')
    names = [t["topic"] for t in topics]
    if len(set(names)) != len(names):
        raise CliError(f"topics-to-move file {path} lists a topic twice")
    return names


def plan_json(assignment: Assignment) -> str:
    """Kafka's plan format, one line, partitions in (topic, partition) order."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def throttles(current: Assignment, target: Assignment) -> Throttles:
    """The ``--throttle`` configs for moving ``current`` to ``target`` (the
    partitions whose replicas change)."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for key, replicas in sorted(target.items()):
        now = current.get(key, [])
        if set(now) == set(replicas):
            continue
        topic, index = key
        leader.setdefault(topic, []).extend(f"{index}:{b}" for b in now)
        follower.setdefault(topic, []).extend(f"{index}:{b}" for b in replicas if b not in now)
        brokers |= set(now) | set(replicas)
    return Throttles({t: ",".join(v) for t, v in leader.items()},
                     {t: ",".join(v) for t, v in follower.items() if v}, sorted(brokers))


def propose(current: Assignment, brokers: Iterable[int]) -> Assignment:
    """A proposal that spreads every partition of ``current`` over ``brokers``,
    keeping each replication factor: round robin, the first replica of
    partition p on the (p mod n)th broker and the others after it, each
    topic's start shifted by one (Kafka's tool starts at a random broker;
    this one is deterministic)."""
    ids = sorted(set(brokers))
    out: Assignment = {}
    for shift, topic in enumerate(sorted({t for t, _ in current})):
        for (t, p), replicas in sorted(current.items()):
            if t != topic:
                continue
            if len(replicas) > len(ids):
                raise CliError(f"Replication factor: {len(replicas)} larger than available "
                               f"brokers: {len(ids)}.")
            start = (p + shift) % len(ids)
            out[(t, p)] = [ids[(start + j) % len(ids)] for j in range(len(replicas))]
    return out
