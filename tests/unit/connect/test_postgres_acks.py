"""The CDC source's acknowledgement bookkeeping: the slot may move only to the
end of transactions whose records were all acknowledged."""

from __future__ import annotations

from odradek.connect.connectors.postgres.acks import Acks


def off(lsn: int, event: int, lsn_commit: int) -> dict[str, int]:
    return {"lsn": lsn, "event": event, "lsn_commit": lsn_commit}


# Two transactions ending at 100 and 200, two records each: a record's
# lsn_commit is its transaction's end on its last record, else the previous end.
RECORDS = [off(100, 1, 0), off(100, 2, 100), off(200, 1, 100), off(200, 2, 200)]


def test_acks_in_order_move_to_each_finished_transaction() -> None:
    acks = Acks()
    for r in RECORDS:
        acks.track(r)
    assert acks.lsn == 0
    acks.ack(RECORDS[0])
    assert acks.lsn == 0
    acks.ack(RECORDS[1])
    assert acks.lsn == 100
    acks.ack(RECORDS[2])
    assert acks.lsn == 100
    acks.ack(RECORDS[3])
    assert acks.lsn == 200 and len(acks) == 0


def test_an_ack_out_of_order_waits_for_the_ones_before() -> None:
    acks = Acks()
    for r in RECORDS:
        acks.track(r)
    acks.ack(RECORDS[3])
    acks.ack(RECORDS[1])
    assert acks.lsn == 0  # the first record is not acknowledged yet
    acks.ack(RECORDS[0])
    assert acks.lsn == 100  # the third is still missing
    acks.ack(dict(RECORDS[2]))  # an equal offset, not the same object
    assert acks.lsn == 200


def test_equal_offsets_are_counted_separately() -> None:
    acks = Acks()
    same = off(50, 0, 50)
    acks.track(same)
    acks.track(same)
    acks.ack(same)
    assert acks.lsn == 50 and len(acks) == 1
    acks.ack({"unknown": 1})  # never tracked: ignored
    assert len(acks) == 1


def test_a_committed_offset_releases_what_it_covers() -> None:
    acks = Acks()
    for r in RECORDS:
        acks.track(r)
    acks.committed(100)  # the worker committed the second record's offset
    # Released: every record whose acknowledgement could move the slot no
    # further than 100 (the third too); only the last is still awaited.
    assert acks.lsn == 100 and len(acks) == 1
    acks.ack(RECORDS[0])  # late: changes nothing
    assert acks.lsn == 100
    acks.ack(RECORDS[3])
    assert acks.lsn == 200 and len(acks) == 0
