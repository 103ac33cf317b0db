"""``odradek serve --processes N``: N broker processes on this host, one cluster.

One Odradek process serves requests on one event loop, so it uses about one
core for them. This supervisor starts N ``odradek serve`` processes that
together form one KRaft cluster (layout: :mod:`odradek.cli.processes_layout`):
each client listener port P of the configuration becomes P..P+N-1, Metadata
lists all N brokers, and Kafka's own routing spreads the partitions' leaders
over them, so clients need no change (docs/cluster.md, docs/decisions.md).

What it does, in order:

1. Checks the configuration and N, then that every port of the plan can be
   bound now (one line naming the port and its use otherwise).
2. Refuses data a single ``odradek serve`` wrote (``meta.properties``
   directly in the first ``log.dirs`` directory: the processes keep theirs in
   ``process-<i>`` subdirectories), and reads ``processes.properties`` there
   (``processes=N``, written at the first start, updated when N grows): a
   restart may keep N or grow it from 3 on, never shrink it
   (:func:`~odradek.cli.processes_layout.check_growth`).
3. Formats each process's directories not formatted yet, as ``odradek
   storage format`` would, with the cluster id the formatted ones carry (a
   new one on the first start).
4. Starts the processes (``odradek serve [FILE] --override ...``, the user's
   settings first, the layout's after), each in its own process group and
   stopped by the kernel if this supervisor dies (``PR_SET_PDEATHSIG``), their
   output on this process's stderr, each line prefixed ``[node ID]``.
5. Once every process serves and answers Metadata with all N brokers (on a
   PLAINTEXT first listener; the supervisor holds no client credentials),
   prints one line per process (``process I: node ID, pid PID, ADDRESS``) and
   ``odradek: serving on ADDR,ADDR,... (N processes, one cluster)``.

A process that exits before it serves stops the others, and the supervisor
exits 1 with one line (the process's own ``odradek: ...`` error when it gave
one). A process that dies later is reported on stderr and started again after
a back-off (1 s, doubling up to 30 s; back to 1 s once it has served a
minute); five restarts in a row that end before serving stop everything
(exit 1). SIGTERM or SIGINT is forwarded as SIGTERM to every process (each a
controlled shutdown); the supervisor waits for them (those not gone after
30 s are killed) and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.cluster_config import effective_protocol_map
from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.control.meta_properties import (
    META_PROPERTIES,
    random_uuid,
    read_meta_properties,
)
from odradek.cli.common import CliError, stop_processes
from odradek.cli.processes_layout import STATE_FILE, ProcessPlan, check_growth, plan

SERVING = "odradek: serving on "
"""The line ``odradek serve`` prints on stdout once it accepts clients."""

STOP_TIMEOUT_S = 30.0
BACKOFF_S, BACKOFF_MAX_S, HEALTHY_S = 1.0, 30.0, 60.0
MAX_FAILED_RESTARTS = 5

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """What the child runs before exec so that it gets SIGTERM when the
    supervisor dies, however it dies (Linux's ``PR_SET_PDEATHSIG``); None
    where there is no ``prctl``. ``prctl`` is looked up here, in the parent:
    the child of a process with threads should only make plain calls."""
    try:
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the supervisor died before the line above
            os._exit(1)
    return in_child


@dataclass
class Child:
    """One broker process and what the supervisor knows of it."""

    plan: ProcessPlan
    command: list[str]
    proc: subprocess.Popen[bytes] | None = None
    address: str = ""
    serving: threading.Event = field(default_factory=threading.Event)
    eof: threading.Event = field(default_factory=threading.Event)
    """Set when the reader has seen the end of the current process's output."""
    announced: bool = False
    last_error: str = ""
    started_at: float = 0.0
    failed_restarts: int = 0
    backoff_s: float = BACKOFF_S
    restart_at: float | None = None

    def start(self) -> None:
        """Spawn it (from the main thread: PR_SET_PDEATHSIG is tied to the
        thread that forked) and a thread that forwards its output."""
        # new events: the previous process's reader may still be finishing
        self.serving, self.eof = threading.Event(), threading.Event()
        self.announced = False
        self.last_error = ""
        self.started_at = time.monotonic()
        self.restart_at = None
        self.proc = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, preexec_fn=_die_with_parent(),
            # its own process group: a Ctrl-C on the terminal reaches the
            # supervisor only, which stops the processes in order
            process_group=0)
        threading.Thread(target=self._forward, args=(self.proc, self.serving, self.eof),
                         daemon=True).start()

    def _forward(self, proc: subprocess.Popen[bytes], serving: threading.Event,
                 eof: threading.Event) -> None:
        assert proc.stdout is not None
        prefix = f"[node {self.plan.node_id}] "
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith(SERVING):
                self.address = line[len(SERVING):].strip()
                serving.set()
                continue
            if line.startswith("odradek: "):
                self.last_error = line[len("odradek: "):]
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(prefix + line + "\n")
                sys.stderr.flush()
        proc.stdout.close()
        eof.set()

    def exit_text(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        if code is None:
            return "running"
        how = (f"killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with status {code}")
        return f"{how}: {self.last_error}" if self.last_error else how

    def describe(self) -> str:
        return f"process {self.plan.index} (node {self.plan.node_id})"


def _serve_command(args: argparse.Namespace, user_overrides: dict[str, str],
                   p: ProcessPlan) -> list[str]:
    cmd = [sys.executable, "-m", "odradek", "serve"]
    if args.properties is not None:
        cmd.append(str(args.properties))
    cmd += ["--log-level", args.log_level]
    for key, value in {**user_overrides, **p.overrides}.items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


def _check_ports(config: BrokerConfig, plans: list[ProcessPlan]) -> None:
    """Every port of the plan free now, or one line naming the first taken."""
    hosts = [lis.host for lis in config.listeners()]
    for p in plans:
        wanted = [(h, port, f"listener port of process {p.index}")
                  for h, port in zip(hosts, p.client_ports, strict=True)]
        if p.controller:
            quorum = p.overrides["listeners"].rsplit(":", 1)[1]
            wanted.append(("127.0.0.1", int(quorum), f"controller port of process {p.index}"))
        for host, port, what in wanted:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio binds
                try:
                    s.bind((host or "", port))
                except OSError as exc:
                    raise CliError(f"--processes {len(plans)}: port {port} ({what}) is not "
                                   f"free: {exc.strerror}") from None


def _prepare_dirs(args: argparse.Namespace, config: BrokerConfig,
                  user_overrides: dict[str, str], plans: list[ProcessPlan]) -> None:
    """Refuse a single broker's data, check N against the last start, format
    what is not formatted yet, and record N."""
    base = config.log_dir
    if (base / META_PROPERTIES).exists():
        raise CliError(f"{base} holds the data of a single `odradek serve` ({META_PROPERTIES}); "
                       f"--processes keeps each process's data in {base}/process-<i>: give it "
                       f"other log.dirs")
    state = base / STATE_FILE
    if state.exists():
        text = state.read_text(encoding="utf-8")
        previous = next((int(v) for k, _, v in (line.partition("=") for line in
                                                 text.splitlines())
                         if k.strip() == "processes" and v.strip().isdigit()), None)
        if previous is None:
            raise CliError(f"{state}: expected processes=N")
        check_growth(previous, len(plans))
    cluster_id = None
    todo = []
    for p in plans:
        meta = _metadata_dir(p) / META_PROPERTIES
        if meta.exists():
            cluster_id = cluster_id or read_meta_properties(meta).get("cluster.id")
        else:
            todo.append(p)
    cluster_id = cluster_id or random_uuid()
    for p in todo:
        overrides = [f"{k}={v}" for k, v in {**user_overrides, **p.overrides}.items()]
        ns = _format_args(args.properties or Path(os.devnull), overrides, cluster_id)
        with contextlib.redirect_stdout(io.StringIO()):
            ns.run(ns)
    base.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(f"# written by odradek serve --processes\nprocesses={len(plans)}\n",
                   encoding="utf-8")
    tmp.replace(state)


def _format_args(config: Path, overrides: list[str], cluster_id: str) -> argparse.Namespace:
    """``odradek storage format -t ID -c CONFIG --ignore-formatted --override
    ...`` parsed by that command's own parser, so every option it has gets its
    default (and its ``run``)."""
    from odradek.cli import storage

    parser = argparse.ArgumentParser(prog="odradek")
    storage.register(parser.add_subparsers(dest="command", required=True))
    argv = ["storage", "format", "-t", cluster_id, "-c", str(config), "--ignore-formatted"]
    for item in overrides:
        argv += ["--override", item]
    return parser.parse_args(argv)


def _metadata_dir(p: ProcessPlan) -> Path:
    meta = p.overrides.get("metadata.log.dir")
    return Path(meta) if meta else p.log_dirs[0]


def _stop_all(children: list[Child]) -> None:
    stop_processes([c.proc for c in children if c.proc is not None], STOP_TIMEOUT_S)


def _say(text: str) -> None:
    print(f"odradek: {text}", file=sys.stderr, flush=True)


def supervise(args: argparse.Namespace, config: BrokerConfig,
              user_overrides: dict[str, str]) -> int:
    """Run N processes until SIGTERM/SIGINT (module docstring); the exit status."""
    try:
        plans = plan(config, args.processes)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    _check_ports(config, plans)  # before anything is written
    _prepare_dirs(args, config, user_overrides, plans)
    children = [Child(p, _serve_command(args, user_overrides, p)) for p in plans]
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for child in children:
            child.start()
        failed = _wait_serving(children, stop) or _wait_listed(config, children, stop)
        if failed is not None:
            raise CliError(f"{failed.describe()} did not start: {failed.exit_text()}")
        if stop.is_set():
            return 0
        for child in children:
            assert child.proc is not None
            child.announced = True
            print(f"process {child.plan.index}: node {child.plan.node_id}, pid "
                  f"{child.proc.pid}, {child.address}", flush=True)
        print(f"{SERVING}{','.join(c.address for c in children)} "
              f"({len(children)} processes, one cluster)", flush=True)
        return _watch(children, stop)
    finally:
        _stop_all(children)


def _wait_serving(children: list[Child], stop: threading.Event) -> Child | None:
    """Until every child serves (None), or one exits first (that one), or a
    signal asks to stop (None)."""
    while not stop.is_set():
        for child in children:
            assert child.proc is not None
            if child.proc.poll() is not None and not child.serving.is_set():
                child.eof.wait(2.0)  # its last line read: the error it gave, if any
                return child
        if all(c.serving.is_set() for c in children):
            return None
        stop.wait(0.05)
    return None


def _brokers_listed(address: str) -> int:
    """How many brokers a Metadata answer of ``address`` lists (0 if none came)."""
    import asyncio

    from odradek.client.connection import Connection
    from odradek.wire.messages.metadata_request import MetadataRequest

    async def ask() -> int:
        conn = await Connection.open(address, "odradek-supervisor", timeout_s=1.0)
        try:
            answer = await asyncio.wait_for(conn.request(MetadataRequest(topics=[]), 12), 2.0)
            return len(answer.brokers)
        finally:
            await conn.close()

    try:
        return asyncio.run(ask())
    except Exception:  # not up yet, or refused: asked again
        return 0


def _wait_listed(config: BrokerConfig, children: list[Child],
                 stop: threading.Event) -> Child | None:
    """Until every process's Metadata lists all N brokers (each registered and
    unfenced, so a topic created now is spread over all of them), or one
    exits (that one), or a signal asks to stop. Only on a PLAINTEXT first
    listener (the supervisor holds no client credentials); otherwise at once."""
    first = config.listeners()[0].name
    if effective_protocol_map(config).get(first, "PLAINTEXT") != "PLAINTEXT":
        return None
    pending = list(children)
    while pending and not stop.is_set():
        for child in children:
            assert child.proc is not None
            if child.proc.poll() is not None:
                child.eof.wait(2.0)
                return child
        if _brokers_listed(pending[0].address.split(",")[0]) >= len(children):
            pending.pop(0)
            continue
        stop.wait(0.1)
    return None


def _watch(children: list[Child], stop: threading.Event) -> int:
    """Report and restart children that die, until a signal (0) or a child
    that keeps failing to come back (1)."""
    while not stop.wait(0.2):
        now = time.monotonic()
        for child in children:
            assert child.proc is not None
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.start()
                continue
            if child.proc.poll() is None:
                if child.serving.is_set():
                    child.failed_restarts = 0
                    if not child.announced:
                        child.announced = True
                        print(f"process {child.plan.index}: node {child.plan.node_id}, pid "
                              f"{child.proc.pid}, {child.address} (started again)", flush=True)
                    if now - child.started_at > HEALTHY_S:
                        child.backoff_s = BACKOFF_S
                continue
            child.eof.wait(2.0)
            if not child.serving.is_set():
                child.failed_restarts += 1
                if child.failed_restarts >= MAX_FAILED_RESTARTS:
                    _say(f"{child.describe()} failed {MAX_FAILED_RESTARTS} restarts in a row "
                         f"({child.exit_text()}); stopping every process")
                    return 1
            _say(f"{child.describe()}, pid {child.proc.pid}, {child.exit_text()}; "
                 f"starting it again in {child.backoff_s:g} s")
            child.restart_at = now + child.backoff_s
            child.backoff_s = min(child.backoff_s * 2, BACKOFF_MAX_S)
    return 0
