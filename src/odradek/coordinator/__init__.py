"""Group and transaction coordinators as pure state machines: records in, records out."""
