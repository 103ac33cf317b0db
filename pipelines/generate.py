"""Event generators for the pipelines: page views and service logs.

    python pipelines/generate.py pageviews --rate 500 --speedup 10
    python pipelines/generate.py logs --rate 500 --duration 60

Event time starts now and runs ``--speedup`` times faster than the wall clock,
so 1-minute windows close in seconds during a demo; a few events arrive up to
``--late-ms`` late, as real traffic does. ``--seed`` makes a run repeatable.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator

PAGES = ["/", "/pricing", "/docs", "/blog", "/signup", "/login", "/docs/quickstart",
         "/careers"]
PAGE_WEIGHTS = [30, 8, 20, 10, 5, 15, 10, 2]
SERVICES = ["api", "auth", "billing", "search", "web"]
LEVELS = ["INFO", "WARN", "ERROR"]


def pageviews(rng: random.Random, ts: int) -> dict[str, object]:
    return {"ts": ts, "page": rng.choices(PAGES, PAGE_WEIGHTS)[0],
            "user": f"u{rng.randrange(1000)}"}


def log_line(rng: random.Random, ts: int) -> dict[str, object]:
    """Mostly healthy services; each simulated 5 minutes one service has a
    2-minute incident with a 30% error rate."""
    service = rng.choice(SERVICES)
    minute = ts // 60_000
    incident = SERVICES[(minute // 5) % len(SERVICES)] if minute % 5 < 2 else None
    p_error = 0.3 if service == incident else 0.01
    level = "ERROR" if rng.random() < p_error else rng.choices(["INFO", "WARN"], [9, 1])[0]
    return {"ts": ts, "service": service, "level": level,
            "message": f"{service} request {rng.randrange(10**6)} {level.lower()}"}


def events(kind: str, rng: random.Random, start_ms: int, speedup: float,
           late_ms: int) -> Iterator[dict[str, object]]:
    """Endless events stamped with simulated time (wall clock x speedup)."""
    make = pageviews if kind == "pageviews" else log_line
    t0 = time.monotonic()
    while True:
        now = start_ms + int((time.monotonic() - t0) * 1000 * speedup)
        late = rng.randrange(late_ms) if late_ms and rng.random() < 0.05 else 0
        yield make(rng, now - late)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=["pageviews", "logs"])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--topic", help="default: pageviews or logs")
    p.add_argument("--rate", type=float, default=200, help="events per second")
    p.add_argument("--duration", type=float, default=0, help="seconds (0: until Ctrl-C)")
    p.add_argument("--speedup", type=float, default=1.0, help="event time per wall time")
    p.add_argument("--late-ms", type=int, default=5000)
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    from confluent_kafka import Producer

    topic = args.topic or args.kind
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    rng = random.Random(args.seed)
    source = events(args.kind, rng, int(time.time() * 1000), args.speedup, args.late_ms)
    key = "page" if args.kind == "pageviews" else "service"
    started = time.monotonic()
    sent = 0
    try:
        while not args.duration or time.monotonic() - started < args.duration:
            event = next(source)
            producer.produce(topic, key=str(event[key]).encode(), value=json.dumps(event).encode())
            sent += 1
            producer.poll(0)
            ahead = sent / args.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    except KeyboardInterrupt:
        pass
    finally:
        producer.flush(10)
    print(f"generate: {sent} {args.kind} events to {topic}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
