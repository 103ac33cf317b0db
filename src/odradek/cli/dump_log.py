"""``odradek dump-log FILE...``: read segment files offline (``kafka-dump-log.sh``).

By suffix (formats in :mod:`odradek.storage.segment` and :mod:`odradek.storage.index`):

* ``.log``: one line per batch — base and last offset, record count, byte
  position and size, CRC check, compression, timestamp type and max
  timestamp, producer id/epoch/sequence, transactional and control flags,
  leader epoch; ``--records`` adds each record (offset, timestamp, key, value,
  headers; bytes that are not UTF-8 are escaped). A batch that is torn
  (shorter than its length says) or corrupt (bad magic or CRC) is reported as
  a problem with its byte position; if a valid batch follows the damage
  (:func:`odradek.storage.damage.next_valid_in`), the damaged range is
  reported and reading goes on from there, else reading stops, as recovery
  would cut the log there. A batch whose base offset does not follow the
  previous batch is reported too. Offsets missing between batches (or between
  the file's base offset and its first batch, or, with ``--records``, inside a
  batch) are listed as gaps: an INFO line, not a problem, since compaction
  leaves exactly that (and ``"gaps"`` in ``--json``: first and last missing
  offset, the byte position of the batch after the gap or holding it, and
  whether it is inside that batch). With ``--records`` a record with a null
  value is marked as a tombstone (``tombstone: true``; ``"tombstone"`` in
  ``--json``).
* ``.index``: entries (offset -> position); problems: entries not strictly
  increasing, and, when the ``.log`` beside it can be read, an entry that does
  not point at the start of the batch whose last offset it names.
* ``.timeindex``: entries (timestamp -> offset); problems: timestamps not
  increasing or offsets decreasing.
* ``.txnindex``: aborted transactions (producer id, first offset, marker
  offset, last stable offset); problems: a torn tail, markers not increasing.
* ``.snapshot``: a producer snapshot's entries; problem: it does not check out.

With ``--records`` a transaction marker shows as ``endTxnMarker: COMMIT`` (or
ABORT) with its coordinator epoch, as in Kafka's tool.

A trailing partial entry in an index is a problem too. ``--json`` prints one
document: a list with, per file, its entries or batches and its problems. The
exit status is 0 when every file was read, whatever problems were found (as
Kafka's tool), and 1 with one line on stderr when a file cannot be read.
"""

from __future__ import annotations

import argparse
import os
import struct
from typing import Any

from odradek.cli.common import CliError
from odradek.cli.consume import text
from odradek.cli.output import emit_json
from odradek.storage.damage import next_valid_in
from odradek.storage.names import parse_segment_file_name
from odradek.storage.txnfiles import (
    ENTRY_SIZE,
    SNAPSHOT_SUFFIX,
    SnapshotError,
    parse_entries,
    parse_snapshot,
)
from odradek.wire.batch import LOG_OVERHEAD, validate_batch
from odradek.wire.compression import CODEC_NAMES
from odradek.wire.primitives import DecodeError
from odradek.wire.records import Record, control_record_type, decode_batch

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("dump-log", help="print segment, index and time index files (offline)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--records", action="store_true", help="print every record of each batch")
    p.add_argument("--max-batches", type=int, help="stop each .log after this many batches")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    results = [dump_file(path, args.records, args.max_batches) for path in args.files]
    if args.json:
        emit_json(results)
        return 0
    for result in results:
        print_text(result)
    return 0


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc


def _base_offset(path: str) -> tuple[int, str]:
    parsed = parse_segment_file_name(os.path.basename(path))
    if parsed is None:
        raise CliError(f"{path}: not a segment file (want <20 digits>.log, .index, "
                       f".timeindex, .txnindex or .snapshot)")
    return parsed


def dump_file(path: str, records: bool, max_batches: int | None) -> dict[str, Any]:
    if path.endswith(SNAPSHOT_SUFFIX):
        return {"file": path, "kind": "snapshot", **dump_snapshot(_read(path))}
    base, suffix = _base_offset(path)
    data = _read(path)
    if suffix == ".txnindex":
        return {"file": path, "kind": "txnindex", **dump_txn_index(data)}
    if suffix == ".log":
        return {"file": path, "kind": "log",
                **dump_segment(data, records, max_batches, base_offset=base)}
    if suffix == ".index":
        log_path = path[: -len(".index")] + ".log"
        log = _read(log_path) if os.path.exists(log_path) else None
        return {"file": path, "kind": "index", **dump_offset_index(data, base, log)}
    if suffix == ".timeindex":
        return {"file": path, "kind": "timeindex", **dump_time_index(data, base)}
    raise CliError(f"{path}: cannot dump {suffix} files")


