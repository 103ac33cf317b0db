"""``odradek storage``: prepare data directories offline (``kafka-storage.sh``).

* ``random-uuid`` prints a new cluster id (Kafka's ``Uuid`` string: 16 random
  bytes in base64url, 22 characters, never starting with ``-``).
* ``format -t CLUSTER_ID -c FILE`` checks the configuration as ``odradek serve``
  would, then writes ``meta.properties`` (format in
  :mod:`odradek.broker.control.meta_properties`) into every directory of ``log.dirs``
  and ``metadata.log.dir``, creating them. A directory formatted already stops
  it before anything is written, unless ``--ignore-formatted``; a formatted
  directory of another cluster or node always does. Every node of a cluster is
  formatted with the same id; a single node formats itself on first start, so
  it needs this only to choose its id.
* ``info -c FILE`` prints each directory's ``meta.properties``, or why there is
  none; exit status 1 when a directory is not formatted or they disagree, as
  Kafka's tool.
* ``strays -c FILE`` lists the partition directories a broker moved aside
  (``<topic>-<partition>.<hex>-stray``: the caught-up metadata said their topic
  was deleted or the partition reassigned away; nothing is ever deleted), with
  their topic id, size and last change.
* ``restore-stray -c FILE DIR`` puts one back under its partition's name, with
  the broker stopped; ``--replace`` first moves aside the directory now under
  that name. On its next start the broker adopts it if the metadata names its
  topic id for that partition on this node, and moves it aside again (saying
  why) if not.

A dynamic controller quorum (KIP-853, :mod:`odradek.broker.control.quorum_bootstrap`)
is chosen at format time, on controllers configured with
``controller.quorum.bootstrap.servers``: ``--standalone`` (this controller
alone), ``--initial-controllers ID@HOST:PORT:DIRID,...`` (this controller's
metadata directory gets its DIRID) or ``--no-initial-controllers`` (added
later); each writes ``bootstrap.voters`` into ``metadata.log.dir``.

As Kafka's tool, ``format`` writes the bootstrap metadata into
``metadata.log.dir``: ``bootstrap.checkpoint``, a metadata snapshot file
(format in :mod:`odradek.broker.control.bootstrap`) holding the
``metadata.version`` and other feature levels the new cluster starts with
(``--feature NAME=LEVEL`` as kafka-storage.sh takes it: ``transaction.version``
0-2, default 2; ``group.version`` 0-1, default 1; :mod:`odradek.metadata.features`;
``--release-version 4.0`` or ``4.0-IV3``, the only release this build formats,
is accepted as Kafka's tool takes it) and the SCRAM users of
``--add-scram`` (KIP-900). The first active controller writes them into the
empty metadata log.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from odradek.broker.config import BrokerConfig, ConfigError, parse_overrides, read_properties
from odradek.broker.control.bootstrap import (
    bootstrap_records,
    parse_add_scram,
    write_bootstrap,
)
from odradek.broker.control.dirlock import lock_dir, lock_dirs
from odradek.broker.control.meta_properties import (
    META_PROPERTIES,
    DataDirError,
    check_uuid,
    random_uuid,
    read_meta_properties,
    write_meta_properties,
)
from odradek.broker.control.quorum_bootstrap import (
    parse_initial_controllers,
    uuid_from_kafka,
    uuid_to_kafka,
    write_bootstrap_voters,
)
from odradek.cli.common import CliError
from odradek.metadata import features
from odradek.raft.voters import Endpoint, Voter, VoterSet
from odradek.storage.checkpoint import kafka_uuid_string, parse_partition_metadata
from odradek.storage.names import STRAY_DIR_SUFFIX, parse_partition_dir_name
from odradek.wire.internal.feature_level_record import FeatureLevelRecord

METADATA_VERSION = "4.0-IV3"
"""The metadata.version Kafka 4.0 formats with; the one Odradek's records follow."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    storage = sub.add_parser("storage", help="format and inspect data directories (offline)")
    verbs = storage.add_subparsers(dest="verb", required=True)
    verbs.add_parser("random-uuid", help="print a new cluster id").set_defaults(
        run=run_random_uuid)
    fmt = verbs.add_parser(
        "format", help="write meta.properties into log.dirs and metadata.log.dir",
        description="Write meta.properties (cluster.id, node.id, a new directory.id) into "
                    "every directory of log.dirs and metadata.log.dir.")
    fmt.add_argument("-t", "--cluster-id", required=True, help="from `odradek storage random-uuid`")
    _add_config(fmt)
    fmt.add_argument("-g", "--ignore-formatted", action="store_true",
                     help="skip directories formatted already (for this cluster and node)")
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument("-s", "--standalone", action="store_true",
                        help="this controller alone forms a dynamic controller quorum (KIP-853; "
                             "only without controller.quorum.voters)")
    quorum.add_argument("-I", "--initial-controllers", metavar="ID@HOST:PORT:DIRID,...",
                        help="the initial voters of a dynamic controller quorum, this one "
                             "among them (its metadata directory gets its DIRID)")
    quorum.add_argument("-N", "--no-initial-controllers", action="store_true",
                        help="a controller of a dynamic quorum that will be added later "
                             "(odradek metadata-quorum add-controller)")
    fmt.add_argument("-S", "--add-scram", action="append", default=[], metavar="CREDENTIAL",
                     help="a SCRAM user the new cluster starts with, e.g. "
                          "'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable)")
    fmt.add_argument("-f", "--feature", action="append", default=[], metavar="NAME=LEVEL",
                     help="a feature level the new cluster starts with instead of its "
                          "default, e.g. transaction.version=1 (repeatable; default: "
                          "group.version=1, transaction.version=2)")
    fmt.add_argument("-r", "--release-version", metavar="RELEASE",
                     help="the Kafka release whose metadata.version the cluster starts "
                          "at (this build: 4.0, i.e. 4.0-IV3)")
    fmt.set_defaults(run=run_format)
    info = verbs.add_parser("info", help="print each directory's meta.properties")
    _add_config(info)
    info.set_defaults(run=run_info)
    strays = verbs.add_parser("strays", help="list the partition directories moved aside")
    _add_config(strays)
    strays.set_defaults(run=run_strays)
    restore = verbs.add_parser(
        "restore-stray", help="put a moved-aside partition directory back (broker stopped)",
        description="Rename DIR (<topic>-<partition>.<hex>-stray in a log directory) back to "
                    "<topic>-<partition>. Run it with the broker stopped.")
    restore.add_argument("dir", type=Path, help="the -stray directory (see `storage strays`)")
    _add_config(restore)
    restore.add_argument("--replace", action="store_true",
                         help="move aside the directory now under the partition's name first")
    restore.set_defaults(run=run_restore_stray)


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", required=True, type=Path,
                        help="the server.properties-style file the node is started with")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config, as `odradek serve` takes it")


