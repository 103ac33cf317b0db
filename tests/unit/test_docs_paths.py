"""The docs cite only what exists: every repository path written in backticks
in ``README.md`` and ``docs/*.md`` names a file or folder of this repository
(paths inside the package are written from ``src/odradek/``, tests from
``tests/``; globs allowed), and every relative link stays inside the
repository and resolves. Runtime paths (``./odradek-data``) and absolute
ones (``/proc/stat``) are not repository paths and are skipped."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASES = (ROOT, ROOT / "src" / "odradek", ROOT / "src", ROOT / "tests")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED = re.compile(r"`([A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]*)+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def cited_paths(text: str) -> list[str]:
    return [p for p in CITED.findall(text)
            if not p.startswith(("./", "/")) and "://" not in p]


def exists(path: str) -> bool:
    if path.startswith("../"):
        return False  # outside the repository: a clone does not have it
    return any(glob.glob(str(base / path)) for base in BASES)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_cited_path_exists(doc: Path) -> None:
    missing = [p for p in cited_paths(doc.read_text()) if not exists(p)]
    assert not missing, f"{doc.name} cites paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_relative_link_resolves_inside_the_repository(doc: Path) -> None:
    bad = []
    for target in LINK.findall(doc.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = (doc.parent / target).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            bad.append(target)
    assert not bad, f"{doc.name} links outside the repository or to nothing: {bad}"


def test_the_checker_sees_a_missing_path_and_a_link_outside() -> None:
    text = "see `src/odradek/no_such_module.py` and `../shared/DESIGN.md`, not `./data`"
    assert cited_paths(text) == ["src/odradek/no_such_module.py", "../shared/DESIGN.md"]
    assert not any(exists(p) for p in cited_paths(text))
    assert exists("broker/net/server.py") and exists("tests/integration/test_cluster*.py")
