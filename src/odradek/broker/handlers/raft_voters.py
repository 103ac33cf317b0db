"""AddRaftVoter (80), RemoveRaftVoter (81): KIP-853's voter changes, decided by
the active controller. (UpdateRaftVoter, 82, is a controller-to-controller
RPC served by the quorum driver: :mod:`odradek.broker.handlers.k82_update_raft_voter`.)

Behaviour: the active controller applies the change to the Raft core (its rules
in :mod:`odradek.raft.membership`), retrying "not now" until ``TimeoutMs``, and
answers once the VotersRecord is committed. Another node forwards AddRaftVoter
and RemoveRaftVoter to the active controller, as Kafka's brokers do
(broker/net/forward.py); a node that cannot reach one answers NOT_CONTROLLER.
A node without a controller quorum answers UNSUPPORTED_VERSION (its voters
cannot change).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.broker.net.context import RequestContext
from odradek.broker.ports import NotControllerError
from odradek.raft.membership import VoterChangeError
from odradek.raft.voters import Endpoint, Voter
from odradek.wire.errors import ErrorCode

DEFAULT_TIMEOUT_MS = 30_000


async def change(ctx: RequestContext, api_key: int, request: Any) -> tuple[int, str | None]:
    """(error code, message) of applying ``request`` at this node."""
    quorum = ctx.broker.metadata
    if request.cluster_id not in (None, "", ctx.broker.cluster_id):
        return ErrorCode.INCONSISTENT_CLUSTER_ID, "another cluster's request"
    timeout_s = (request.timeout_ms if getattr(request, "timeout_ms", 0) > 0
                 else DEFAULT_TIMEOUT_MS) / 1000
    directory: uuid.UUID = request.voter_directory_id
    if api_key == 80:
        endpoints = tuple(Endpoint(x.name, x.host, x.port) for x in request.listeners)
        return await quorum_change(
            lambda: quorum.add_voter(Voter(request.voter_id, directory, endpoints), timeout_s))
    return await quorum_change(
        lambda: quorum.remove_voter(request.voter_id, directory, timeout_s))


async def quorum_change(change: Callable[[], Awaitable[object]]) -> tuple[int, str | None]:
    """(error code, message) of a change to the quorum (a voter added or removed,
    ``kraft.version`` upgraded): 0 once committed; the refusal's own code;
    NOT_CONTROLLER when this node no longer leads; REQUEST_TIMED_OUT when it
    did not commit in time. ``change`` is called inside: a refusal may come
    before its first await."""
    try:
        await change()
    except VoterChangeError as exc:
        return exc.code, str(exc)
    except NotControllerError:
        return ErrorCode.NOT_CONTROLLER, "not the active controller"
    except TimeoutError:
        return ErrorCode.REQUEST_TIMED_OUT, "the change did not commit in time"
    return 0, None
