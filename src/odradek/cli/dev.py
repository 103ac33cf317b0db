"""``odradek dev cluster``: a local KRaft cluster in one command, for development;
``odradek dev chaos``: the chaos harness (:mod:`odradek.testing.chaos`).

``odradek dev cluster --nodes 3`` writes one ``server.properties`` per node
(combined ``broker,controller`` roles, Kafka's settings; topics and the internal
topics replicated 3 times with ``min.insync.replicas`` 2 when there are 3 nodes
or more) under ``--dir``
(default ``./odradek-dev-cluster``), formats the nodes with one new cluster id
unless they are formatted already, starts one ``odradek serve FILE`` process
per node, prints the bootstrap string, and on Ctrl-C (or SIGTERM, or
``quit``) stops them all. Node *i* listens on ``--base-port + 2(i-1)`` for
clients and the next port for the controller quorum, and serves its metrics and
health endpoint (``odradek.metrics.listener``, docs/operations.md) on
``--base-port + 2N + (i-1)``, N the number of nodes: the ports right after the
cluster's others, printed at start. Each node's output goes
to ``node-i.log`` in its directory. Running it again on the same directory
restarts the same cluster with its data: the ``server.properties`` written on
the first run are kept as they are (edit them freely), and ``--override
KEY=VALUE`` settings are given to every node at each start, as ``odradek
serve`` takes them.

It is a failover playground: a node that exits is reported (with its status)
and the others keep running; commands typed on its console act on one node:
``kill N`` (``kill -9``), ``stop N`` (SIGTERM, a controlled shutdown),
``start N``, ``restart N``, ``pause N`` / ``resume N`` (SIGSTOP / SIGCONT),
``status`` and ``quit``.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

from odradek.cli.common import CliError, stop_processes
from odradek.testing.secure_cluster import add_scram_arguments


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    dev = sub.add_parser("dev", help="development helpers")
    verbs = dev.add_subparsers(dest="verb", required=True)
    cluster = verbs.add_parser("cluster", help="run a local cluster of N nodes until Ctrl-C")
    cluster.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    cluster.add_argument("--dir", type=Path, default=Path("odradek-dev-cluster"),
                         help="where the nodes keep their data (default ./odradek-dev-cluster)")
    cluster.add_argument("--base-port", type=int, default=19092,
                         help="first client port; node i uses BASE+2(i-1) and the next one "
                              "for the quorum (default 19092)")
    cluster.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                         help="a setting for every node (repeatable), as `odradek serve` "
                              "takes it")
    cluster.add_argument("--secure", action="store_true",
                         help="SASL_SSL on every listener and ACLs on (development "
                              "certificates and users; see docs/security.md)")
    cluster.set_defaults(run=run)
    chaos = verbs.add_parser(
        "chaos", help="a Jepsen-like run: faults against a 3-node cluster under load, "
                      "then the history checked")
    chaos.add_argument("--seed", type=int, default=None,
                       help="fixes the fault schedule (default: a random one, printed)")
    chaos.add_argument("--rounds", type=int, default=5,
                       help="faults of each kind (default 5)")
    chaos.add_argument("--faults", default="kill,controller,pause,isolate,slowdisk",
                       help="comma-separated kinds among kill, controller, pause, isolate, "
                            "slowdisk (the default), and the restarts restart, restart9, "
                            "rolling, ctlbroker, wipe")
    chaos.add_argument("--dir", type=Path, default=None,
                       help="an empty or new directory for the nodes' data and logs "
                            "(default: a new temporary directory, kept)")
    chaos.add_argument("--max-in-flight", type=int, default=5, metavar="N",
                       help="the producers' max.in.flight.requests.per.connection (default 5, "
                            "librdkafka's; 1 keeps librdkafka from bumping its epoch on a "
                            "pipelined request's OUT_OF_ORDER answer)")
    chaos.set_defaults(run=run_chaos)
    from odradek.cli import dev_certs

    dev_certs.register(verbs)


def _odradek() -> list[str]:
    return [sys.executable, "-m", "odradek"]


def write_configs(base: Path, nodes: int, base_port: int, secure: bool = False
                  ) -> list[Path]:
    """One ``server.properties`` per node (kept when it exists). ``secure``:
    SASL_SSL listeners and ACLs (:mod:`odradek.testing.secure_cluster`), with
    development certificates in ``base/certs`` and the admin's client
    properties in ``base/admin.properties``."""
    voters = ",".join(f"{i}@127.0.0.1:{base_port + 2 * (i - 1) + 1}"
                      for i in range(1, nodes + 1))
    security = _secure_files(base) if secure else None
    files = []
    rf = min(3, nodes)
    min_isr = 2 if rf == 3 else 1
    for i in range(1, nodes + 1):
        client, quorum = base_port + 2 * (i - 1), base_port + 2 * (i - 1) + 1
        node_dir = base / f"node{i}"
        node_dir.mkdir(parents=True, exist_ok=True)
        path = node_dir / "server.properties"
        files.append(path)
        if path.exists():
            continue  # written on an earlier run: the operator's now
        listener = "SASL_SSL" if secure else "PLAINTEXT"
        path.write_text("\n".join([
            "# written by odradek dev cluster",
            "process.roles=broker,controller", f"node.id={i}",
            f"controller.quorum.voters={voters}",
            f"listeners={listener}://127.0.0.1:{client},CONTROLLER://127.0.0.1:{quorum}",
            "controller.listener.names=CONTROLLER",
            f"listener.security.protocol.map={listener}:{listener},CONTROLLER:{listener}",
            f"{METRICS_KEY}=127.0.0.1:{metrics_port(base_port, nodes, i)}",
            *([f"advertised.listeners=SASL_SSL://localhost:{client}",
               "inter.broker.listener.name=SASL_SSL", *security] if security else []),
            f"log.dirs={(node_dir / 'data').resolve()}",
            # Replicated as Kafka's production defaults (3, min ISR 2) where the
            # cluster is big enough.
            f"default.replication.factor={rf}", f"min.insync.replicas={min_isr}",
            f"offsets.topic.replication.factor={rf}",
            f"transaction.state.log.replication.factor={rf}",
            f"transaction.state.log.min.isr={min_isr}",
        ]) + "\n", encoding="utf-8")
    return files


def _secure_files(base: Path) -> list[str]:
    """Certificates (written once) and the admin's client properties; the
    nodes' TLS, SASL and ACL lines."""
    from odradek.testing.certs import DevCerts, write_dev_certs
    from odradek.testing.secure_cluster import admin_properties, sasl_lines

    certs_dir = (base / "certs").resolve()
    certs = (DevCerts(certs_dir) if (certs_dir / "ca.pem").exists()
             else write_dev_certs(certs_dir))
    admin = base / "admin.properties"
    if not admin.exists():
        admin.write_text("".join(f"{k}={v}\n" for k, v in admin_properties(certs.ca).items()),
                         encoding="utf-8")
        admin.chmod(0o600)
    tls = [f"{k}={v}" for k, v in certs.broker_properties(client_auth="none").items()
           if k != "listeners"]
    return [*tls, *sasl_lines()]