def _config(args: argparse.Namespace) -> BrokerConfig:
    return BrokerConfig.from_sources(read_properties(args.config), parse_overrides(args.override))


def directories(config: BrokerConfig) -> list[Path]:
    """``log.dirs`` and ``metadata.log.dir``, once each, sorted (as Kafka's tool)."""
    dirs = set(config.log_dirs())
    if config.metadata_log_dir is not None:
        dirs.add(config.metadata_log_dir)
    return sorted(dirs)


def run_random_uuid(args: argparse.Namespace) -> int:
    print(random_uuid())
    return 0


def run_format(args: argparse.Namespace) -> int:
    config = _config(args)
    cluster_id = args.cluster_id.strip()
    try:
        check_uuid(cluster_id)
    except ValueError as exc:
        raise CliError(f"Cluster ID string {cluster_id!r} does not appear to be a valid UUID: "
                       f"{exc}") from None
    node_id = config.node_id
    if node_id < 0:
        raise ConfigError(f"node.id: must not be negative to format, got {node_id}")
    dynamic = args.standalone or args.initial_controllers or args.no_initial_controllers
    if dynamic:
        _check_standalone(config, "--standalone" if args.standalone
                          else "--initial-controllers" if args.initial_controllers
                          else "--no-initial-controllers")
    # A single node (no quorum configured) takes --standalone as what it is already.
    voters = _bootstrap_voters(args, config) if dynamic and config.is_cluster else None
    me = voters.get(node_id) if voters is not None else None
    meta_dir_id = uuid_to_kafka(me.directory_id) if me is not None else None
    try:
        scram_records = [parse_add_scram(text) for text in args.add_scram]
        levels = dict(features.parse_level(text) for text in args.feature)
        if args.release_version is not None:
            features.parse_release(args.release_version)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if fixed := [n for n in levels if n in features.FIXED or n == "kraft.version"]:
        raise CliError(f"--feature {fixed[0]}: cannot be chosen in this build")
    bootstrap = bootstrap_records(levels, scram_records)
    formatted = _formatted(directories(config), cluster_id, node_id)
    if formatted and not args.ignore_formatted:
        raise CliError(f"Log directory {formatted[0]} is already formatted. Use "
                       f"--ignore-formatted to ignore this directory and format the others.")
    todo = [d for d in directories(config) if d not in formatted]
    if not todo:
        print("All of the log directories are already formatted.")
    locks = lock_dirs(todo)  # a directory a broker runs on is not formatted under it
    for directory in todo:
        print(f"Formatting {directory} with metadata.version {METADATA_VERSION}.", flush=True)
        try:
            write_meta_properties(
                directory, cluster_id, node_id,
                directory_id=meta_dir_id if directory == config.metadata_dir else None)
        except OSError as exc:
            raise CliError(f"cannot format {directory}: {exc.strerror or exc}") from exc
    if config.metadata_dir in todo:
        path = write_bootstrap(config.metadata_dir, bootstrap, int(time.time() * 1000))
        finalized = ", ".join(f"{r.name}={r.feature_level}" for r in bootstrap
                              if isinstance(r, FeatureLevelRecord))
        print(f"Bootstrap metadata ({finalized}; {len(scram_records)} SCRAM credential(s)) "
              f"written to {path}.")
    if voters is not None and config.metadata_dir in todo:
        if args.standalone:
            meta = read_meta_properties(config.metadata_dir / META_PROPERTIES)
            voters = voters.adding(Voter(node_id, uuid_from_kafka(meta["directory.id"]),
                                         _own_endpoint(config)))
        write_bootstrap_voters(config.metadata_dir, voters)
        print(f"Bootstrap voters {sorted(voters.ids) or 'none (added later)'} with "
              f"kraft.version 1 written to {config.metadata_dir}.")
    for lock in locks:
        lock.release()
    if args.standalone:
        print(f"Node {node_id} alone forms the controller quorum (a single voter).")
    return 0


