"""What every subcommand shares: the one-line error, the broker address flag, and
stopping on SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP_SERVER"
"""The environment variable naming the default broker address of every command."""
DEFAULT_BOOTSTRAP = os.environ.get(BOOTSTRAP_ENV) or "127.0.0.1:9092"

# Config resources (DescribeConfigs, IncrementalAlterConfigs), Kafka's numbers.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
DEFAULT_SOURCE = 5
"""DescribeConfigs ``config_source`` of a value nobody set: DEFAULT_CONFIG."""
SET, DELETE = 0, 1
"""IncrementalAlterConfigs operations."""


class CliError(Exception):
    """A failure reported as one line (``odradek: ...``) and exit status 1."""



def stop_processes(procs: Sequence[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """SIGTERM each running process (after a SIGCONT: a stopped one must see it),
    then wait; whichever has not exited ``timeout_s`` after the signals is
    killed. Returns once every one has exited."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.0, deadline - time.monotonic()))
        if p.poll() is None:
            p.kill()
            p.wait()


def stop_on_signals() -> asyncio.Event:
    """An event SIGINT or SIGTERM sets (Ctrl-C and ``kill`` stop a long-running
    command cleanly); call it inside the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
        help=f"a broker to connect to (default: ${BOOTSTRAP_ENV}, else 127.0.0.1:9092; "
             f"now {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config", type=Path, default=None, metavar="FILE",
        help="client security settings (TLS, SASL) in Kafka's client properties format: "
             "security.protocol, ssl.truststore.location, ssl.keystore.location, ...")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
