"""``odradek metadata-quorum``: the controller quorum (``kafka-metadata-quorum.sh``).

* ``describe --status`` prints the leader, epoch, high watermark, the voters
  (id, directory id, endpoints) and observers; ``describe --replication`` one
  row per replica: log end offset, lag, time since its last fetch, role.
* ``add-controller --command-config controller.properties`` adds the controller
  that file configures (KIP-853): its ``node.id``, the ``directory.id`` of its
  ``metadata.log.dir`` (``meta.properties``) and its advertised controller
  listener go in an AddRaftVoter. The controller must run and have caught up
  (it was formatted with ``--no-initial-controllers``); the leader waits for
  that up to the timeout.
* ``remove-controller --controller-id N --controller-directory-id UUID``.

``--bootstrap-server`` (a broker, which forwards to the active controller) or
``--bootstrap-controller`` (a controller's listener). Errors: one line, exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from odradek.broker.config import BrokerConfig, ConfigError, read_properties
from odradek.broker.control.meta_properties import META_PROPERTIES, read_meta_properties
from odradek.broker.control.quorum_bootstrap import uuid_from_kafka, uuid_to_kafka
from odradek.cli.common import DEFAULT_BOOTSTRAP, CliError
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import add_raft_voter_request as av
from odradek.wire.messages import describe_quorum_request as dqr
from odradek.wire.messages import remove_raft_voter_request as rv

TIMEOUT_MS = 60_000
RETRY_S = 30.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    mq = sub.add_parser("metadata-quorum", help="describe and change the controller quorum")
    _add_target(mq, None)  # before the verb, as kafka-metadata-quorum.sh takes them
    verbs = mq.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="the quorum's status or replication")
    _add_target(describe)
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true")
    what.add_argument("--replication", action="store_true")
    describe.add_argument("--json", action="store_true", help="print JSON")
    describe.set_defaults(run=run_describe)
    add = verbs.add_parser("add-controller", help="add the controller a properties file "
                                                  "configures (KIP-853)")
    _add_target(add)
    add.set_defaults(run=run_add)
    remove = verbs.add_parser("remove-controller", help="remove a controller (KIP-853)")
    _add_target(remove)
    remove.add_argument("--controller-id", type=int, required=True)
    remove.add_argument("--controller-directory-id", required=True, metavar="UUID")
    remove.set_defaults(run=run_remove)


def _add_target(parser: argparse.ArgumentParser, default: Any = argparse.SUPPRESS) -> None:
    """The target options, on ``metadata-quorum`` and again on each verb (where
    they do not overwrite what was given before the verb)."""
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--bootstrap-server", metavar="HOST:PORT", default=default)
    target.add_argument("--bootstrap-controller", metavar="HOST:PORT", default=default)
    parser.add_argument("--command-config", type=Path, default=default, metavar="FILE",
                        help="client security settings; for add-controller, the new "
                             "controller's properties file")


def _bootstrap(args: argparse.Namespace) -> None:
    args.bootstrap_server = args.bootstrap_server or args.bootstrap_controller or (
        DEFAULT_BOOTSTRAP)


def _check(resp: Any, what: str) -> None:
    if resp.error_code:
        name = ErrorCode(resp.error_code).name
        detail = getattr(resp, "error_message", None)
        raise CliError(f"{what} failed: {name}{f': {detail}' if detail else ''}")


# -- describe ------------------------------------------------------------------------


def run_describe(args: argparse.Namespace) -> int:
    _bootstrap(args)
    return with_client(args, lambda c: _describe(c, args))


async def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    req = dqr.DescribeQuorumRequest([dqr.TopicData("__cluster_metadata", [dqr.PartitionData(0)])])
    resp = await client.request(req, 2)
    _check(resp, "DescribeQuorum")
    part = resp.topics[0].partitions[0]
    leader = next((x for n in resp.nodes if n.node_id == part.leader_id for x in n.listeners),
                  None)
    if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and leader is not None:
        # A controller that does not lead names the leader: ask it (as Kafka's tool).
        other = await KafkaClient.connect(f"{leader.host}:{leader.port}",
                                          security=client.security)
        try:
            resp = await other.request(req, 2)
        finally:
            await other.close()
        _check(resp, "DescribeQuorum")
        part = resp.topics[0].partitions[0]
    _check(part, "DescribeQuorum")
    endpoints = {n.node_id: ", ".join(f"{x.name}://{x.host}:{x.port}" for x in n.listeners)
                 for n in resp.nodes}
    rows = [(r, "Leader" if r.replica_id == part.leader_id else role)
            for role, members in (("Follower", part.current_voters),
                                  ("Observer", part.observers)) for r in members]
    if args.status:
        status = {
            "LeaderId": part.leader_id, "LeaderEpoch": part.leader_epoch,
            "HighWatermark": part.high_watermark,
            "CurrentVoters": [{"id": r.replica_id,
                               "directoryId": uuid_to_kafka(r.replica_directory_id),
                               "endpoints": endpoints.get(r.replica_id, "")}
                              for r in part.current_voters],
            "CurrentObservers": [{"id": r.replica_id,
                                  "directoryId": uuid_to_kafka(r.replica_directory_id)}
                                 for r in part.observers]}
        if args.json:
            emit_json(status)
        else:
            for key, value in status.items():  # lists as JSON, as Kafka's tool prints them
                text = json.dumps(value) if isinstance(value, list) else value
                print(f"{key + ':':<20}{text}")
        return 0
    out = [{"NodeId": r.replica_id, "DirectoryId": uuid_to_kafka(r.replica_directory_id),
            "LogEndOffset": r.log_end_offset,
            "Lag": max(0, part.high_watermark - r.log_end_offset),
            "LastFetchTimestamp": r.last_fetch_timestamp,
            "LastCaughtUpTimestamp": r.last_caught_up_timestamp, "Status": role}
           for r, role in rows]
    if args.json:
        emit_json(out)
    else:
        table(list(out[0]) if out else ["NodeId"], [list(map(str, o.values())) for o in out])
    return 0


# -- changes -------------------------------------------------------------------------


def controller_of(path: Path) -> tuple[int, str, list[tuple[str, str, int]]]:
    """(node.id, metadata directory id, advertised controller listeners) of the
    controller ``path`` configures; CliError saying what is missing."""
    try:
        config = BrokerConfig.from_sources(read_properties(path), {})
    except (ConfigError, OSError) as exc:
        raise CliError(f"--command-config {path}: {exc}") from None
    names = config.controller_listener_names()
    if "controller" not in config.process_roles() or not names:
        raise CliError(f"--command-config {path}: not a controller's configuration "
                       f"(process.roles, controller.listener.names)")
    meta = config.metadata_dir / META_PROPERTIES
    try:
        directory_id = read_meta_properties(meta).get("directory.id", "")
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {meta}: {exc} (format the controller first)") from None
    if not directory_id:
        raise CliError(f"{meta} has no directory.id")
    advertised = {lis.name: lis for lis in config.listeners()}
    advertised.update({lis.name: lis for lis in config.advertised_listeners()})
    listeners = [(n, advertised[n].host or "localhost", advertised[n].port)
                 for n in names if n in advertised]
    if not listeners:
        raise CliError(f"--command-config {path}: no listener for {names[0]}")
    return config.node_id, directory_id, listeners


def run_add(args: argparse.Namespace) -> int:
    if args.command_config is None:
        raise CliError("add-controller needs --command-config (the new controller's "
                       "properties file)")
    node_id, directory_id, listeners = controller_of(args.command_config)
    _bootstrap(args)
    args.command_config = None  # the controller's file configures the server, not us

    async def work(client: KafkaClient) -> int:
        req = av.AddRaftVoterRequest(None, TIMEOUT_MS, node_id, uuid_from_kafka(directory_id),
                                     [av.Listener(*x) for x in listeners])
        await _send(client, req, f"Adding controller {node_id}", ErrorCode.DUPLICATE_VOTER)
        print(f"Added controller {node_id} with directory id {directory_id} and endpoints: "
              + ", ".join(f"{n}://{h}:{p}" for n, h, p in listeners))
        return 0

    return with_client(args, work)


def run_remove(args: argparse.Namespace) -> int:
    try:
        directory = uuid_from_kafka(args.controller_directory_id)
    except ValueError as exc:
        raise CliError(f"--controller-directory-id: {exc}") from None
    _bootstrap(args)

    async def work(client: KafkaClient) -> int:
        req = rv.RemoveRaftVoterRequest(None, args.controller_id, directory)
        await _send(client, req, f"Removing controller {args.controller_id}",
                    ErrorCode.VOTER_NOT_FOUND)
        print(f"Removed controller {args.controller_id} with directory id "
              f"{args.controller_directory_id}")
        return 0

    return with_client(args, work)


async def _send(client: KafkaClient, req: Any, what: str, done_code: int) -> None:
    """Send a voter change, again while the answer is NOT_CONTROLLER (the active
    controller moved or was being elected), for up to :data:`RETRY_S`, as Kafka's
    admin client does. ``done_code`` (DUPLICATE_VOTER for an add, VOTER_NOT_FOUND
    for a removal) after such a retry means an earlier attempt was committed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RETRY_S
    retried = False
    while True:
        resp = await client.request(req, 0)
        if resp.error_code == ErrorCode.NOT_CONTROLLER and loop.time() < deadline:
            retried = True
            await asyncio.sleep(0.5)  # the client's retry backoff
            continue
        if retried and resp.error_code == done_code:
            return
        _check(resp, what)
        return
