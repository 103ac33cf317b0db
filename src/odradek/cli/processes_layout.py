"""How ``odradek serve --processes N`` lays N broker processes out on one host.

A pure function of the user's configuration (file and ``--override``s, as one
``odradek serve`` would read them) and N: no IO. :func:`plan` returns, for each
process *i* in 0..N-1, the settings that replace the user's for that process
(they are passed as ``--override KEY=VALUE`` after the user's own, so they win):

* ``node.id``: the configured ``node.id`` (default 1) plus *i*.
* ``process.roles``: ``broker,controller`` for the first C processes, the
  controller quorum (a static one: ``controller.quorum.voters``), ``broker``
  for the others; C is 1 for N < 3 and 3 from N = 3 (:func:`controllers`).
* ``listeners``: every configured listener, its port plus *i* (so the client
  port P of a single ``odradek serve`` is process 0's, and P+1..P+N-1 the
  others'); the controllers also get ``CONTROLLER://127.0.0.1:Q+c``, where
  ``Q`` is one above the highest port any process uses for a configured
  listener (``max(listener ports) + N``) and *c* the controller's index. The
  quorum only ever talks between processes of this host, so it binds the
  loopback, PLAINTEXT.
* ``advertised.listeners`` (when set) and ``odradek.metrics.listener`` (when
  set): their ports plus *i* as well.
* ``log.dirs``: each directory ``D`` becomes ``D/process-<i>``; the same for
  ``metadata.log.dir`` when set.

Invariants checked here (a :class:`~odradek.broker.config.ConfigError`, one
line, otherwise): 1 <= N <= :data:`MAX_PROCESSES`; the configuration names no
quorum of its own (``controller.quorum.voters``, ``.bootstrap.servers``,
``controller.listener.names``) and no listener called ``CONTROLLER``; every
listener has a fixed port (not 0); and no two ports of the whole plan are the
same or above 65535.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.listeners import Listener, parse_listeners

MAX_PROCESSES = 256
"""An upper bound that catches typos (a host with more cores than this runs
more hosts' worth of brokers anyway)."""

CONTROLLERS = 3
"""Controller quorum size once N >= 3: survives one controller process lost."""

STATE_FILE = "processes.properties"
"""``processes=N`` in the first ``log.dirs`` directory: how many processes
served this data (a properties file, one key; written by the supervisor)."""

PROCESS_DIR = "process-{}"
"""Process *i*'s subdirectory of each ``log.dirs`` entry."""

CONTROLLER = "CONTROLLER"

_QUORUM_KEYS = ("controller.quorum.voters", "controller.quorum.bootstrap.servers",
                "controller.listener.names")


@dataclass(frozen=True, slots=True)
class ProcessPlan:
    """One broker process: its index, node id, and the overrides that make it so."""

    index: int
    node_id: int
    controller: bool
    overrides: dict[str, str]
    client_ports: tuple[int, ...]
    """The ports of its configured (client) listeners, in ``listeners`` order."""

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in self.overrides["log.dirs"].split(",")]


def controllers(n: int) -> int:
    """How many of N processes are controllers: an odd number, as a majority
    quorum wants (two voters would stop metadata changes when either process
    is lost, where one voter stops them only when that one is): 1 below 3
    processes, then :data:`CONTROLLERS`."""
    return CONTROLLERS if n >= CONTROLLERS else 1


def _shift(listeners: list[Listener], by: int) -> str:
    def host(h: str) -> str:
        return f"[{h}]" if ":" in h else h
    return ",".join(f"{lis.name}://{host(lis.host)}:{lis.port + by}" for lis in listeners)


