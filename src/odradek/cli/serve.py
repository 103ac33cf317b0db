"""``odradek serve``: one broker process (broker and controller in one node);
``odradek serve --processes N``: N of them on this host forming one cluster
(:mod:`odradek.cli.processes`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import gc
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from odradek.broker.config import BrokerConfig, parse_overrides, read_properties
from odradek.cli.common import CliError, stop_on_signals


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    serve = sub.add_parser("serve", help="start a broker (broker and controller in one node)")
    serve.add_argument("properties", nargs="?", type=Path, help="a server.properties-style file")
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a config"
    )
    serve.add_argument(
        "--log-dirs", metavar="DIR[,DIR...]",
        help="log.dirs: the data directories, comma separated; each partition lives in one "
             "(new ones go to the directory with the fewest partitions)")
    serve.add_argument("--log-level", default="INFO", type=str.upper, choices=LEVELS,
                       help="logging level (default INFO)")
    serve.add_argument(
        "--accept-missing-metadata", action="store_true",
        help="start although the metadata journal is lost: partition directories are moved "
             "aside as -stray (nothing is deleted) and the broker begins with no topics",
    )
    serve.add_argument(
        "--processes", type=int, default=None, metavar="N",
        help="start N broker processes on this host that form one cluster, to use N cores: "
             "listener port P becomes P..P+N-1, each log dir D gets D/process-<i> "
             "(see docs/cluster.md)")
    serve.set_defaults(run=run)


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _report_config(config: BrokerConfig, source: Path | None) -> None:
    """Log each unknown key once (with the key it may be a typo of) and Kafka's
    settings that are accepted but not used."""
    log = logging.getLogger("odradek.broker")
    for key, close in config.unknown_keys():
        hint = f"; did you mean {close!r}?" if close else ""
        log.warning("unknown config %r (in %s) is ignored%s", key,
                    source or "--override", hint)
    ignored = config.ignored_kafka_keys()
    if ignored:
        log.info("Kafka settings accepted and not used here: %s", ", ".join(ignored))


def _describe(app: object, config: BrokerConfig, source: Path | None) -> None:
    """What this broker is, a line each: node and roles, cluster id, data
    directories, listeners, configuration."""
    log = logging.getLogger("odradek.broker")
    state = getattr(app, "state", None)
    roles = ",".join(sorted(config.process_roles())) if config.is_cluster else (
        "broker,controller (single node)")
    log.info("node %d, roles %s", config.node_id, roles)
    if state is not None:
        log.info("cluster id %s", state.cluster_id)
    dirs = ", ".join(str(d.resolve()) for d in config.log_dirs())
    log.info("data in %s (metadata in %s)", dirs, config.metadata_dir.resolve())
    log.info("listeners %s", config.get("listeners"))
    log.info("configuration: %s", f"{source} and --override" if source else
             "defaults and --override")


def keep_heap_mapped() -> None:
    """Stop glibc from handing large request buffers back to the kernel.

    Every produce frame above 16 KiB gets a buffer of its exact size (see
    ``wire/frames.py``). With glibc's defaults, freeing a 1 MiB buffer shrinks
    the heap and the next one page-faults all of its pages in again, which
    costs more than receiving the data on this kind of VM. Raising the trim
    and mmap thresholds to 128 MiB keeps freed memory mapped for reuse. The
    broker's RSS then stays at its high-water mark, at most about the largest
    burst of in-flight requests. glibc only; elsewhere this does nothing.
    """
    import ctypes

    try:  # the interpreter's own symbols: libc is loaded already (no find_library)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_trim_threshold, 128 << 20)
    mallopt(m_mmap_threshold, 32 << 20)  # glibc's largest; a 6-partition produce is ~6 MiB


#: A stop that takes longer than this logs what it is waiting for.
SLOW_STOP_S = 8.0


@contextlib.contextmanager
def gc_paused(*, collect: bool = False) -> Iterator[None]:
    """No cyclic garbage collection inside (the broker's start): it builds a few
    objects per partition, all kept, and every full collection on the way walks
    all those made before, about a third of a clean restart's CPU at 30,000
    partitions (measured). Reference counting still frees what is dropped.

    On leaving, everything alive is frozen (``gc.freeze``: left out of later
    collections, still freed when no longer referenced). Left in a generation,
    the collections soon after the start, the first full one especially, would
    walk all of it: the first full Metadata answer after a restart at 100,000
    partitions took 2.7 s more (measured). Cycles among frozen objects are
    only collected once unfrozen: the caller unfreezes when partitions are let
    go (``PartitionManager.on_released``). With ``collect``, one collection
    first frees the cycles made inside. Collection resumes as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.collect()
        gc.freeze()
        if was:
            gc.enable()


#: The longest a cluster node keeps cyclic collection paused after its start
#: while it waits to be registered and caught up.
IN_SERVICE_GC_PAUSE_S = 60.0


async def collect_once_in_service(wait_in_service: Callable[[float], Awaitable[bool]],
                                  timeout_s: float = IN_SERVICE_GC_PAUSE_S) -> None:
    """Keep cyclic collection paused until this node is in service (a cluster
    node: registered and caught up with the metadata log; at most
    ``timeout_s``), then collect once and freeze what is left, as
    :func:`gc_paused` does for the start. Between the start and that moment a
    node restarting in a cluster of 100,000 partitions replays its share of
    the elections and opens its partitions (hundreds of thousands of objects,
    all kept): with collection on, the full collections the growing heap
    triggers walked all of them again and again, 1.0-1.7 s of CPU per node
    (measured with ``gc.callbacks``, ~20 collections of 35-190 ms each), on
    a restart short of CPU. One collection at the end frees the cycles made
    meanwhile. Collection resumes as it was."""
    with gc_paused(collect=True):
        await wait_in_service(timeout_s)


def _report_slow_stop() -> None:
    """Log the stack of every task still pending (a stop should take well
    under :data:`SLOW_STOP_S`; this names what holds it up)."""
    import io

    log = logging.getLogger("odradek.broker")
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is current:
            continue
        out = io.StringIO()
        task.print_stack(file=out)
        log.warning("stop is slow; still pending: %s", out.getvalue().strip())


def _refuse_processes_data(config: BrokerConfig) -> None:
    """One line, before anything is written, when the data directory is one
    ``odradek serve --processes N`` keeps (``processes.properties`` in it): a
    single node would take its ``process-<i>`` subdirectories for partitions
    and leave files of its own beside them."""
    from odradek.cli.processes_layout import STATE_FILE

    state = config.log_dir / STATE_FILE
    if state.exists():
        n = next((v.strip() for k, _, v in (line.partition("=") for line in
                                             state.read_text(encoding="utf-8").splitlines())
                  if k.strip() == "processes"), "N")
        raise CliError(f"{config.log_dir} holds the data of `odradek serve --processes {n}`; "
                       f"start it that way (or give this broker other log.dirs)")


def run(args: argparse.Namespace) -> int:
    from odradek.broker.app import BrokerApp

    file_props = read_properties(args.properties) if args.properties else None
    overrides = parse_overrides(args.override)
    if args.log_dirs:
        overrides["log.dirs"] = args.log_dirs
    if args.accept_missing_metadata:
        from odradek.broker.control.broker_state import ACCEPT_MISSING_METADATA

        overrides[ACCEPT_MISSING_METADATA] = "true"
    config = BrokerConfig.from_sources(file_props, overrides)
    if args.processes is not None:
        from odradek.cli.processes import supervise

        return supervise(args, config, overrides)
    _refuse_processes_data(config)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    _report_config(config, args.properties)
    keep_heap_mapped()
    try:
        import uvloop

        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        loop_factory = None

    async def main() -> None:
        stop = stop_on_signals()
        app = BrokerApp(config)
        in_service: asyncio.Task[None] | None = None
        try:
            with gc_paused():
                await app.start()
            if app.partitions is not None:
                app.partitions.on_released = gc.unfreeze
            if app.state is not None and not app.state.in_service.is_set():
                in_service = asyncio.create_task(
                    collect_once_in_service(app.state.wait_in_service))
        except OSError as exc:
            await app.stop()
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"listener address already in use ({config.get('listeners')})"
                ) from exc
            raise CliError(f"cannot listen on {config.get('listeners')}: {exc.strerror}") from exc
        _describe(app, config, args.properties)
        print(f"odradek: serving on {app.bootstrap_servers}", flush=True)
        try:
            await stop.wait()
        finally:
            import faulthandler
            import sys

            # Threads too, even if the loop itself is what is stuck (stderr).
            faulthandler.dump_traceback_later(SLOW_STOP_S * 2, file=sys.stderr)
            slow = asyncio.get_running_loop().call_later(SLOW_STOP_S, _report_slow_stop)
            if in_service is not None:
                in_service.cancel()  # collection resumes (its finally)
            await app.stop()
            slow.cancel()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())
    return 0