def dump_segment(data: bytes, with_records: bool, max_batches: int | None,
                 base_offset: int = 0) -> dict[str, Any]:
    """Batches, problems and offset gaps of a ``.log`` file whose name says
    ``base_offset``."""
    batches: list[dict[str, Any]] = []
    problems: list[str] = []
    gaps: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data) and (max_batches is None or len(batches) < max_batches):
        if pos + LOG_OVERHEAD > len(data):
            problems.append(f"torn batch at position {pos}: {len(data) - pos} trailing bytes")
            break
        try:
            h = validate_batch(data, pos)
        except DecodeError as exc:
            kind = "torn" if "beyond the input" in str(exc) else "corrupt"
            after = next_valid_in(data, pos + 1,
                                  batches[-1]["last_offset"] + 1 if batches else 0)
            if after is None:
                problems.append(f"{kind} batch at position {pos}: {exc}")
                break
            problems.append(f"damaged bytes at positions {pos}..{after - 1} ({exc}); "
                            f"valid batches resume at position {after}")
            pos = after
            continue
        batch: dict[str, Any] = {
            "base_offset": h.base_offset, "last_offset": h.last_offset,
            "count": h.records_count, "position": pos, "size": h.size, "crc_valid": True,
            "magic": h.magic, "compression": CODEC_NAMES.get(h.compression, str(h.compression)),
            "timestamp_type": "LogAppendTime" if h.log_append_time else "CreateTime",
            "max_timestamp": h.max_timestamp, "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence,
            "transactional": h.is_transactional, "control": h.is_control,
            "partition_leader_epoch": h.partition_leader_epoch,
        }
        expected = batches[-1]["last_offset"] + 1 if batches else base_offset
        if h.base_offset > expected:
            gaps.append(_gap(expected, h.base_offset - 1, pos, inside=False))
        if with_records:
            try:
                _, recs = decode_batch(data, pos)
                batch["records"] = [
                    _control(r) if h.is_control else
                    {"offset": r.offset, "timestamp": r.timestamp, "key": text(r.key),
                     "value": text(r.value), "headers": {k: text(v) for k, v in r.headers},
                     "tombstone": r.value is None}
                    for r in recs
                ]
                gaps += _gaps_inside(h.base_offset, h.last_offset, [r.offset for r in recs],
                                     pos)
            except DecodeError as exc:
                problems.append(f"batch at position {pos}: records do not decode: {exc}")
        if batches and h.base_offset <= batches[-1]["last_offset"]:
            problems.append(f"batch at position {pos}: base offset {h.base_offset} does not "
                            f"follow the previous batch's last offset {batches[-1]['last_offset']}")
        batches.append(batch)
        pos += h.size
    return {"batches": batches, "gaps": gaps, "problems": problems}


def _gap(first: int, last: int, position: int, *, inside: bool) -> dict[str, Any]:
    return {"first_offset": first, "last_offset": last, "position": position,
            "inside_batch": inside}


def _gaps_inside(base: int, last: int, offsets: list[int], position: int,
                 ) -> list[dict[str, Any]]:
    """The offsets of ``base..last`` that no record of the batch holds, as ranges
    (a cleaned batch keeps its base offset and lastOffsetDelta)."""
    out = []
    expected = base
    for offset in [*offsets, last + 1]:
        if offset > expected:
            out.append(_gap(expected, offset - 1, position, inside=True))
        expected = max(expected, offset + 1)
    return out


def _gap_line(g: dict[str, Any]) -> str:
    span = (f"offset {g['first_offset']}" if g["first_offset"] == g["last_offset"]
            else f"offsets {g['first_offset']}..{g['last_offset']}")
    where = ("inside the batch" if g["inside_batch"] else "before the batch")
    return (f"INFO: gap: {span} absent {where} at position {g['position']} "
            f"(records removed, as compaction does)")


def _control(r: Record) -> dict[str, Any]:
    """A control record as Kafka's DumpLogSegments shows it (endTxnMarker)."""
    out: dict[str, Any] = {"offset": r.offset, "timestamp": r.timestamp}
    try:
        kind = control_record_type(r)
    except DecodeError:
        return {**out, "control": "unreadable"}
    out["end_txn_marker"] = {0: "ABORT", 1: "COMMIT"}.get(kind, f"type {kind}")
    if r.value is not None and len(r.value) >= 6:
        out["coordinator_epoch"] = struct.unpack_from(">hi", r.value)[1]
    return out


def dump_txn_index(data: bytes) -> dict[str, Any]:
    entries = parse_entries(data)
    problems = []
    if len(entries) * ENTRY_SIZE != len(data):
        problems.append(f"{len(data) - len(entries) * ENTRY_SIZE} bytes after the last "
                        f"readable entry")
    last = -1
    for e in entries:
        if e.last_offset <= last:
            problems.append(f"entry for marker {e.last_offset} does not follow {last}")
        last = e.last_offset
    return {"entries": [e._asdict() for e in entries], "problems": problems}