def _check(config: BrokerConfig, n: int) -> list[Listener]:
    if not 1 <= n <= MAX_PROCESSES:
        raise ConfigError(f"--processes must be between 1 and {MAX_PROCESSES}, got {n}")
    for key in _QUORUM_KEYS:
        if config.get(key).strip():
            raise ConfigError(f"--processes: {key} is set; --processes forms its own quorum "
                              f"on this host (leave the {key} setting out)")
    if config.get("process.roles").replace(" ", "") not in ("broker,controller",
                                                            "controller,broker"):
        raise ConfigError("--processes: process.roles is set; --processes chooses each "
                          "process's roles (leave it out)")
    listeners = config.listeners()
    for lis in listeners:
        if lis.name == CONTROLLER:
            raise ConfigError("--processes: a listener is named CONTROLLER; --processes "
                              "adds the controller listener itself (rename it)")
        if lis.port == 0:
            raise ConfigError(f"--processes needs fixed ports: listener {lis.name} has port 0")
    return listeners


def plan(config: BrokerConfig, n: int) -> list[ProcessPlan]:
    """The N processes (see the module docstring); ConfigError, one line, if
    the configuration cannot be spread so."""
    listeners = _check(config, n)
    base_id = config.node_id
    advertised = (parse_listeners(config.get("advertised.listeners"), "advertised.listeners")
                  if config.get("advertised.listeners").strip() else None)
    metrics = config.metrics_listener()
    quorum_port = max(lis.port for lis in listeners) + n
    c = controllers(n)
    voters = ",".join(f"{base_id + k}@127.0.0.1:{quorum_port + k}" for k in range(c))
    protocol_map = config.get("listener.security.protocol.map")
    explicit_map = "listener.security.protocol.map" in config.explicit
    used: dict[int, str] = {}

    def claim(port: int, what: str) -> None:
        if port > 65535:
            raise ConfigError(f"--processes {n}: {what} would need port {port} (above 65535)")
        if port in used:
            raise ConfigError(f"--processes {n}: port {port} would serve both {used[port]} "
                              f"and {what}; choose ports at least {n} apart")
        used[port] = what

    out = []
    for i in range(n):
        is_controller = i < c
        for lis in listeners:
            claim(lis.port + i, f"listener {lis.name} of process {i}")
        if is_controller:
            claim(quorum_port + i, f"the controller listener of process {i}")
        if metrics is not None:
            claim(metrics[1] + i, f"the metrics endpoint of process {i}")
        own = _shift(listeners, i)
        overrides = {
            "node.id": str(base_id + i),
            "process.roles": "broker,controller" if is_controller else "broker",
            "listeners": (f"{own},{CONTROLLER}://127.0.0.1:{quorum_port + i}"
                          if is_controller else own),
            "controller.quorum.voters": voters,
            "controller.listener.names": CONTROLLER,
            "log.dirs": ",".join(str(d / PROCESS_DIR.format(i)) for d in config.log_dirs()),
        }
        if explicit_map and CONTROLLER not in protocol_map.upper():
            overrides["listener.security.protocol.map"] = f"{protocol_map},{CONTROLLER}:PLAINTEXT"
        if advertised is not None:
            overrides["advertised.listeners"] = _shift(advertised, i)
        if metrics is not None:
            host = f"[{metrics[0]}]" if ":" in metrics[0] else metrics[0]
            overrides["odradek.metrics.listener"] = f"{host}:{metrics[1] + i}"
        if config.metadata_log_dir is not None:
            overrides["metadata.log.dir"] = str(config.metadata_log_dir / PROCESS_DIR.format(i))
        out.append(ProcessPlan(i, base_id + i, is_controller, overrides,
                               tuple(lis.port + i for lis in listeners)))
    return out


def check_growth(previous: int, n: int) -> None:
    """A restart on the same directories with ``n`` processes where ``previous``
    ran before: the quorum is static, so its voters (:func:`controllers`) must
    stay the same; and a process dropped would take its partitions' only copy
    (RF 1) with it. So N may only grow: from 1 to 2, or from 3 on."""
    if n == previous:
        return
    if n < previous:
        raise ConfigError(f"--processes {n}: this data was served by {previous} processes; "
                          f"fewer would leave the partitions of the others offline "
                          f"(start with --processes {previous})")
    if controllers(n) != controllers(previous):
        raise ConfigError(f"--processes {n}: this data was served by {previous} processes, "
                          f"whose controller quorum has {controllers(previous)} voter(s) and "
                          f"{n} would have {controllers(n)}; a static quorum cannot change "
                          f"(start with --processes {previous})")
