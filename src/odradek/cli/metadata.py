"""``odradek metadata dump DIR``: the metadata log offline (Kafka's kafka-metadata-shell).

``DIR`` is a ``__cluster_metadata-0`` directory: a cluster node's Raft log
(its newest valid ``.checkpoint`` snapshot, then the ``.log`` after it) or a
single node's metadata journal (its ``.log`` segments). Read only: nothing is
truncated or repaired.

* default: one line per record — its offset (``snapshot`` for a record of the
  snapshot), its type and its fields as JSON;
* ``--image``: the records replayed, as the image a broker would serve:
  brokers (fenced or not, endpoints, rack), topics with each partition's
  leader, replicas and epochs, configs, client quotas and the producer-id mark;
* ``--json``: one JSON document instead of text.

A batch that cannot be read ends the dump with a ``problem`` line (where, and
why); the exit status is still 0, as ``dump-log``'s. A directory that does not
exist or holds no log is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any

from odradek.cli.common import CliError
from odradek.cli.output import emit_json


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    meta = sub.add_parser("metadata", help="read the cluster metadata log offline")
    verbs = meta.add_subparsers(dest="verb", required=True)
    dump = verbs.add_parser("dump", help="print the records or the image of a metadata log")
    dump.add_argument("directory", type=Path, help="a __cluster_metadata-0 directory")
    dump.add_argument("--image", action="store_true", help="print the image, not the records")
    dump.add_argument("--json", action="store_true", help="print JSON instead of text")
    dump.set_defaults(run=run)


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        import base64

        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def read_records(directory: Path) -> tuple[list[tuple[str, Any]], list[str]]:
    """((offset or "snapshot", record), problems) of a metadata log directory."""
    from odradek.broker.control.journal import decode_record
    from odradek.raft.codec import decode_entries
    from odradek.raft.file_log import SNAPSHOT_SUFFIX, decode_snapshot
    from odradek.wire.primitives import DecodeError
    from odradek.wire.records import decode_batch

    if not directory.is_dir():
        raise CliError(f"{directory}: no such directory")
    logs = sorted(directory.glob("*.log"))
    snapshots = sorted(directory.glob(f"*{SNAPSHOT_SUFFIX}"), reverse=True)
    if not logs and not snapshots:
        raise CliError(f"{directory}: no metadata log here (no .log or .checkpoint file)")
    out: list[tuple[str, Any]] = []
    problems: list[str] = []
    start = 0
    for snap in snapshots:
        try:
            payload = decode_snapshot(snap.read_bytes())
            entries = decode_entries(payload)
        except (ValueError, DecodeError) as exc:
            problems.append(f"{snap.name}: damaged ({exc}); an older snapshot is used if any")
            continue
        out.extend(("snapshot", decode_record(v)) for e in entries for v in e.records)
        start = int(snap.name.split("-")[0])
        break
    for path in logs:
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            try:
                header, records = decode_batch(data, pos)
            except DecodeError as exc:
                problems.append(f"{path.name} at byte {pos}: {exc}; the rest is not read")
                break
            pos += header.size
            if header.is_control or header.base_offset < start:
                continue
            for r in records:
                if r.value is not None:
                    try:
                        out.append((str(r.offset), decode_record(r.value)))
                    except DecodeError as exc:
                        problems.append(f"{path.name} offset {r.offset}: {exc}")
    return out, problems


def _image_view(records: list[tuple[str, Any]]) -> dict[str, Any]:
    from odradek.metadata.image import MetadataImage

    image = MetadataImage()
    for _, record in records:
        image.replay(record)
    return {
        "brokers": [{"id": b.node_id, "epoch": b.epoch, "fenced": b.fenced, "rack": b.rack,
                     "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in b.endpoints]}
                    for b in sorted(image.brokers.values(), key=lambda b: b.node_id)],
        "topics": [{"name": t.name, "id": _plain(t.topic_id), "configs": t.configs,
                    "partitions": [{"partition": p.partition, "leader": p.leader,
                                    "replicas": p.replicas, "isr": p.isr,
                                    "leader_epoch": p.leader_epoch,
                                    "partition_epoch": p.partition_epoch}
                                   for p in sorted(t.partitions.values(),
                                                   key=lambda p: p.partition)]}
                   for t in sorted(image.topics.values(), key=lambda t: t.name)],
        "broker_configs": image.broker_configs,
        "client_quotas": [{"entity": dict(e), "values": v} for e, v in image.client_quotas.items()],
        "next_producer_id": image.next_producer_id,
    }


def run(args: argparse.Namespace) -> int:
    records, problems = read_records(args.directory)
    if args.image:
        view = _image_view(records)
        if args.json:
            emit_json({**view, "problems": problems})
            return 0
        for b in view["brokers"]:
            state = "fenced" if b["fenced"] else "live"
            print(f"broker {b['id']} epoch {b['epoch']} {state} {' '.join(b['endpoints'])}"
                  + (f" rack {b['rack']}" if b["rack"] else ""))
        for t in view["topics"]:
            print(f"topic {t['name']} id {t['id']} partitions {len(t['partitions'])}"
                  + (f" configs {json.dumps(t['configs'])}" if t["configs"] else ""))
            for p in t["partitions"]:
                print(f"  {t['name']}-{p['partition']} leader {p['leader']} replicas "
                      f"{p['replicas']} isr {p['isr']} leader_epoch {p['leader_epoch']}")
        print(f"next producer id {view['next_producer_id']}")
    elif args.json:
        emit_json({"records": [{"offset": o, "type": type(r).__name__, "fields": _plain(r)}
                               for o, r in records], "problems": problems})
        return 0
    else:
        for offset, record in records:
            print(f"{offset:>9} {type(record).__name__} {json.dumps(_plain(record))}")
    for problem in problems:
        print(f"problem: {problem}")
    return 0