def dump_snapshot(data: bytes) -> dict[str, Any]:
    try:
        entries = parse_snapshot(data)
    except SnapshotError as exc:
        return {"entries": [], "problems": [str(exc)]}
    return {"entries": [e._asdict() for e in entries], "problems": []}


def _batch_starts(log: bytes) -> dict[int, int]:
    """position -> last offset of each readable batch of ``log``."""
    out = {}
    pos = 0
    while pos < len(log):
        try:
            h = validate_batch(log, pos)
        except DecodeError:
            break
        out[pos] = h.last_offset
        pos += h.size
    return out


def dump_offset_index(data: bytes, base: int, log: bytes | None) -> dict[str, Any]:
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    problems = [] if usable == len(data) else [
        f"{len(data) - usable} trailing bytes are not a whole entry"]
    entries = []
    starts = _batch_starts(log) if log is not None else None
    previous = (-1, -1)
    for i in range(0, usable, _OFFSET_ENTRY.size):
        relative, position = _OFFSET_ENTRY.unpack_from(data, i)
        offset = base + relative
        entries.append({"offset": offset, "position": position})
        if relative <= previous[0] or position <= previous[1]:
            problems.append(f"entry {i // 8} (offset {offset}) does not increase")
        previous = (relative, position)
        if starts is not None and starts.get(position) != offset:
            problems.append(
                f"entry {i // 8}: no batch ending at offset {offset} starts at position {position}"
            )
    return {"entries": entries, "problems": problems}


def dump_time_index(data: bytes, base: int) -> dict[str, Any]:
    usable = len(data) - len(data) % _TIME_ENTRY.size
    problems = [] if usable == len(data) else [
        f"{len(data) - usable} trailing bytes are not a whole entry"]
    entries = []
    last_ts, last_offset = -1, -1
    for i in range(0, usable, _TIME_ENTRY.size):
        ts, relative = _TIME_ENTRY.unpack_from(data, i)
        offset = base + relative
        entries.append({"timestamp": ts, "offset": offset})
        if ts <= last_ts or offset < last_offset:
            problems.append(f"entry {i // 12} (timestamp {ts}, offset {offset}) goes backwards")
        last_ts, last_offset = ts, offset
    return {"entries": entries, "problems": problems}


def print_text(result: dict[str, Any]) -> None:
    print(f"Dumping {result['file']}")
    if result["kind"] == "log":
        gaps: dict[tuple[int, bool], list[dict[str, Any]]] = {}
        for g in result["gaps"]:
            gaps.setdefault((g["position"], g["inside_batch"]), []).append(g)
        for b in result["batches"]:
            for g in gaps.get((b["position"], False), []):
                print(_gap_line(g))
            print(
                f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} "
                f"count: {b['count']} position: {b['position']} size: {b['size']} "
                f"crcValid: {str(b['crc_valid']).lower()} magic: {b['magic']} "
                f"compression: {b['compression']} {b['timestamp_type']}: {b['max_timestamp']} "
                f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
                f"baseSequence: {b['base_sequence']} isTransactional: "
                f"{str(b['transactional']).lower()} isControl: {str(b['control']).lower()} "
                f"partitionLeaderEpoch: {b['partition_leader_epoch']}"
            )
            for r in b.get("records", []):
                if "end_txn_marker" in r:
                    print(f"| offset: {r['offset']} endTxnMarker: {r['end_txn_marker']} "
                          f"coordinatorEpoch: {r.get('coordinator_epoch', -1)}")
                    continue
                if "key" not in r:
                    print(f"| offset: {r['offset']} control record: {r.get('control')}")
                    continue
                headers = ",".join(f"{k}={v}" for k, v in r["headers"].items())
                value = "null tombstone: true" if r["tombstone"] else r["value"]
                print(f"| offset: {r['offset']} timestamp: {r['timestamp']} key: {r['key']} "
                      f"value: {value} headers: {headers}")
            for g in gaps.get((b["position"], True), []):
                print(_gap_line(g))
    elif result["kind"] == "index":
        for e in result["entries"]:
            print(f"offset: {e['offset']} position: {e['position']}")
    elif result["kind"] in ("txnindex", "snapshot"):
        for e in result["entries"]:
            print(" ".join(f"{_camel(k)}: {v}" for k, v in e.items()))
    else:
        for e in result["entries"]:
            print(f"timestamp: {e['timestamp']} offset: {e['offset']}")
    for problem in result["problems"]:
        print(f"PROBLEM: {problem}")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)
