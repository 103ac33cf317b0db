"""KIP-853's rules for changing the voter set, checked by the leader.

A change is one VotersRecord adding or removing one voter, and takes effect as
soon as it is appended (majorities count the new set at once). It is safe
because two consecutive sets always share a majority, provided that:

* only one change is uncommitted at a time
  (:meth:`~odradek.raft.node_voters.VoterSetMixin.voter_change_pending`);
* the leader has committed an entry of its own epoch first (else a change of an
  earlier leader, never committed, could be lost under a set that never saw it);
* ``kraft.version`` is 1 (a static ``controller.quorum.voters`` cannot change);
* a voter to add is an observer the leader hears from, with that directory id
  (or none: a Fetch below v17 cannot carry it, so the shell's fetches name
  none), caught up: its last fetch reached the leader's log end within a fetch timeout
  (else the new majority could not commit anything until it catches up);
* a voter to remove is in the set with that directory id, and is not the last;
* a voter to update (UpdateRaftVoter: its endpoints or its ``kraft.version``
  range changed, e.g. it restarted on a new port) is in the set with that
  directory id; its new endpoints are not empty and include the leader's
  controller listener name (the first of the leader's own endpoints, as Kafka
  requires its default listener), and its range is a range that includes the
  ``kraft.version`` in force. An update keeps the ids, so it never moves a
  majority, but it still waits its turn: one VotersRecord uncommitted at a time.
  An update that changes nothing is accepted and writes nothing.

Upgrading ``kraft.version`` from 0 to 1 (a static quorum becomes dynamic,
``kafka-features.sh upgrade --feature kraft.version=1``) writes a
KRaftVersionRecord(1) and a VotersRecord of the same voters with their
directory ids and endpoints (:func:`check_upgrade`): the ids do not change, so
neither does any majority. It needs the leader to have committed in its epoch,
and every voter's directory id known (the leader's own; the others' from their
Fetch v17, ``ReplicaDirectoryId``) and endpoints (the static
``controller.quorum.voters``); a downgrade, or a level this build does not
support, is ``INVALID_UPDATE_VERSION``.

A violated rule raises :class:`VoterChangeError` with the Kafka error code that
AddRaftVoter/RemoveRaftVoter/UpdateRaftVoter answer: ``REQUEST_TIMED_OUT`` for
"not now, try again", ``DUPLICATE_VOTER``, ``VOTER_NOT_FOUND``,
``UNSUPPORTED_VERSION``, ``INVALID_REQUEST``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from odradek.raft.leader import LeaderState
from odradek.raft.voters import NO_DIRECTORY, SUPPORTED_KRAFT_VERSIONS, Endpoint, Voter, VoterSet
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.raft.node_voters import VoterSetMixin as RaftNode


class VoterChangeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _common(node: RaftNode) -> None:
    if node.kraft_version == 0:
        raise VoterChangeError(ErrorCode.UNSUPPORTED_VERSION,
                               "kraft.version is 0: the voters are static "
                               "(controller.quorum.voters)")
    if not node.leader_committed_in_epoch():
        raise VoterChangeError(ErrorCode.REQUEST_TIMED_OUT,
                               "the leader has not committed in its epoch yet")
    if node.voter_change_pending():
        raise VoterChangeError(ErrorCode.REQUEST_TIMED_OUT,
                               "another voter change is not committed yet")


def check_add(node: RaftNode, state: LeaderState, voter: Voter, now_ms: int) -> None:
    _common(node)
    if voter.directory_id == NO_DIRECTORY:
        raise VoterChangeError(ErrorCode.INVALID_REQUEST, "a voter needs a directory id")
    if node.voter_set.get(voter.node_id) is not None:
        raise VoterChangeError(ErrorCode.DUPLICATE_VOTER,
                               f"node {voter.node_id} is already a voter")
    p = state.progress.get(voter.node_id)
    if p is None or p.directory_id not in (NO_DIRECTORY, voter.directory_id):
        raise VoterChangeError(ErrorCode.REQUEST_TIMED_OUT,
                               f"node {voter.node_id} with directory {voter.directory_id} "
                               "does not fetch from the leader")
    window = node.config.fetch_timeout_ms
    if (p.last_caught_up_ms < 0 or now_ms - p.last_caught_up_ms > window
            or p.end_offset < node.high_watermark):
        raise VoterChangeError(ErrorCode.REQUEST_TIMED_OUT,
                               f"node {voter.node_id} has not caught up with the leader")


def check_remove(node: RaftNode, node_id: int, directory_id: uuid.UUID) -> None:
    _common(node)
    if not node.voter_set.has(node_id, directory_id):
        raise VoterChangeError(ErrorCode.VOTER_NOT_FOUND,
                               f"no voter {node_id} with directory {directory_id}")
    if len(node.voters) == 1:
        raise VoterChangeError(ErrorCode.INVALID_REQUEST, "cannot remove the last voter")


def check_update(node: RaftNode, voter: Voter, own: tuple[Endpoint, ...]) -> VoterSet | None:
    """The voter set with ``voter``'s new endpoints and range (None: it holds them
    already); ``own`` are the leader's endpoints (its first names the listener
    every voter must have)."""
    if voter.directory_id == NO_DIRECTORY:
        raise VoterChangeError(ErrorCode.INVALID_REQUEST, "a voter needs a directory id")
    if not voter.endpoints:
        raise VoterChangeError(ErrorCode.INVALID_REQUEST, "a voter needs an endpoint")
    if own and own[0].name not in {e.name for e in voter.endpoints}:
        raise VoterChangeError(ErrorCode.INVALID_REQUEST,
                               f"the endpoints lack the controller listener {own[0].name}")
    low, high = voter.kraft_versions
    if not low <= node.kraft_version <= high:
        raise VoterChangeError(ErrorCode.INVALID_REQUEST,
                               f"kraft.version range [{low}, {high}] excludes the "
                               f"version in force, {node.kraft_version}")
    _common(node)
    if not node.voter_set.has(voter.node_id, voter.directory_id):
        raise VoterChangeError(ErrorCode.VOTER_NOT_FOUND,
                               f"no voter {voter.node_id} with directory {voter.directory_id}")
    if node.voter_set.get(voter.node_id) == voter:
        return None
    return node.voter_set.updating(voter)


def check_upgrade(node: RaftNode, state: LeaderState, version: int,
                  endpoints: dict[int, tuple[Endpoint, ...]]) -> VoterSet | None:
    """The voter set an upgrade to ``kraft.version`` ``version`` writes (None: the
    log is at that version already). ``endpoints``: each voter's, by id."""
    low, high = SUPPORTED_KRAFT_VERSIONS
    current = node.kraft_version
    if not low <= version <= high:
        raise VoterChangeError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"kraft.version {version} is not supported ({low}-{high})")
    if version < current:
        raise VoterChangeError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"kraft.version cannot be downgraded from {current}")
    if version == current:
        return None
    if not node.leader_committed_in_epoch():
        raise VoterChangeError(ErrorCode.REQUEST_TIMED_OUT,
                               "the leader has not committed in its epoch yet")
    voters = []
    for node_id in sorted(node.voters):
        directory = (node.directory_id if node_id == node.node_id else
                     state.progress[node_id].directory_id if node_id in state.progress
                     else NO_DIRECTORY)
        if directory == NO_DIRECTORY:
            raise VoterChangeError(ErrorCode.INVALID_UPDATE_VERSION,
                                   f"voter {node_id}'s directory id is not known (it has "
                                   "not fetched from the leader with Fetch v17)")
        if not endpoints.get(node_id):
            raise VoterChangeError(ErrorCode.INVALID_UPDATE_VERSION,
                                   f"voter {node_id}'s endpoint is not known")
        voters.append(Voter(node_id, directory, endpoints[node_id]))
    return VoterSet.of(voters)
