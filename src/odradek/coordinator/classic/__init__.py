"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
their generations), beside the KIP-848 consumer protocol in
:mod:`odradek.coordinator.consumer`; both are parts of
:class:`~odradek.coordinator.coordinator.GroupCoordinator` over one store."""
