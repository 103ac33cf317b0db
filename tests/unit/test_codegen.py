"""The committed generated modules match what the generator makes from the specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.codegen.generate import DEFAULT_SPECS, WIRE, check
from tools.codegen.spec import parse_versions, snake_case, strip_comments

NO_SPECS = (f"Kafka's message specs are not at {DEFAULT_SPECS} (a checkout not beside "
            "shared/): the generated code was not compared with them")


@pytest.mark.skipif(not (DEFAULT_SPECS / "messages").is_dir(), reason=NO_SPECS)
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
        pytest.skip(NO_SPECS)
    wire = tmp_path / "wire"
    shutil.copytree(WIRE / "messages", wire / "messages")
    shutil.copytree(WIRE / "internal", wire / "internal")
    (wire / "messages" / "produce_request.py").write_text("# edited\n")
    assert check(DEFAULT_SPECS, wire) == ["messages/differs: produce_request.py"]


# -- overlays (tools/codegen/overlay) ---------------------------------------------


def _overlay(tmp_path: Path, name: str, body: str) -> Path:
    folder = tmp_path / "overlay"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(body)
    return folder


def _spec(tmp_path: Path, name: str, body: str) -> Path:
    folder = tmp_path / "specs" / "messages"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(body)
    return folder


SPEC = """// a spec
{ "apiKey": 90, "type": "response", "name": "DemoResponse", "validVersions": "0-1",
  "flexibleVersions": "0+", "fields": [
    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
    { "name": "Items", "type": "[]Item", "versions": "0+", "fields": [
      { "name": "Id", "type": "int32", "versions": "0+" }]}
]}"""


def test_overlay_raises_versions_and_inserts_fields_in_place(tmp_path: Path) -> None:
    from tools.codegen.generate import _load_messages
    from tools.codegen.overlay import load_overlays

    specs = _spec(tmp_path, "DemoResponse", SPEC)
    overlays = load_overlays(_overlay(tmp_path, "DemoResponse", """// facts: a KIP
{"name": "DemoResponse", "validVersions": "0-2", "addFields": [
  {"in": [], "after": "ErrorCode", "field": {"name": "ErrorMessage", "type": "string",
   "versions": "2+", "nullableVersions": "2+", "default": "null"}},
  {"in": ["Items"], "field": {"name": "Weight", "type": "int8", "versions": "2+"}}]}"""))
    [spec] = _load_messages(specs, overlays)
    assert spec.valid_versions == (0, 2)
    assert [f.name for f in spec.fields] == ["ErrorCode", "ErrorMessage", "Items"]
    assert [f.name for f in spec.fields[2].fields] == ["Id", "Weight"]
    assert spec.source == "DemoResponse.json and overlay/DemoResponse.json"


@pytest.mark.parametrize(("overlay", "error"), [
    ('{"name": "DemoResponse", "validVersions": "0-1"}', "delete the overlay"),
    ('{"name": "DemoResponse", "validVersions": "0-2", "addFields": [{"in": ["Nope"],'
     ' "field": {"name": "X", "type": "int8", "versions": "2+"}}]}', "no struct field Nope"),
    ('{"name": "DemoResponse", "validVersions": "0-2", "addFields": [{"after": "Nope",'
     ' "field": {"name": "X", "type": "int8", "versions": "2+"}}]}', "no field Nope"),
    ('{"name": "DemoResponse", "validVersions": "0-2", "addFields": [{"in": [],'
     ' "field": {"name": "ErrorCode", "type": "int16", "versions": "2+"}}]}', "already has"),
])
def test_a_stale_or_wrong_overlay_fails_loudly(tmp_path: Path, overlay: str, error: str) -> None:
    from tools.codegen.generate import _load_messages
    from tools.codegen.overlay import load_overlays
    from tools.codegen.spec import SpecError

    specs = _spec(tmp_path, "DemoResponse", SPEC)
    with pytest.raises(SpecError, match=error):
        _load_messages(specs, load_overlays(_overlay(tmp_path, "DemoResponse", overlay)))


def test_an_overlay_for_a_missing_spec_fails(tmp_path: Path) -> None:
    from tools.codegen.generate import _load_messages
    from tools.codegen.overlay import load_overlays
    from tools.codegen.spec import SpecError

    specs = _spec(tmp_path, "DemoResponse", SPEC)
    overlays = load_overlays(_overlay(tmp_path, "GoneResponse",
                                      '{"name": "GoneResponse", "validVersions": "0-3"}'))
    with pytest.raises(SpecError, match="GoneResponse"):
        _load_messages(specs, overlays)


def test_the_committed_overlays_bring_kafka_40s_versions() -> None:
    from odradek.wire.messages.api_table import APIS

    assert {key: APIS[key][3][1] for key in (0, 3, 15, 28, 52, 60, 69)} == {
        0: 12, 3: 13, 15: 6, 28: 5, 52: 2, 60: 2, 69: 1}


def test_metadata_record_table_lists_every_metadata_record_class() -> None:
    import importlib
    import pkgutil

    import odradek.wire.internal as internal
    from odradek.wire.internal.record_table import METADATA_RECORDS
    from odradek.wire.schema import Message

    found = {}
    for info in pkgutil.iter_modules(internal.__path__):
        module = importlib.import_module(f"{internal.__name__}.{info.name}")
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name)
            is_message = isinstance(cls, type) and issubclass(cls, Message)
            if is_message and cls.MESSAGE_TYPE == "metadata":
                found[cls.API_KEY] = (info.name, name)
    assert found == METADATA_RECORDS