def _bootstrap_voters(args: argparse.Namespace, config: BrokerConfig) -> VoterSet:
    """The voter set a dynamic quorum starts with (this node's own entry is added
    after its directory is formatted, for --standalone)."""
    if not args.initial_controllers:
        return VoterSet(())
    try:
        voters = parse_initial_controllers(args.initial_controllers, _listener(config))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if config.node_id not in voters.ids:
        raise CliError(f"--initial-controllers: node.id={config.node_id} is not among "
                       f"{sorted(voters.ids)}")
    return voters


def _listener(config: BrokerConfig) -> str:
    names = config.controller_listener_names()
    if not names:
        raise CliError("controller.listener.names is empty: a controller needs one")
    return names[0]


def _own_endpoint(config: BrokerConfig) -> tuple[Endpoint, ...]:
    """This controller's advertised endpoint on its (first) controller listener."""
    name = _listener(config)
    for lis in [*config.advertised_listeners(), *config.listeners()]:
        if lis.name == name:
            return (Endpoint(name, lis.host or "localhost", lis.port),)
    raise CliError(f"controller.listener.names: no listener named {name}")


def _check_standalone(config: BrokerConfig, flag: str) -> None:
    if "controller" not in config.process_roles():
        raise CliError(f"You cannot use {flag} on a broker node (process.roles has no "
                       "controller).")
    if config.quorum_voters():
        raise CliError(f"You cannot use {flag} with controller.quorum.voters set (a static "
                       "quorum): remove it, and set controller.quorum.bootstrap.servers for a "
                       "dynamic one.")


