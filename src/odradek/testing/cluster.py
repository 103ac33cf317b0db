"""A real Odradek cluster on 127.0.0.1: one ``odradek serve FILE`` process per node.

``from odradek.testing.cluster import LocalCluster, wait_for``: the harness of
the repository's cluster tests (``tests/support/cluster.py`` re-exports it)
and of ``odradek dev chaos`` (:mod:`odradek.testing.chaos`), usable from any
test suite.

Each node gets a ``server.properties`` written with Kafka's own settings
(``process.roles``, ``node.id``, ``controller.quorum.voters``, ``listeners``
with a CONTROLLER listener, ``controller.listener.names``,
``listener.security.protocol.map``), is formatted with ``odradek storage
format -t CLUSTER_ID -c FILE`` and started with ``odradek serve FILE``, exactly
as a user would. Nothing else is imported from odradek: the nodes are black
boxes (the ``odradek`` console script beside this interpreter, see
:func:`serve_command`).

``LocalCluster(tmp, controllers=3)`` is three combined nodes
(``broker,controller``); ``LocalCluster(tmp, controllers=3, brokers=2)`` is
three controller-only nodes (ids 1-3) and two broker-only nodes (ids 4-5).
:meth:`kill` is ``kill -9``; :meth:`pause`/:meth:`resume` are SIGSTOP/SIGCONT;
:meth:`start` restarts a node on its data.

With ``links=True`` every node reaches every voter through its own
:class:`LinkProxy` (node *i*'s ``controller.quorum.voters`` names the proxy of
the link i→j for each voter j), so :meth:`isolate` cuts a node off from the
others in both directions — quorum traffic, forwarding, registrations and
heartbeats — while clients still reach its client listener (Redpanda's
ISOLATE cuts the internal RPC port the same way). :meth:`heal` restores every
link.
Each node's stdout and stderr go to ``node-N.log`` in its directory (shown by
:meth:`logs` when a test fails). ``Node.env`` is extra environment for a node's
process (e.g. a fault-injection knob of :mod:`odradek.common.crashpoints`),
used from its next :meth:`start`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from odradek.testing.secure_cluster import add_scram_arguments, sasl_lines

if TYPE_CHECKING:
    from odradek.testing.certs import DevCerts

T = TypeVar("T")

__all__ = ["LinkProxy", "LocalCluster", "Node", "free_port", "serve_command", "wait_for"]


def serve_command() -> list[str]:
    """``odradek serve`` as installed next to this interpreter.

    The console script beside ``sys.executable`` is what a user runs; a pyenv
    shim on PATH would add a shell and ``pyenv exec`` to every start (and the
    benchmarks would measure pyenv, not the broker). Falls back to
    ``python -m odradek``.
    """
    script = Path(sys.executable).parent / "odradek"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "serve"]
    return [sys.executable, "-m", "odradek", "serve"]


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()
_next_fixed: list[int] = []


@functools.cache
def _fixed_range() -> range | None:
    """This process's slice of the ports below the kernel's ephemeral range.

    A port the kernel picks (``bind(0)``, or the source port of an outgoing
    connection) comes from ``ip_local_port_range``. A node killed and started
    again binds its port anew, and under a parallel test run another process's
    connection could take an ephemeral port in between; ports below that range
    are never handed out by the kernel. Each pytest-xdist worker (``gwN``) takes
    its own slice of 10,000..(low - 1), so two workers never pick the same port.
    None where the range cannot be read or leaves no room (then ``bind(0)``).
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slices = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    if not worker.isdigit() or low - 10_000 < 1_000 * slices:
        return None
    width = (low - 10_000) // slices
    start = 10_000 + int(worker) * width
    return range(start, start + width)


