"""Seeded mutation fuzzing of the record decoders; not part of the pytest run.

    python -m tools.fuzz.records --cases 100000 [--seed 1] [--only CASE]

Each case picks one valid input (a v2 batch per codec, a control batch, a
legacy magic 0/1 message set, or a bare compressed blob), applies one to four
random mutations and decodes the result. A case passes when the decoder
returns or raises ``DecodeError``; any other exception, or a case slower than
``--max-case-ms``, is a failure, printed with the seed and case number
(``--seed S --only N`` replays it alone, with the traceback).

Mutations: flip a byte, insert bytes, delete a span, truncate, write an
extreme int32 or varint somewhere, splice in a piece of another input. For
half of the v2 cases the mutation hits the decompressed records section and
the batch is re-sealed (records section recompressed, batchLength and CRC
recomputed), so the record parser rather than the CRC has to catch it.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from odradek.wire import compression
from odradek.wire.batch import (
    BATCH_HEADER_SIZE,
    compute_crc,
    encode_batch_header,
    read_batch_header,
)
from odradek.wire.legacy import decode_legacy_message_set
from odradek.wire.primitives import DecodeError, write_varint
from odradek.wire.records import (
    CONTROL_COMMIT,
    Record,
    build_batch,
    control_record,
    decode_batch,
    decode_batches,
)

LIMIT = 1 << 20  # max decompressed bytes per case
EXTREMES = [0, 1, -1, -2, 127, 128, 2**31 - 1, -(2**31), 2**63 - 1, 2**15]


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    kind: str  # "v2", "legacy" or "blob:<codec>"


def _records(n: int, base: int = 0) -> list[Record]:
    return [
        Record(
            offset=base + i,
            timestamp=1_700_000_000_000 + 3 * i,
            key=None if i % 3 == 0 else b"k%d" % i,
            value=None if i % 5 == 4 else b"value-" * (i % 4),
            headers=(("h", b"1"), ("n", None)) if i % 2 else (),
        )
        for i in range(n)
    ]


def _legacy(offset: int, magic: int, value: bytes | None, attributes: int = 0) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", 5) if magic else b"")
    body += struct.pack(">i", 1) + b"k"
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def seeds() -> list[Seed]:
    out = [
        Seed(f"v2-codec{codec}", build_batch(_records(6), compression=codec), "v2")
        for codec in range(5)
    ]
    marker = control_record(CONTROL_COMMIT, offset=9, timestamp=1)
    control = build_batch(
        [marker], base_offset=9, producer_id=4, producer_epoch=0, transactional=True, control=True
    )
    out.append(Seed("v2-control", control, "v2"))
    appended = build_batch(_records(3, 50), base_offset=50, log_append_time=True)
    out.append(Seed("v2-logappend", appended, "v2"))
    for magic in (0, 1):
        plain = b"".join(_legacy(i, magic, b"v%d" % i) for i in range(3))
        out.append(Seed(f"legacy-v{magic}", plain + _legacy(3, magic, None), "legacy"))
        for codec in (1, 2, 3):
            wrapped = _legacy(2, magic, compression.compress(codec, plain), attributes=codec)
            out.append(Seed(f"legacy-v{magic}-codec{codec}", wrapped, "legacy"))
    for codec in (1, 2, 3, 4):
        blob = compression.compress(codec, b"".join(s.data for s in out[:3]))
        out.append(Seed(f"blob-codec{codec}", blob, f"blob:{codec}"))
    return out


def mutate(data: bytes, rng: random.Random, donors: list[Seed]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(out))
        op = rng.randrange(6)
        if op == 0 and at < len(out):
            out[at] ^= rng.randint(1, 255)
        elif op == 1:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 2:
            del out[at : at + rng.randint(1, 16)]
        elif op == 3:
            del out[at:]
        elif op == 4:
            value = rng.choice(EXTREMES)
            if rng.random() < 0.5:
                out[at : at + 4] = struct.pack(">i", max(-(2**31), min(2**31 - 1, value)))
            else:
                varint = bytearray()
                write_varint(varint, max(-(2**31), min(2**31 - 1, value)))
                out[at : at + len(varint)] = varint
        else:
            donor = rng.choice(donors).data
            start = rng.randint(0, len(donor))
            out[at:at] = donor[start : start + rng.randint(1, 32)]
    return bytes(out)


def reseal(batch: bytes, rng: random.Random, donors: list[Seed]) -> bytes:
    """Mutate the decompressed records section of a v2 batch, then fix length and CRC."""
    header = read_batch_header(batch)
    body = batch[BATCH_HEADER_SIZE:]
    if header.compression:
        body = compression.decompress(header.compression, body, LIMIT)
    body = mutate(body, rng, donors)
    if header.compression:
        body = compression.compress(header.compression, body)
    header = replace(header, batch_length=49 + len(body), crc=0)
    if rng.random() < 0.2:
        header = replace(header, records_count=rng.choice([0, 1, 2, 7, 2**31 - 1]))
    raw = encode_batch_header(header) + body
    return encode_batch_header(replace(header, crc=compute_crc(raw, 0, len(raw)))) + body


def run_case(seed: int, case: int, inputs: list[Seed]) -> tuple[str, Callable[[], object]]:
    rng = random.Random(seed * 1_000_003 + case)
    chosen = rng.choice(inputs)
    if chosen.kind == "v2" and rng.random() < 0.5:
        data = reseal(chosen.data, rng, inputs)
    else:
        data = mutate(chosen.data, rng, inputs)
    if chosen.kind == "v2":
        return chosen.name, lambda: decode_batches(data, LIMIT) if case % 2 else decode_batch(data)
    if chosen.kind == "legacy":
        partial = bool(case % 2)
        return chosen.name, lambda: decode_legacy_message_set(data, LIMIT, allow_partial_tail=partial)  # noqa: E501
    codec = int(chosen.kind.split(":")[1])
    return chosen.name, lambda: compression.decompress(codec, data, LIMIT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.fuzz.records", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", type=int, default=None, help="replay one case verbosely")
    parser.add_argument("--max-case-ms", type=float, default=1000.0)
    args = parser.parse_args(argv)
    inputs = seeds()
    cases = [args.only] if args.only is not None else range(args.cases)
    outcomes: dict[str, int] = {"decoded": 0, "DecodeError": 0}
    failures: list[str] = []
    slowest = (0.0, -1)
    started = time.perf_counter()
    for case in cases:
        name, decode = run_case(args.seed, case, inputs)
        t0 = time.perf_counter()
        try:
            decode()
            outcomes["decoded"] += 1
        except DecodeError:
            outcomes["DecodeError"] += 1
        except Exception as exc:  # anything else is the bug being hunted
            failures.append(f"case {case} ({name}): {type(exc).__name__}: {exc}")
            if args.only is not None:
                traceback.print_exc()
        elapsed_ms = (time.perf_counter() - t0) * 1000
        slowest = max(slowest, (elapsed_ms, case))
        if elapsed_ms > args.max_case_ms:
            failures.append(f"case {case} ({name}): took {elapsed_ms:.0f} ms")
    total = time.perf_counter() - started
    count = len(cases)
    print(f"seed {args.seed}: {count} cases in {total:.1f} s, {count / total:,.0f} cases/s")
    print(f"outcomes: {outcomes}; slowest case {slowest[1]} at {slowest[0]:.1f} ms")
    print(f"failures: {len(failures)}")
    for line in failures[:20]:
        print("  " + line)
    if failures:
        print(f"replay one with: python {sys.argv[0]} --seed {args.seed} --only CASE")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
