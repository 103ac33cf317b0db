"""The coordinators wing: the group and transaction coordinators' runtimes over
their internal topics."""
