"""KIP-848's consumer group protocol: groups whose assignment the coordinator
computes, reconciled member by member with epochs (see :mod:`.membership`)."""
