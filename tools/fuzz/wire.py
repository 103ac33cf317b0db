"""Seeded fuzzing of the request path; not part of the pytest run.

    python -m tools.fuzz.wire --cases 100000 [--seed 1] [--only CASE]

The corpus is two valid requests for every version of every API key Kafka's
specs define, each with every field of its version filled (tagged fields
included) from the seed. A case is either random bytes (fully
random, or a valid header start followed by random bytes) or a corpus request
with one to four mutations: flip a bit, overwrite a byte with an extreme value,
truncate, delete a span, repeat a span up to 500 times, insert random bytes, splice in a span of
another request, write an inflated int16/int32/varint length somewhere, or
swap the header's API key or version for a neighbouring one (so the body is
read with the wrong schema). One case in twenty goes through a
``ServerConnection`` with a (possibly lying) size prefix and random chunking.

A case passes when ``frames.parse_request`` returns a ``Request`` or a
``BadRequest`` (or the connection raises ``FrameError``). Any other exception,
a case slower than ``--max-case-ms`` (a SIGALRM timer interrupts hangs), or a
sampled case (tracemalloc on one in ``--trace-every``) whose peak allocation
exceeds ``ALLOC_PER_INPUT_BYTE`` times its size plus ``ALLOC_SLACK`` fails.
Failures print the seed, the case and its bytes; ``--seed S --only N``
replays one case with its traceback.
"""

from __future__ import annotations

import argparse
import random
import resource
import signal
import struct
import sys
import time
import traceback
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from odradek.wire import api
from odradek.wire.codec import decoder_for
from odradek.wire.frames import (
    SCRATCH_BYTES,
    BadRequest,
    FrameError,
    RawToken,
    Request,
    ServerConnection,
    encode_request,
    parse_request,
)
from odradek.wire.messages.api_table import APIS
from odradek.wire.messages.request_header import RequestHeader
from odradek.wire.schema import FieldDef, Struct, in_range

# Peak tracemalloc bytes a parse may reach: decoded objects grow with the input
# (an array of 2-byte struct elements becomes ~55 bytes of objects per input
# byte at worst), plus a fixed slack. Codecs are compiled before measuring.
ALLOC_PER_INPUT_BYTE = 128
ALLOC_SLACK = 16 * 1024
# A connection may allocate its scratch buffer and one frame up to its limit.
CONNECTION_MAX_FRAME_BYTES = 128 * 1024
CONNECTION_ALLOC = SCRATCH_BYTES + CONNECTION_MAX_FRAME_BYTES + ALLOC_SLACK

INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
LENGTHS_16 = [0x7FFF, -2, -(2**15), 0x4000, 1, 0]
LENGTHS_32 = [0x7FFFFFFF, -2, -(2**31), 0x10000000, 0x7FFF, 1]
BIG_VARINTS = [
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x08",
    b"\xff\xff\xff\x7f",
    b"\xff\xff\x03",
    b"\xff" * 11,
    b"\x80\x80\x80\x80\x80\x01",
]
TEXT = "abcxyz-._é€😀"


class CaseTimeout(Exception):
    """Raised by the SIGALRM handler when a case runs past its bound."""


@dataclass(frozen=True)
class Seed:
    api_key: int
    version: int
    frame: bytes  # without its size prefix


def _scalar(f: FieldDef, rng: random.Random) -> Any:
    kind = f.kind
    if kind in INT_BOUNDS:
        lo, hi = INT_BOUNDS[kind]
        return rng.choice([lo, hi, 0, 1, max(lo, -1), rng.randint(lo, hi)])
    if kind == "float64":
        return rng.choice([0.0, -1.5, 1e300, rng.random()])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        return "".join(rng.choice(TEXT) for _ in range(rng.randint(0, 12)))
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 40))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(kind)


