"""The KRaft-style metadata quorum as a pure state machine."""
