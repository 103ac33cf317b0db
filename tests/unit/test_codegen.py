"""The committed generated modules match what the generator makes from the specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.codegen.generate import DEFAULT_SPECS, WIRE, check
from tools.codegen.spec import parse_versions, snake_case, strip_comments


@pytest.mark.skipif(not (DEFAULT_SPECS / "messages").is_dir(), reason="specs not present")
def test_generated_code_is_up_to_date() -> None:
    assert check(DEFAULT_SPECS, WIRE) == []


def test_generated_code_carries_no_prose() -> None:
    # Every spec field has an "about"; none of that text may reach the output.
    produce = (WIRE / "messages" / "produce_request.py").read_text()
    assert "acknowledgments" not in produce
    assert "about" not in produce


def test_strip_comments_keeps_slashes_inside_strings() -> None:
    text = '{"a": "http://x", // comment\n "b": 1}'
    assert strip_comments(text) == '{"a": "http://x", \n "b": 1}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3+", (3, 0x7FFF)), ("1-4", (1, 4)), ("2", (2, 2)), ("none", None), (None, None)],
)
def test_parse_versions(text: str | None, expected: tuple[int, int] | None) -> None:
    assert parse_versions(text) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [("TimeoutMs", "timeout_ms"), ("ProducerIdsInfo", "producer_ids_info"),
     ("ISRVersion", "isr_version"), ("Crc32", "crc32")],
)
def test_snake_case(name: str, expected: str) -> None:
    assert snake_case(name) == expected


def test_check_reports_a_changed_file(tmp_path: Path) -> None:
    import shutil

    if not (DEFAULT_SPECS / "messages").is_dir():
        pytest.skip("specs not present")
    wire = tmp_path / "wire"
    shutil.copytree(WIRE / "messages", wire / "messages")
    shutil.copytree(WIRE / "internal", wire / "internal")
    (wire / "messages" / "produce_request.py").write_text("# edited\n")
    assert check(DEFAULT_SPECS, wire) == ["messages/differs: produce_request.py"]
