"""``odradek connect standalone WORKER.properties [CONNECTOR.properties ...]`` and
``odradek connect distributed WORKER.properties``.

A standalone Kafka Connect–compatible worker (:mod:`odradek.connect.runtime`):
worker settings from the first file, one connector per further file (both in
Java properties format, as Kafka's ``connect-standalone.sh`` takes them). It
prints its REST URL and runs until Ctrl-C or SIGTERM, then stops the tasks,
flushes their offsets and exits 0. A missing file, a bad setting, the port
taken or no broker at ``bootstrap.servers`` is one line and exit 1.

A distributed worker (:mod:`odradek.connect.runtime.distributed`) takes only
the worker file: connectors are created through the REST API of any worker
of the cluster (``group.id``). A bad internal topic is one line and exit 1
too; Ctrl-C or SIGTERM stops its tasks, leaves the group and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from odradek.broker.config import read_properties
from odradek.cli.common import CliError, stop_on_signals


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("connect",
                       help="Kafka Connect: run connectors (standalone or distributed workers)")
    modes = p.add_subparsers(dest="mode", required=True)
    s = modes.add_parser("standalone", help="a standalone worker with its REST API")
    s.add_argument("worker", type=Path, metavar="WORKER.properties")
    s.add_argument("connectors", type=Path, nargs="*", metavar="CONNECTOR.properties")
    s.set_defaults(run=run)
    d = modes.add_parser("distributed", help="a worker of a Connect cluster (group.id)")
    d.add_argument("worker", type=Path, metavar="WORKER.properties")
    d.set_defaults(run=run_distributed)


def run(args: argparse.Namespace) -> int:
    from odradek.connect.config import ConfigError
    from odradek.connect.runtime.worker import StandaloneWorker, WorkerError

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    worker_props = read_properties(args.worker)
    connectors = [read_properties(p) for p in args.connectors]
    try:
        worker = StandaloneWorker(worker_props, connectors)
    except ConfigError as e:
        raise CliError(f"{args.worker}: {e}") from None
    except WorkerError as e:
        raise CliError(str(e)) from None

    async def main() -> None:
        try:
            url = await worker.start()
        except (WorkerError, ConfigError) as e:
            raise CliError(str(e)) from None
        print(f"Odradek Connect (standalone) at {url} (Ctrl-C stops it)", flush=True)
        stop = stop_on_signals()
        try:
            await stop.wait()
        finally:
            await worker.stop()

    asyncio.run(main())
    return 0


def run_distributed(args: argparse.Namespace) -> int:
    from odradek.connect.config import ConfigError
    from odradek.connect.runtime.distributed import DistributedWorker
    from odradek.connect.runtime.worker import WorkerError

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("odradek.connect.runtime.distributed").setLevel(logging.INFO)
    props = read_properties(args.worker)
    try:
        worker = DistributedWorker(props)
    except ConfigError as e:
        raise CliError(f"{args.worker}: {e}") from None

    async def main() -> None:
        try:
            url = await worker.start()
        except (WorkerError, ConfigError) as e:
            raise CliError(str(e)) from None
        print(f"Odradek Connect (distributed, group {worker.config.group_id}) at {url} "
              "(Ctrl-C stops it)", flush=True)
        stop = stop_on_signals()
        waits = [asyncio.create_task(stop.wait()), asyncio.create_task(worker.ended.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await worker.stop()
        if worker.error:
            raise CliError(worker.error)

    asyncio.run(main())
    return 0
