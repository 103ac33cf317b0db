"""Project-owned overlays: message versions newer than the vendored specs.

``../shared/kafka-protocol/messages`` is a snapshot of Kafka's JSON specs taken
before Kafka 4.0 was released, and a few messages gained versions in 4.0
(Produce 12, Metadata 13, TxnOffsetCommit 5, DescribeGroups 6, DescribeCluster
2, ConsumerGroupDescribe 1, Vote 2). Rather than edit the shared reference
data, each such message has a file ``tools/codegen/overlay/<SpecName>.json``,
written for this project from the facts of the newer version (which KIP, which
fields), that the generator applies to the parsed spec before rendering it.

Format (JSON with ``//`` comments, which say where the facts come from)::

    {
      "name": "MetadataResponse",          // the spec's "name"
      "validVersions": "0-13",             // replaces the spec's; must reach higher
      "addFields": [                       // optional
        {"in": ["Topics"],                 // path of struct field names; [] = top level
         "after": "ErrorCode",             // insert after this field; absent = append
         "field": {"name": ..., "type": ..., "versions": "13+", ...}}
      ]
    }

An added field is an ordinary spec field (names, types, versions, defaults,
tags; no ``about`` prose is needed, and none would reach the output anyway).
Invariants, checked at generation time so a stale overlay fails loudly: the
overlay names a spec that exists, its ``validVersions`` reach beyond the
spec's (once the vendored specs catch up, the overlay must be deleted), every
``in`` path and ``after`` field exists, and no added field is already there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.codegen.spec import SpecError, parse_versions, strip_comments

OVERLAY_DIR = Path(__file__).resolve().parent / "overlay"


@dataclass(frozen=True)
class Overlay:
    """One overlay file: the spec it amends and how."""

    name: str
    valid_versions: str
    add_fields: tuple[dict[str, Any], ...]
    source: str


def load_overlays(folder: Path = OVERLAY_DIR) -> dict[str, Overlay]:
    """Every overlay in ``folder``, by spec name (a missing folder: none)."""
    overlays: dict[str, Overlay] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(strip_comments(path.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise SpecError(f"overlay {path.name}: {exc}") from exc
        name = str(raw["name"])
        if path.stem != name:
            raise SpecError(f"overlay {path.name} names {name}: the file must be {name}.json")
        overlays[name] = Overlay(
            name=name,
            valid_versions=str(raw["validVersions"]),
            add_fields=tuple(raw.get("addFields", ())),
            source=path.name,
        )
    return overlays


def apply_overlay(raw: dict[str, Any], overlay: Overlay) -> None:
    """Amend a parsed spec (``raw``, its JSON) in place with ``overlay``."""
    where = f"overlay {overlay.source}"
    old = parse_versions(str(raw["validVersions"]))
    new = parse_versions(overlay.valid_versions)
    if old is None or new is None:
        raise SpecError(f"{where}: no valid versions")
    if new[1] <= old[1]:
        raise SpecError(
            f"{where}: the spec already has versions {raw['validVersions']}; delete the overlay")
    raw["validVersions"] = overlay.valid_versions
    for addition in overlay.add_fields:
        target: dict[str, Any] = raw
        for struct in addition.get("in", ()):
            found = next((f for f in target.get("fields", ()) if f["name"] == struct), None)
            if found is None:
                raise SpecError(f"{where}: no struct field {struct} in {target['name']}")
            target = found
        fields: list[dict[str, Any]] = target["fields"]
        new_field = addition["field"]
        if any(f["name"] == new_field["name"] for f in fields):
            raise SpecError(f"{where}: {target['name']} already has {new_field['name']}")
        after = addition.get("after")
        if after is None:
            fields.append(new_field)
            continue
        index = next((i for i, f in enumerate(fields) if f["name"] == after), None)
        if index is None:
            raise SpecError(f"{where}: no field {after} in {target['name']}")
        fields.insert(index + 1, new_field)