def _format(files: list[Path], secure: bool = False) -> None:
    if all((f.parent / "data" / "meta.properties").exists() for f in files):
        return
    out = subprocess.run([*_odradek(), "storage", "random-uuid"], capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise CliError(f"cannot make a cluster id: {out.stderr.strip()}")
    cluster_id = out.stdout.strip()
    for f in files:
        scram = add_scram_arguments() if secure else []
        done = subprocess.run([*_odradek(), "storage", "format", "-t", cluster_id, "-c", str(f),
                               "--ignore-formatted", *scram], capture_output=True, text=True,
                              check=False)
        if done.returncode:
            raise CliError(done.stderr.strip().removeprefix("odradek: "))


METRICS_KEY = "odradek.metrics.listener"


def metrics_port(base_port: int, nodes: int, i: int) -> int:
    """Node ``i``'s metrics endpoint port: right after the cluster's client and
    quorum ports."""
    return base_port + 2 * nodes + i - 1


def metrics_address(path: Path) -> str | None:
    """The ``odradek.metrics.listener`` a node's server.properties sets, if any."""
    for line in path.read_text(encoding="utf-8").splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() == METRICS_KEY:
            return value.strip() or None
    return None


COMMANDS = "kill N, stop N, start N, restart N, pause N, resume N, status, quit"


class _Nodes:
    """The node processes of a dev cluster, started and stopped one at a time."""

    def __init__(self, files: list[Path], overrides: list[str],
                 metrics_ports: list[int] | None = None) -> None:
        self.files = files
        self.overrides = [a for o in overrides for a in ("--override", o)]
        self.metrics_ports = metrics_ports or []
        """Node i's metrics endpoint port (index i-1), for the nodes whose
        server.properties (written by an earlier version) does not set one."""
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.reported: set[int] = set()

    def log(self, i: int) -> Path:
        return self.files[i - 1].parent / f"node-{i}.log"

    def start(self, i: int) -> None:
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            print(f"node {i} is running (pid {proc.pid})", flush=True)
            return
        extra = []
        if i <= len(self.metrics_ports) and METRICS_KEY not in self.files[i - 1].read_text(
                encoding="utf-8"):
            extra = ["--override", f"{METRICS_KEY}=127.0.0.1:{self.metrics_ports[i - 1]}"]
        with open(self.log(i), "ab") as log:
            self.procs[i] = subprocess.Popen(
                [*_odradek(), "serve", str(self.files[i - 1]), *extra, *self.overrides],
                stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.reported.discard(i)
        print(f"node {i}: pid {self.procs[i].pid}, log {self.log(i)}", flush=True)

    def signal(self, i: int, sig: int) -> subprocess.Popen[bytes] | None:
        proc = self.procs.get(i)
        if proc is None or proc.poll() is not None:
            print(f"node {i} is not running", flush=True)
            return None
        proc.send_signal(sig)
        return proc

    def stop(self, i: int) -> None:
        proc = self.signal(i, signal.SIGCONT)  # a paused node must see the SIGTERM
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def report_exits(self) -> None:
        for i, proc in sorted(self.procs.items()):
            code = proc.poll()
            if code is not None and i not in self.reported:
                self.reported.add(i)
                how = (f"killed by {signal.Signals(-code).name}" if code < 0
                       else f"exited with status {code}")
                print(f"node {i} {how} (log {self.log(i)}); the others keep running; "
                      f"`start {i}` starts it again", flush=True)

    def status(self) -> None:
        for i in range(1, len(self.files) + 1):
            proc = self.procs.get(i)
            state = ("running" if proc is not None and proc.poll() is None else "stopped")
            pid = f", pid {proc.pid}" if proc is not None and proc.poll() is None else ""
            print(f"node {i}: {state}{pid}", flush=True)

    def stop_all(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every node (a controlled shutdown each); whichever has not
        exited ``timeout_s`` after the signal is killed."""
        stop_processes(list(self.procs.values()), timeout_s)


def _read_commands(lines: queue.Queue[str]) -> None:
    for line in sys.stdin:
        lines.put(line)


def _command(nodes: _Nodes, line: str) -> bool:
    """Run one console command; False for ``quit``."""
    words = line.split()
    if not words:
        return True
    verb, rest = words[0].lower(), words[1:]
    if verb in ("quit", "exit"):
        return False
    if verb == "status":
        nodes.status()
        return True
    if verb == "help" or len(rest) != 1 or not rest[0].isdigit() or not (
            1 <= int(rest[0]) <= len(nodes.files)):
        print(f"commands: {COMMANDS} (N: 1..{len(nodes.files)})", flush=True)
        return True
    i = int(rest[0])
    if verb == "kill":
        nodes.signal(i, signal.SIGKILL)
    elif verb in ("stop", "restart"):
        nodes.stop(i)
        if verb == "restart":
            nodes.start(i)
    elif verb == "start":
        nodes.start(i)
    elif verb in ("pause", "resume"):
        if nodes.signal(i, signal.SIGSTOP if verb == "pause" else signal.SIGCONT):
            print(f"node {i} {verb}d", flush=True)
    else:
        print(f"unknown command {verb!r}; commands: {COMMANDS}", flush=True)
    return True


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.nodes <= 9:
        raise CliError("--nodes must be between 1 and 9")
    for item in args.override:
        if "=" not in item:
            raise CliError(f"--override {item!r}: expected KEY=VALUE")
    files = write_configs(args.dir, args.nodes, args.base_port, args.secure)
    _format(files, args.secure)
    ports = [metrics_port(args.base_port, args.nodes, i) for i in range(1, args.nodes + 1)]
    nodes = _Nodes(files, args.override, ports)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    # Ctrl-C stops the cluster even when this process was started with SIGINT
    # ignored or blocked (a background job of a script inherits SIG_IGN).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_commands, args=(lines,), daemon=True).start()
    try:
        for i in range(1, len(files) + 1):
            nodes.start(i)
        host = "localhost" if args.secure else "127.0.0.1"
        bootstrap = ",".join(f"{host}:{args.base_port + 2 * i}" for i in range(args.nodes))
        print(f"bootstrap: {bootstrap}", flush=True)
        endpoints = [metrics_address(f) or f"127.0.0.1:{p}" for f, p in zip(files, ports,
                                                                           strict=True)]
        print("metrics: " + " ".join(f"node {i}: http://{a}/metrics"
                                     for i, a in enumerate(endpoints, 1))
              + " (also /healthz, /readyz)", flush=True)
        if args.secure:
            print(f"SASL_SSL with ACLs: the admin's client properties are in "
                  f"{args.dir / 'admin.properties'} (--command-config), the CA in "
                  f"{args.dir / 'certs' / 'ca.pem'}", flush=True)
        print(f"Ctrl-C stops the cluster; commands: {COMMANDS}", flush=True)
        while not stop:
            nodes.report_exits()
            with contextlib.suppress(queue.Empty):
                if not _command(nodes, lines.get(timeout=0.2)):
                    break
    except KeyboardInterrupt:
        pass
    finally:
        nodes.stop_all()
    print("cluster stopped", flush=True)
    return 0
def run_chaos(args: argparse.Namespace) -> int:
    """Faults against a 3-node cluster under load; the report, and exit 1 if a
    check fails (a run that cannot go on is one line, also exit 1)."""
    import random

    from odradek.testing.chaos import ALL_KINDS, ChaosError, ChaosRun

    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = [f for f in faults if f not in ALL_KINDS]
    if unknown or not faults:
        raise CliError(f"--faults: unknown fault {unknown[0]!r} (known: {', '.join(ALL_KINDS)})"
                       if unknown else "--faults: name at least one fault")
    if args.rounds < 1:
        raise CliError("--rounds must be at least 1")
    if not 1 <= args.max_in_flight <= 5:
        raise CliError("--max-in-flight must be between 1 and 5 (idempotence allows 5)")
    if args.dir is not None and args.dir.exists() and (
            not args.dir.is_dir() or any(args.dir.iterdir())):
        raise CliError(f"--dir {args.dir}: not an empty directory")
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    print(f"seed {seed}", flush=True)
    chaos = ChaosRun(seed, args.rounds, faults, directory=args.dir,
                     max_in_flight=args.max_in_flight)
    try:
        report = chaos.run()
    except ChaosError as exc:
        raise CliError(f"chaos: {exc}") from None
    print(report.format(), flush=True)
    return 0 if report.ok else 1