def fill(cls: type[Struct], version: int, rng: random.Random, depth: int = 0) -> Any:
    """An instance of ``cls`` with every field of ``version`` set, valid for it."""
    values: dict[str, Any] = {}
    for f in cls.FIELDS:
        if not in_range(version, f.versions):
            continue
        if in_range(version, f.nullable) and rng.random() < 0.15:
            values[f.name] = None
            continue

        def one(f: FieldDef = f) -> Any:
            if f.kind == "struct":
                assert f.struct is not None
                return fill(f.struct, version, rng, depth + 1)
            return _scalar(f, rng)

        if f.array:
            values[f.name] = [one() for _ in range(rng.randint(0, 3 if depth < 3 else 1))]
        else:
            values[f.name] = one()
    return cls(**values)


def corpus(seed: int, per_version: int = 2) -> list[Seed]:
    """``per_version`` filled requests for every version of every API key."""
    rng = random.Random(seed)
    out: list[Seed] = []
    for key in sorted(APIS):
        cls = api.request_class(key)
        lo, hi = api.spec_versions(key)
        for version in range(lo, hi + 1):
            for _ in range(per_version):
                body = fill(cls, version, rng)
                client_id = rng.choice([None, "", "fuzz-client"])
                frame = encode_request(key, version, rng.getrandbits(31), body, client_id)
                out.append(Seed(key, version, frame[4:]))
    return out