def _formatted(dirs: list[Path], cluster_id: str, node_id: int) -> list[Path]:
    """The directories formatted already; CliError if one is not a directory, or is
    formatted for another cluster or node (whether or not it would be skipped)."""
    out = []
    for directory in dirs:
        if directory.exists() and not directory.is_dir():
            raise CliError(f"{directory} is not a directory")
        path = directory / META_PROPERTIES
        if not path.exists():
            continue
        props = read_meta_properties(path)
        if props["cluster.id"] != cluster_id:
            raise CliError(f"Log directory {directory} is already formatted for cluster.id="
                           f"{props['cluster.id']}, not {cluster_id}.")
        if props.get("node.id", str(node_id)) != str(node_id):
            raise CliError(f"Log directory {directory} is already formatted for node.id="
                           f"{props['node.id']}, not {node_id}.")
        out.append(directory)
    return out


def run_info(args: argparse.Namespace) -> int:
    config = _config(args)
    problems = 0
    seen: set[tuple[str, str | None]] = set()
    for directory in directories(config):
        path = directory / META_PROPERTIES
        if not directory.is_dir():
            print(f"{directory}: {'not a directory' if directory.exists() else 'does not exist'}")
            problems += 1
            continue
        if not path.exists():
            print(f"{directory}: not formatted")
            problems += 1
            continue
        try:
            props = read_meta_properties(path)
        except DataDirError as exc:
            print(f"{directory}: {exc}")
            problems += 1
            continue
        seen.add((props["cluster.id"], props.get("node.id")))
        print(f"{directory}:")
        for key in sorted(props):
            print(f"  {key}={props[key]}")
    if len(seen) > 1:
        print("Mismatched cluster or node ids between the directories.")
        problems += 1
    return 1 if problems else 0


def _stray_dirs(config: BrokerConfig) -> list[Path]:
    out: list[Path] = []
    for directory in config.log_dirs():
        if directory.is_dir():
            out.extend(p for p in sorted(directory.iterdir())
                       if p.is_dir() and p.name.endswith(STRAY_DIR_SUFFIX))
    return out


def _stray_partition(path: Path) -> str | None:
    """``<topic>-<partition>`` of a ``<topic>-<partition>.<32 hex>-stray`` name."""
    name = path.name
    if not name.endswith(STRAY_DIR_SUFFIX):
        return None
    base, dot, unique = name[:-len(STRAY_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32 or parse_partition_dir_name(base) is None:
        return None
    return base


def _topic_id(path: Path) -> str:
    try:
        return kafka_uuid_string(parse_partition_metadata(
            (path / "partition.metadata").read_bytes()))
    except (OSError, ValueError):
        return "unknown"


def run_strays(args: argparse.Namespace) -> int:
    import datetime

    found = _stray_dirs(_config(args))
    if not found:
        print("No partition directory was moved aside.")
    for path in found:
        files = [f for f in path.iterdir() if f.is_file()]
        size = sum(f.stat().st_size for f in files)
        when = datetime.datetime.fromtimestamp(path.stat().st_mtime).isoformat(timespec="seconds")
        print(f"{path}  partition {_stray_partition(path) or '?'}  topic id {_topic_id(path)}  "
              f"{size} bytes  moved {when}")
    return 0


def run_restore_stray(args: argparse.Namespace) -> int:
    config = _config(args)
    path = args.dir.resolve()
    partition = _stray_partition(path)
    if partition is None or not path.is_dir():
        raise CliError(f"{args.dir} is not a moved-aside partition directory "
                       f"(<topic>-<partition>.<hex>-stray); `odradek storage strays -c "
                       f"{args.config}` lists them")
    if path.parent not in {d.resolve() for d in config.log_dirs()}:
        raise CliError(f"{args.dir} is not in a log directory of {args.config} "
                       f"({config.get('log.dirs')})")
    lock = lock_dir(path.parent)  # the broker must be stopped
    try:
        _restore(path, partition, args.replace)
    finally:
        lock.release()
    return 0


def _restore(path: Path, partition: str, replace: bool) -> None:
    import uuid

    target = path.parent / partition
    if target.exists():
        if not replace:
            raise CliError(f"{target} exists; add --replace to move it aside first (it is "
                           f"kept as a -stray directory)")
        aside = path.parent / f"{partition}.{uuid.uuid4().hex}{STRAY_DIR_SUFFIX}"
        target.rename(aside)
        print(f"Moved {target} aside to {aside}.")
    path.rename(target)
    print(f"Restored {path} as {target} (topic id {_topic_id(target)}); the broker adopts it "
          f"at its next start if the metadata names that topic for this partition.")
