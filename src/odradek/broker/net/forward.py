"""The pipeline's ``forward`` stage: a cluster node sends the admin requests
only the active controller may decide (:data:`FORWARDED_APIS`) to it and
returns its answer (KIP-590 forwarding, :mod:`odradek.broker.control.controller_channel`).

When no controller is known, the one known cannot be reached, or it refuses
the request (NOT_CONTROLLER in the envelope: it was elected and is not active
yet, or it has just resigned), the stage waits for the quorum's next change of
leader, trying again every :attr:`ForwardToController.RETRY_S` meanwhile, for
at most :attr:`ForwardToController.wait_s` (the root sets it to the time a
quorum takes to replace a lost leader: fetch timeout, election timeout and
backoff), then lets this node answer: a node that
became controller meanwhile decides the request itself; one that did not
answers NOT_CONTROLLER, which clients retry after refreshing their metadata,
as against Kafka. A handler that finds this node no longer controller
mid-request (:class:`NotControllerError`) is answered NOT_CONTROLLER too.

The request travels in an Envelope (API 58, :mod:`odradek.wire.envelope`)
naming the client's principal and IP, as Kafka's brokers forward (KIP-590), so
the controller authorizes it as the client's (broker/handlers/k58_envelope.py)
and a controller never sees a forwarded request as the forwarding broker's;
the forwarding node's own principal needs CLUSTER_ACTION on the cluster.

A controller answers DescribeQuorum itself when asked on its controller
listener, as Kafka's controllers do.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.control.controller_channel import FORWARDED_APIS, ControllerUnavailable
from odradek.broker.net.pipeline import Call, Proceed
from odradek.broker.ports import NotControllerError
from odradek.wire import envelope
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.control.controller_channel import ControllerChannel


class ActiveQuorum(Protocol):
    """What forwarding needs of the quorum."""

    @property
    def is_leader(self) -> bool: ...

    async def view_change(self, timeout_s: float) -> bool: ...


class ForwardToController:
    name = "forward"
    RETRY_S = 0.1
    """How soon a request the controller refused (NOT_CONTROLLER in the envelope)
    is sent again when the quorum's view does not change first."""

    def __init__(self, quorum: ActiveQuorum, channel: ControllerChannel,
                 controller_listeners: frozenset[str], wait_s: float = 1.0) -> None:
        self.quorum = quorum
        self.channel = channel
        self.controller_listeners = controller_listeners
        self.wait_s = wait_s

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        if call.api_key not in FORWARDED_APIS:
            return await proceed(call)
        local = call.api_key == 55 and call.ctx.listener in self.controller_listeners
        if not local and not self.quorum.is_leader:
            answer = await self._forward(call)
            if answer is not None:
                return answer
        try:
            return await proceed(call)
        except NotControllerError:
            return not_controller_response(call.api_key, call.request.body)

    async def _enveloped(self, call: Call) -> Any:
        """Forward in an Envelope carrying the client's principal and IP, so the
        controller authorizes the request as the client's. ControllerUnavailable
        when the controller has moved."""
        request, ctx = call.request, call.ctx
        wrapped = envelope.wrap(request.body, request.api_version, ctx.client_id,
                                ctx.principal, ctx.client_host.rsplit(":", 1)[0])
        answer = await self.channel.request(wrapped, envelope.ENVELOPE_VERSION)
        if answer.error_code == ErrorCode.NOT_CONTROLLER:
            raise ControllerUnavailable("the controller is no longer active")
        if answer.error_code or answer.response_data is None:
            return not_controller_response(call.api_key, request.body,
                                           answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)
        return envelope.unwrap_response(call.api_key, request.api_version,
                                        bytes(answer.response_data))

    async def _forward(self, call: Call) -> Any:
        """The controller's answer; None when this node should answer (it leads
        now, or no controller answered within :attr:`wait_s`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        quorum = self.quorum
        while not quorum.is_leader:
            try:
                return await self._enveloped(call)
            except ControllerUnavailable:
                left = deadline - loop.time()
                if left <= 0:
                    return None
                # The next leader, or a retry: a controller elected but not yet
                # active refuses the envelope with no change of view to come.
                await quorum.view_change(min(left, self.RETRY_S))
        return None


def not_controller_response(api_key: int, request: Any, code: int | None = None) -> Any:
    """The answer to a forwarded admin request when no controller could decide it:
    NOT_CONTROLLER for every item, which clients retry after refreshing metadata
    (as against a Kafka broker whose controller moved); ``code`` instead when
    given (an envelope the controller refused)."""
    from odradek.wire.messages import alter_client_quotas_response as acq
    from odradek.wire.messages import alter_configs_response as ac
    from odradek.wire.messages import create_partitions_response as cp
    from odradek.wire.messages import create_topics_response as ct
    from odradek.wire.messages import delete_topics_response as dt
    from odradek.wire.messages import describe_quorum_response as dq
    from odradek.wire.messages import incremental_alter_configs_response as iac

    why = "no active controller could be reached"
    if code is None:
        code = ErrorCode.NOT_CONTROLLER
    elif code != ErrorCode.NOT_CONTROLLER:
        why = f"the controller refused the forwarded request ({ErrorCode(code).name})"
    if api_key == 19:
        return ct.CreateTopicsResponse(topics=[
            ct.CreatableTopicResult(t.name, error_code=code, error_message=why)
            for t in request.topics])
    if api_key == 20:
        names = list(request.topic_names) or [t.name for t in request.topics]
        return dt.DeleteTopicsResponse(responses=[
            dt.DeletableTopicResult(n, error_code=code, error_message=why) for n in names])
    if api_key == 37:
        return cp.CreatePartitionsResponse(results=[
            cp.CreatePartitionsTopicResult(t.name, code, why) for t in request.topics])
    if api_key in (33, 44):
        module = ac if api_key == 33 else iac
        response_class = ac.AlterConfigsResponse if api_key == 33 else (
            iac.IncrementalAlterConfigsResponse)
        return response_class(responses=[
            module.AlterConfigsResourceResponse(code, why, r.resource_type, r.resource_name)
            for r in request.resources])
    if api_key == 49:
        return acq.AlterClientQuotasResponse(entries=[
            acq.EntryData(code, why, [acq.EntityData(e.entity_type, e.entity_name)
                                      for e in entry.entity])
            for entry in request.entries])
    if api_key == 51:
        from odradek.broker.handlers.k51_alter_user_scram_credentials import (
            error_response as alter_scram,
        )
        return alter_scram(request, code)
    if api_key == 55:
        return dq.DescribeQuorumResponse(error_code=code, error_message=why)
    if api_key in (80, 81):
        from odradek.wire import api

        return api.response_class(api_key)(  # type: ignore[call-arg]
            error_code=code, error_message=why)
    if api_key == 30:
        from odradek.broker.handlers.k30_create_acls import error_response as create_acls
        return create_acls(request, code)
    if api_key == 31:
        from odradek.broker.handlers.k31_delete_acls import error_response as delete_acls
        return delete_acls(request, code)
    if api_key == 43:
        from odradek.broker.handlers.k43_elect_leaders import error_response as elect
        return elect(request, code)
    if api_key == 45:
        from odradek.broker.handlers.k45_alter_partition_reassignments import (
            error_response as reassign,
        )
        return reassign(request, code)
    if api_key == 46:
        from odradek.wire.messages import list_partition_reassignments_response as lpr
        return lpr.ListPartitionReassignmentsResponse(error_code=code, error_message=why)
    if api_key == 57:
        from odradek.broker.handlers.k57_update_features import error_response as features
        return features(request, code, why)
    raise ValueError(f"API {api_key} is not forwarded")
