"""The group coordinator's command set for text scenarios: it drives the pure
:class:`~odradek.coordinator.coordinator.GroupCoordinator` on simulated time.

The file format, the runner and the comparison are generic
(:mod:`tests.support.scenarios`). Here: what each command does, and the trace
it produces — every answer the coordinator gives (``alias <- api ERROR
fields...``) and every record it writes (``record ...``), in order.

Commands (``alias`` names a client; its member id and the generation it last
heard are remembered)::

    config initial_delay=0 min_session=10 max_session=100000
    join GROUP ALIAS [session=10000] [rebalance=30000] [protocols=range,rr]
                     [meta=X] [version=7] [instance=ID] [member=ID|fresh]
    sync GROUP ALIAS [gen=N] [member=ID] [instance=ID] [assign=A:x,B:y]
    heartbeat GROUP ALIAS [gen=N] [member=ID] [instance=ID]
    leave GROUP ALIAS [instance=ID] [member=ID]
    commit GROUP ALIAS|- [gen=N] [member=ID] [version=9] [txn=1] TOPIC:PARTITION=OFFSET ...
                        (txn=1: as TxnOffsetCommit validates it)
    fetch GROUP
    describe GROUP
    delete GROUP
    advance MS          (then the coordinator's timers run)
    expire RETENTION_MS (one offsets.retention pass)
    topics_deleted TOPIC...
    loading PARTITION   (marks the __consumer_offsets partition of GROUPs as loading)

Set ``ODRADEK_REWRITE=1`` to write the produced traces back into the files.
``GroupCommands().run(line)`` also drives the coordinator from plain tests.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

from odradek.coordinator.classic.membership import Leaving
from odradek.coordinator.coordinator import Commit, CommitRequest, GroupCoordinator
from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.records import GroupRecord, OffsetRecord
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.heartbeat_response import HeartbeatResponse
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.join_group_response import JoinGroupResponse
from odradek.wire.messages.leave_group_response import LeaveGroupResponse
from odradek.wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from odradek.wire.messages.sync_group_response import SyncGroupResponse
from tests.support.scenarios import Command, CommandSet


def _err(code: int) -> str:
    return "OK" if code == 0 else ErrorCode(code).name


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1


class GroupCommands(CommandSet):
    def __init__(self) -> None:
        self.now_ms = 1_000_000
        self.clients: dict[str, Client] = {}
        self.out: list[str] = []
        self.config = GroupConfig(
            initial_rebalance_delay_ms=0, min_session_timeout_ms=10, offsets_partitions=1
        )
        self._reset()

    def _reset(self) -> None:
        self._tokens = 0
        ids = itertools.count(1)
        self.coordinator = GroupCoordinator(self.config, new_id=lambda: str(next(ids)))
        self.coordinator.loading.clear()

    def token(self, alias: str, api: str) -> str:
        self._tokens += 1
        return f"{alias}:{api}:{self._tokens}"

    def client(self, alias: str) -> Client:
        return self.clients.setdefault(alias, Client())

    # -- output ---------------------------------------------------------------------------

    def apply(self, fx: Effects) -> None:
        for r in fx.records:
            self.emit(self.render_record(r))
        self.coordinator.replay(fx.records, self.now_ms)
        for token, response in fx.replies:
            self.emit(self.render_reply(str(token), response))

    def render_record(self, r: Any) -> str:
        if isinstance(r, OffsetRecord):
            value = "tombstone" if r.value is None else str(r.value.offset)
            return f"record offset {r.group} {r.topic}:{r.partition}={value}"
        assert isinstance(r, GroupRecord)
        if r.value is None:
            return f"record group {r.group} tombstone"
        members = ",".join(
            f"{m.member_id}" + (f"({len(m.assignment)}B)" if m.assignment else "")
            for m in r.value.members
        )
        return (f"record group {r.group} gen={r.value.generation} "
                f"protocol={r.value.protocol} leader={r.value.leader} members=[{members}]")

    def render_reply(self, token: str, resp: Any) -> str:
        alias, api, _ = token.split(":")
        c = self.client(alias)
        if isinstance(resp, JoinGroupResponse):
            if resp.member_id:
                c.member_id = resp.member_id
            if resp.error_code:
                return f"{alias} <- join {_err(resp.error_code)} member={resp.member_id}"
            c.generation = resp.generation_id
            members = ",".join(m.member_id for m in resp.members)
            return (f"{alias} <- join OK gen={resp.generation_id} member={resp.member_id} "
                    f"leader={resp.leader} protocol={resp.protocol_name} members=[{members}]")
        if isinstance(resp, SyncGroupResponse):
            extra = f" assignment={resp.assignment.decode()}" if not resp.error_code else ""
            return f"{alias} <- sync {_err(resp.error_code)}{extra}"
        if isinstance(resp, HeartbeatResponse):
            return f"{alias} <- heartbeat {_err(resp.error_code)}"
        if isinstance(resp, LeaveGroupResponse):
            per = ",".join(_err(m.error_code) for m in resp.members)
            return f"{alias} <- leave {_err(resp.error_code)} [{per}]"
        if api == "commit":
            return f"{alias} <- commit " + " ".join(
                f"{t}:{p}={_err(e)}" for (t, p), e in resp.items()
            )
        if api == "delete":
            return f"{alias} <- delete " + " ".join(f"{g}={_err(e)}" for g, e in resp.items())
        raise AssertionError(f"unexpected reply {resp!r}")

    # -- commands -------------------------------------------------------------------------

    def cmd_config(self, cmd: Command) -> None:
        names = {"initial_delay": "initial_rebalance_delay_ms",
                 "min_session": "min_session_timeout_ms",
                 "max_session": "max_session_timeout_ms", "max_size": "max_size",
                 "max_metadata": "offset_metadata_max_bytes"}
        values = {names[k]: int(v) for k, v in cmd.kw.items()}
        self.config = dataclasses.replace(self.config, **values)
        self._reset()

    def cmd_join(self, cmd: Command) -> None:
        group, alias = cmd.pos
        kw = cmd.kw
        c = self.client(alias)
        member = kw.get("member", c.member_id)
        member = "" if member == "fresh" else member
        protocols = kw.get("protocols", "range").split(",")
        meta = kw.get("meta", "m").encode()
        req = JoinGroupRequest(
            group_id=group, session_timeout_ms=int(kw.get("session", "10000")),
            rebalance_timeout_ms=int(kw.get("rebalance", "30000")), member_id=member,
            group_instance_id=kw.get("instance"), protocol_type=kw.get("type", "consumer"),
            protocols=[JoinGroupRequestProtocol(name=p, metadata=meta) for p in protocols],
        )
        self.apply(self.coordinator.join(
            self.token(alias, "join"), self.now_ms, int(kw.get("version", "7")), req, alias,
            "/127.0.0.1",
        ))

    def cmd_sync(self, cmd: Command) -> None:
        group, alias = cmd.pos
        kw = cmd.kw
        c = self.client(alias)
        assignments = []
        if "assign" in kw:
            for pair in kw["assign"].split(","):
                who, data = pair.split(":")
                assignments.append(SyncGroupRequestAssignment(
                    member_id=self.client(who).member_id, assignment=data.encode()
                ))
        req = SyncGroupRequest(
            group_id=group, generation_id=int(kw.get("gen", c.generation)),
            member_id=kw.get("member", c.member_id), group_instance_id=kw.get("instance"),
            assignments=assignments,
        )
        self.apply(self.coordinator.sync(self.token(alias, "sync"), self.now_ms, req))

    def cmd_heartbeat(self, cmd: Command) -> None:
        group, alias = cmd.pos
        kw = cmd.kw
        c = self.client(alias)
        self.apply(self.coordinator.heartbeat(
            self.token(alias, "heartbeat"), self.now_ms, group, kw.get("member", c.member_id),
            kw.get("instance"), int(kw.get("gen", c.generation)),
        ))

    def cmd_leave(self, cmd: Command) -> None:
        group, alias = cmd.pos
        kw = cmd.kw
        c = self.client(alias)
        who = Leaving(kw.get("member", c.member_id), kw.get("instance"))
        self.apply(self.coordinator.leave(self.token(alias, "leave"), self.now_ms, group, [who]))

    def cmd_commit(self, cmd: Command) -> None:
        group, alias = cmd.pos[0], cmd.pos[1]
        kw = cmd.kw
        c = self.client(alias) if alias != "-" else Client()
        commits = []
        for a in cmd.args:
            if ":" in a and "=" in a:
                tp, offset = a.split("=")
                topic, partition = tp.split(":")
                commits.append(Commit(topic, int(partition), int(offset), -1, kw.get("meta")))
        req = CommitRequest(group, int(kw.get("gen", c.generation)), kw.get("member", c.member_id),
                            None, -1, commits, version=int(kw.get("version", "9")),
                            transactional=kw.get("txn") == "1")
        self.apply(self.coordinator.commit_offsets(
            self.token(alias, "commit"), self.now_ms, req, lambda t, p: not t.startswith("missing")
        ))

    def cmd_fetch(self, cmd: Command) -> None:
        (group,) = cmd.pos
        code, offsets = self.coordinator.fetch_offsets(group, None)
        shown = " ".join(f"{o.topic}:{o.partition}={o.offset}" for o in offsets)
        self.emit(f"offsets {group} {_err(code)} {shown}".rstrip())

    def cmd_describe(self, cmd: Command) -> None:
        (group,) = cmd.pos
        d = self.coordinator.describe(group)
        members = ",".join(
            m.member_id + (f"={m.member_assignment.decode()}" if m.member_assignment else "")
            for m in d.members
        )
        self.emit(f"group {group} {_err(d.error_code)} state={d.group_state} "
                  f"protocol={d.protocol_data} members=[{members}]")

    def cmd_delete(self, cmd: Command) -> None:
        self.apply(self.coordinator.delete_groups(self.token("admin", "delete"), cmd.pos))

    def cmd_advance(self, cmd: Command) -> None:
        self.now_ms += int(cmd.pos[0])
        self.apply(self.coordinator.poll(self.now_ms))

    def cmd_expire(self, cmd: Command) -> None:
        self.apply(self.coordinator.expire_offsets(self.now_ms, int(cmd.pos[0])))

    def cmd_topics_deleted(self, cmd: Command) -> None:
        self.apply(self.coordinator.delete_topic_offsets(set(cmd.pos)))

    def cmd_loading(self, cmd: Command) -> None:
        self.coordinator.loading.add(int(cmd.pos[0]))