def mutate(data: bytes, rng: random.Random, donors: list[Seed]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(out))
        op = rng.randrange(10)
        if op == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1 and at < len(out):
            out[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:
            del out[at:]
        elif op == 3:
            del out[at : at + rng.randint(1, 16)]
        elif op == 4:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 5:
            donor = rng.choice(donors).frame
            start = rng.randint(0, len(donor))
            out[at:at] = donor[start : start + rng.randint(1, 48)]
        elif op == 6:
            choice = rng.randrange(3)
            if choice == 0:
                raw = struct.pack(">h", rng.choice(LENGTHS_16))
            elif choice == 1:
                raw = struct.pack(">i", rng.choice(LENGTHS_32))
            else:
                raw = rng.choice(BIG_VARINTS)
            out[at : at + len(raw)] = raw
        elif op == 7:
            span = bytes(out[at : at + rng.randint(1, 32)])
            out[at:at] = span * rng.choice([1, 2, 3, 64, 500])
        elif op == 8 and len(out) >= 4:
            lo, hi = api.spec_versions(struct.unpack_from(">h", out, 0)[0]) if api.is_known(
                struct.unpack_from(">h", out, 0)[0]
            ) else (0, 3)
            struct.pack_into(">h", out, 2, rng.randint(lo - 1, hi + 1))
        elif op == 9 and len(out) >= 2:
            struct.pack_into(">h", out, 0, rng.choice(sorted(APIS)))
    return bytes(out)


def random_input(rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        return rng.randbytes(rng.randint(0, 64))
    key = rng.choice(sorted(APIS))
    lo, hi = api.spec_versions(key)
    version = rng.randint(lo, hi)
    header = struct.pack(">hhi", key, version, rng.getrandbits(31))
    if api.request_header_version(key, version) >= 1:
        header += struct.pack(">h", 4) + b"fuzz"
    if api.request_header_version(key, version) == 2:
        header += b"\x00"
    return header + rng.randbytes(rng.randint(0, 200))


def classify(event: Request | BadRequest | RawToken | None) -> str:
    if isinstance(event, Request):
        return "request"
    if isinstance(event, BadRequest):
        return event.reason
    raise TypeError(f"parse returned {event!r}")


def through_connection(frame: bytes, rng: random.Random) -> str:
    size = len(frame)
    if rng.random() < 0.3:
        size = rng.choice([size + 1, size - 1, 2**31 - 1, -1, 0, rng.randint(0, 2 * size + 8)])
    stream = struct.pack(">i", size) + frame
    conn = ServerConnection(max_frame_bytes=CONNECTION_MAX_FRAME_BYTES)
    pos = 0
    try:
        while pos < len(stream):
            buf = conn.get_buffer(-1)
            n = min(len(buf), rng.randint(1, 64), len(stream) - pos)
            if n <= 0:
                raise AssertionError("get_buffer returned an empty buffer")
            buf[:n] = stream[pos : pos + n]
            conn.buffer_updated(n)
            pos += n
    except FrameError:
        return "FrameError"
    outcomes = []
    while (event := conn.next_event()) is not None:
        outcomes.append(classify(event))
    return outcomes[0] if outcomes else "incomplete"


def make_case(seed: int, case: int, inputs: list[Seed]) -> tuple[str, bytes, Callable[[], str]]:
    rng = random.Random(seed * 1_000_003 + case)
    if rng.random() < 0.1:
        data = random_input(rng)
        origin = "random"
    else:
        chosen = rng.choice(inputs)
        data = mutate(chosen.frame, rng, inputs)
        origin = f"key {chosen.api_key} v{chosen.version}"
    if rng.random() < 0.05:
        return origin + " via connection", data, lambda: through_connection(data, rng)
    return origin, data, lambda: classify(parse_request(data))


def warm_up() -> None:
    """Compile every request decoder now, so tracemalloc sees parsing, not compiling."""
    for key in APIS:
        lo, hi = api.spec_versions(key)
        for version in range(lo, hi + 1):
            decoder_for(api.request_class(key), version)
    for header_version in (0, 1, 2):
        decoder_for(RequestHeader, header_version)


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout("case ran past its time bound")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.fuzz.wire", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", type=int, default=None, help="replay one case verbosely")
    parser.add_argument("--max-case-ms", type=float, default=1000.0)
    parser.add_argument("--trace-every", type=int, default=50, help="tracemalloc sampling")
    args = parser.parse_args(argv)
    inputs = corpus(args.seed)
    warm_up()
    cases = [args.only] if args.only is not None else range(args.cases)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    slowest = (0.0, -1)
    peak_max = (0, -1, 0)  # bytes, case, input size
    ratio_max = (0.0, -1, 0)  # peak bytes per input byte (inputs of 1 KiB+), case, input size
    traced = 0
    signal.signal(signal.SIGALRM, _alarm)
    bound_s = args.max_case_ms / 1000
    started = time.perf_counter()
    for case in cases:
        origin, data, run = make_case(args.seed, case, inputs)
        trace = case % args.trace_every == 0 or args.only is not None
        if trace:
            tracemalloc.start()
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, bound_s * 2)
        try:
            outcomes[run()] += 1
        except Exception as exc:  # anything else is the bug being hunted
            failures.append(
                f"case {case} ({origin}): {type(exc).__name__}: {exc}\n"
                f"    input ({len(data)} bytes): {data[:512].hex()}"
            )
            if args.only is not None:
                traceback.print_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed_ms = (time.perf_counter() - t0) * 1000
        if trace:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            traced += 1
            via_connection = origin.endswith("via connection")
            if via_connection:
                bound = CONNECTION_ALLOC
            else:
                bound = ALLOC_PER_INPUT_BYTE * len(data) + ALLOC_SLACK
                peak_max = max(peak_max, (peak, case, len(data)))
                if len(data) >= 1024:
                    ratio_max = max(ratio_max, (peak / len(data), case, len(data)))
            if peak > bound:
                failures.append(f"case {case} ({origin}): peak {peak} B for {len(data)} B input")
        slowest = max(slowest, (elapsed_ms, case))
        if elapsed_ms > args.max_case_ms:
            failures.append(f"case {case} ({origin}): took {elapsed_ms:.0f} ms")
    total = time.perf_counter() - started
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    count = len(cases)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"seed {args.seed}: {count} cases from {len(inputs)} corpus requests "
          f"in {total:.1f} s, {count / total:,.0f} cases/s")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print(f"slowest case {slowest[1]} at {slowest[0]:.2f} ms")
    print(f"tracemalloc on {traced} cases: max parse peak {peak_max[0] / 1024:.1f} KiB "
          f"(case {peak_max[1]}, {peak_max[2]} B input); max RSS {rss_mib:.0f} MiB")
    print(f"max parse peak per input byte (inputs of 1 KiB+): {ratio_max[0]:.1f} "
          f"(case {ratio_max[1]}, {ratio_max[2]} B input); "
          f"bound {ALLOC_PER_INPUT_BYTE}/B + {ALLOC_SLACK // 1024} KiB")
    print(f"failures: {len(failures)}")
    for line in failures[:20]:
        print("  " + line)
    if failures:
        print(f"replay one with: python {sys.argv[0]} --seed {args.seed} --only CASE")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
