"""Kafka's offsets-behind-latest numbers from a query progress's source entry."""

from __future__ import annotations

import json
from types import SimpleNamespace

from odradek.spark.progress import offsets_behind_latest


def test_the_numbers_are_kafkas_over_the_end_offsets_partitions() -> None:
    source = {"latestOffset": {"t": {"0": 100, "1": 50, "2": 7}, "u": {"0": 9}},
              "endOffset": {"t": {"0": 40, "1": 50}, "u": {"0": 3}}}
    assert offsets_behind_latest(source) == {
        "avgOffsetsBehindLatest": "22.0", "maxOffsetsBehindLatest": "60",
        "minOffsetsBehindLatest": "0"}


def test_a_listeners_source_progress_holds_json_text() -> None:
    event = SimpleNamespace(latestOffset=json.dumps({"t": {"0": 5}}),
                            endOffset=json.dumps({"t": {"0": 2}}))
    assert offsets_behind_latest(event) == {
        "avgOffsetsBehindLatest": "3.0", "maxOffsetsBehindLatest": "3",
        "minOffsetsBehindLatest": "3"}


def test_nothing_to_say_without_a_latest_offset_or_for_another_source() -> None:
    assert offsets_behind_latest({"endOffset": {"t": {"0": 1}}}) is None
    assert offsets_behind_latest({"latestOffset": None, "endOffset": {"t": {"0": 1}}}) is None
    assert offsets_behind_latest({"latestOffset": "17", "endOffset": "12"}) is None
    assert offsets_behind_latest({"latestOffset": {"t": {"1": 4}},
                                  "endOffset": {"t": {"0": 1}}}) is None  # partition gone