def free_port() -> int:
    """A port free on 127.0.0.1 now, and never one this process handed out before
    (a node's port is only bound when the node starts, so the kernel could give
    it again meanwhile, to a link proxy say). Taken below the ephemeral range
    where there is room (``_fixed_range``), else from the kernel."""
    with _handed_out_lock:
        fixed = _fixed_range()
        if fixed is not None:
            if not _next_fixed:
                # A start that differs from run to run: a port left in TIME_WAIT
                # or held by a previous run's leftover is skipped below anyway.
                _next_fixed.append(fixed.start + (os.getpid() * 7919) % len(fixed))
            for _ in range(len(fixed)):
                candidate = _next_fixed[0]
                _next_fixed[0] = candidate + 1 if candidate + 1 < fixed.stop else fixed.start
                if candidate in _handed_out:
                    continue
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", candidate))
                    except OSError:
                        continue
                _handed_out.add(candidate)
                return candidate
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


@dataclass
class Node:
    node_id: int
    roles: str
    directory: Path
    client_port: int | None
    controller_port: int | None
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    """The metrics and health endpoint's port (``LocalCluster(metrics=True)``)."""

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / f"node-{self.node_id}.log"

    @property
    def address(self) -> str:
        assert self.client_port is not None
        return f"127.0.0.1:{self.client_port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LinkProxy:
    """One directed link: connections accepted here are piped to ``upstream``
    until :meth:`cut`, which closes them and refuses new ones until :meth:`heal`."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        for attempt in range(20):  # a port no node of this process was promised
            try:
                self.listener = socket.create_server(("127.0.0.1", free_port()))
                break
            except OSError:
                if attempt == 19:
                    raise
        self.port: int = self.listener.getsockname()[1]
        self.listener.settimeout(0.1)
        self._cut = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=2)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
            except OSError:
                break
        # shutdown() before close(): the other pump may be blocked in recv() on one
        # of these sockets, and a bare close() would then send no FIN, leaving the
        # far end waiting on a connection that is already gone.
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
            self._sockets.clear()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._stop.set()
        self.cut()
        self.listener.close()


class LocalCluster:
    def __init__(self, tmp: Path, controllers: int = 3, brokers: int = 0,
                 overrides: dict[str, str] | None = None, links: bool = False,
                 tls: bool = False, sasl: bool = False, metrics: bool = False,
                 dynamic: bool = False) -> None:
        """``dynamic``: a KIP-853 quorum: every node gets
        ``controller.quorum.bootstrap.servers`` (every controller's listener)
        instead of ``controller.quorum.voters``; :meth:`format` then takes the
        initial voters (see there), and :meth:`wipe` formats a controller with
        ``--no-initial-controllers``.

        ``metrics``: each node serves its metrics and health endpoint
        (``odradek.metrics.listener``) on a port of its own
        (:attr:`Node.metrics_port`, :meth:`metrics_url`).

        ``tls``: every listener (clients', inter-broker, controllers') is SSL
        with ``ssl.client.auth=required``, certificates from
        :func:`odradek.testing.certs.write_dev_certs` in ``tmp/certs``
        (:attr:`certs`); the client listener is advertised as ``localhost``,
        the name the certificate carries (librdkafka checks DNS names only).

        ``sasl`` (implies ``tls``): every listener is SASL_SSL (client
        certificates not asked for), and ACLs are on (StandardAuthorizer, nothing
        allowed without an ACL). Clients and brokers authenticate with
        SCRAM-SHA-512 on the client listener (:data:`SASL_USERS`, created at
        format with ``--add-scram``; the brokers as ``User:broker``), the
        controllers with PLAIN on theirs (as Kafka, SCRAM is not for controller
        listeners: their credentials live in the log the quorum has yet to
        elect a leader for). ``User:broker`` and ``User:admin`` are super users."""
        self.tmp = tmp
        self.dynamic = dynamic
        self.certs: DevCerts | None = None
        self.sasl = sasl
        tls = tls or sasl
        if tls:
            from odradek.testing.certs import write_dev_certs

            self.certs = write_dev_certs(tmp / "certs")
        combined = brokers == 0
        self.nodes: dict[int, Node] = {}
        for i in range(1, controllers + 1):
            roles = "broker,controller" if combined else "controller"
            self.nodes[i] = Node(i, roles, tmp / f"node{i}",
                                 free_port() if combined else None, free_port())
        for i in range(controllers + 1, controllers + brokers + 1):
            self.nodes[i] = Node(i, "broker", tmp / f"node{i}", free_port(), None)
        if metrics:
            for node in self.nodes.values():
                node.metrics_port = free_port()
        self.links: dict[tuple[int, int], LinkProxy] = {}
        self.data_links: dict[tuple[int, int], LinkProxy] = {}
        """Replication links (follower a → leader b's client listener): a node cut
        off from the others still serves clients, as in a network partition
        between brokers."""
        if links:
            for a in self.nodes.values():
                for b in self.nodes.values():
                    if a is not b and b.controller_port:
                        self.links[(a.node_id, b.node_id)] = LinkProxy(b.controller_port)
                    if a is not b and a.client_port and b.client_port:
                        self.data_links[(a.node_id, b.node_id)] = LinkProxy(b.client_port)

        def voters_for(node: Node) -> str:
            def port(v: Node) -> int | None:
                link = self.links.get((node.node_id, v.node_id))
                return link.port if link is not None else v.controller_port
            return ",".join(f"{v.node_id}@127.0.0.1:{port(v)}"
                            for v in self.nodes.values() if v.controller_port)

        self.overrides = {
            "controller.quorum.election.timeout.ms": "1000",
            "controller.quorum.fetch.timeout.ms": "2000",
            # a consumer group forms at once, as with odradek.testing.Broker
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            listeners = []
            client = "SASL_SSL" if sasl else "SSL" if self.certs else "PLAINTEXT"
            if node.client_port:
                listeners.append(f"{client}://127.0.0.1:{node.client_port}")
            if node.controller_port:
                listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
            security = client
            tls_lines = [] if self.certs is None else [
                *(f"{k}={v}" for k, v in self.certs.broker_properties(
                    client_auth="none" if sasl else "required").items() if k != "listeners"),
                *([f"advertised.listeners={client}://localhost:{node.client_port}"]
                  if node.client_port else []),
                f"inter.broker.listener.name={client}",
                *(sasl_lines() if sasl else [])]
            bootstrap = ",".join(f"127.0.0.1:{v.controller_port}"
                                 for v in self.nodes.values() if v.controller_port)
            lines = [
                f"process.roles={node.roles}", f"node.id={node.node_id}",
                f"controller.quorum.bootstrap.servers={bootstrap}" if dynamic
                else f"controller.quorum.voters={voters_for(node)}",
                f"listeners={','.join(listeners)}",
                "controller.listener.names=CONTROLLER",
                f"listener.security.protocol.map={client}:{client},CONTROLLER:{security}",
                *tls_lines,
                f"log.dirs={node.directory / 'data'}",
                *(["odradek.inter.broker.address.overrides=" + ",".join(
                    f"{b}=127.0.0.1:{link.port}" for (a, b), link in self.data_links.items()
                    if a == node.node_id)] if self.data_links else []),
                *([f"odradek.metrics.listener=127.0.0.1:{node.metrics_port}"]
                  if node.metrics_port else []),
                *(f"{k}={v}" for k, v in self.overrides.items()),
            ]
            node.properties.write_text("\n".join(lines) + "\n")

    # -- life cycle -------------------------------------------------------------------

    def format(self, initial: list[int] | None = None,
               features: Sequence[str] = ()) -> str:
        """Format every node with a new cluster id. A dynamic cluster: ``initial``
        are the first voters (one: ``--standalone``; more: ``--initial-controllers``
        with new directory ids); the other controllers ``--no-initial-controllers``.
        ``features``: ``NAME=LEVEL`` values, each given to every node as
        ``--feature`` (the levels the bootstrap metadata names)."""
        odradek = [*serve_command()[:-1]]

        def new_id() -> str:
            return subprocess.run([*odradek, "storage", "random-uuid"], check=True,
                                  capture_output=True, text=True).stdout.strip()

        cluster_id = new_id()
        scram = add_scram_arguments()
        initial = initial or []
        ids = {n: new_id() for n in initial}
        controllers = ",".join(f"{n}@127.0.0.1:{self.nodes[n].controller_port}:{ids[n]}"
                               for n in initial)
        for node in self.nodes.values():
            extra: list[str] = []
            if self.dynamic and node.controller_port:
                extra = (["--no-initial-controllers"] if node.node_id not in initial
                         else ["--standalone"] if len(initial) == 1
                         else ["--initial-controllers", controllers])
            subprocess.run([*odradek, "storage", "format", "-t", cluster_id, "-c",
                            str(node.properties), *(scram if self.sasl else []), *extra,
                            *(arg for f in features for arg in ("--feature", f))],
                           check=True, capture_output=True)
        self.cluster_id = cluster_id
        return cluster_id

    def start(self, node_id: int | None = None) -> None:
        for node in ([self.nodes[node_id]] if node_id is not None else self.nodes.values()):
            log = open(node.log_path, "ab")  # noqa: SIM115 (the process owns it)
            node.proc = subprocess.Popen(
                [*serve_command(), str(node.properties), "--log-level", "INFO"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **node.env})
            log.close()

    def kill(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(10)

    def terminate(self, node_id: int, timeout_s: float = 20.0) -> int | None:
        node = self.nodes[node_id]
        if node.proc is None:
            return None
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGTERM)
            try:
                return node.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(10)
        return node.proc.returncode

    def stop_all(self, *, clean: bool) -> None:
        """Every node at once: SIGTERM (``clean``) or SIGKILL, and wait for them."""
        procs = [n.proc for n in self.nodes.values()
                 if n.proc is not None and n.proc.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM if clean else signal.SIGKILL)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def wipe(self, node_id: int) -> None:
        """Delete a stopped node's data directory and format it again with the
        cluster's id, as an operator does for a replaced disk."""
        import shutil

        node = self.nodes[node_id]
        assert not node.alive, "stop the node before wiping it"
        shutil.rmtree(node.directory / "data", ignore_errors=True)
        odradek = serve_command()[:-1]
        extra = ["--no-initial-controllers"] if self.dynamic and node.controller_port else []
        subprocess.run([*odradek, "storage", "format", "-t", self.cluster_id, "-c",
                        str(node.properties), *extra], check=True, capture_output=True)

    def pause(self, node_id: int) -> None:
        proc = self.nodes[node_id].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        proc = self.nodes[node_id].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)

    def isolate(self, node_id: int) -> None:
        """Cut every quorum link to and from ``node_id`` (needs ``links=True``)."""
        assert self.links, "LocalCluster(..., links=True) to cut links"
        for (a, b), link in [*self.links.items(), *self.data_links.items()]:
            if node_id in (a, b):
                link.cut()

    def heal(self) -> None:
        for link in [*self.links.values(), *self.data_links.values()]:
            link.heal()

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is None:
                with contextlib.suppress(OSError):
                    node.proc.send_signal(signal.SIGCONT)  # a paused node must see SIGTERM
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for node in self.nodes.values():
            if node.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.proc.wait(max(0.1, deadline - time.monotonic()))
                if node.proc.poll() is None:
                    node.proc.kill()
                    node.proc.wait(10)
        for link in [*self.links.values(), *self.data_links.values()]:
            link.close()

    # -- views ------------------------------------------------------------------------

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if "broker" in n.roles]

    @property
    def bootstrap(self) -> str:
        """The brokers' client listeners (``localhost:PORT`` with ``tls``)."""
        host = "localhost" if self.certs is not None else "127.0.0.1"
        return ",".join(f"{host}:{n.client_port}" for n in self.brokers)

    def metrics_url(self, node_id: int, path: str = "/metrics") -> str:
        """``http://127.0.0.1:PORT/metrics`` (or ``path``) of a node started with
        ``LocalCluster(metrics=True)``."""
        port = self.nodes[node_id].metrics_port
        assert port is not None, "LocalCluster(..., metrics=True) for metrics endpoints"
        return f"http://127.0.0.1:{port}{path}"

    def logs(self) -> str:
        out = []
        for node in self.nodes.values():
            text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
            out.append(f"--- node {node.node_id} ---\n" + "\n".join(text.splitlines()[-40:]))
        return "\n".join(out)


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float,
             interval_s: float = 0.1) -> T:
    """Poll ``check()`` until it returns a truthy value (returned), or raise
    AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the cluster may be between states
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))
