"""Rewrite ``SERVED`` in ``src/odradek/broker/handlers/__init__.py`` from the modules.

    python -m tools.handler_table           # rewrite the table
    python -m tools.handler_table --check   # exit 1 if it would change

The broker answers ApiVersions from ``SERVED`` and imports a handler module
only on the first request of its API, so the table must name every
``kNN_*.py`` module of the package with the versions its ``@handler``
registers (``registry.handler`` refuses a module that disagrees, and
``tests/unit/broker/test_registry.py`` checks both ways). Run this after
adding a handler module or changing the versions one serves.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "src" / "odradek" / "broker" / "handlers" / "__init__.py"
_TABLE = re.compile(r"^SERVED: .*? = \{\n.*?^\}\n", re.S | re.M)


def table() -> str:
    """The ``SERVED`` literal for the handler modules as they are on disk."""
    from odradek.broker.net import registry

    registry.CHECK_SERVED = False  # the table may be stale: that is why we are here
    try:
        for path in INIT.parent.glob("k[0-9][0-9]_*.py"):
            importlib.import_module(f"odradek.broker.handlers.{path.stem}")
    finally:
        registry.CHECK_SERVED = True
    rows = sorted((reg.api_key, reg.handle.__module__.rpartition(".")[2], reg.min_version,
                   reg.max_version) for reg in registry.HANDLERS.values())
    lines = ["SERVED: dict[int, tuple[str, tuple[int, int]]] = {"]
    lines += [f'    {key}: ("{module}", ({lo}, {hi})),' for key, module, lo, hi in rows]
    return "\n".join(lines) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.handler_table")
    parser.add_argument("--check", action="store_true", help="fail if the table would change")
    args = parser.parse_args(argv)
    text = INIT.read_text(encoding="utf-8")
    if not _TABLE.search(text):
        raise SystemExit(f"handler_table: no SERVED table in {INIT}")
    new = _TABLE.sub(lambda _m: table(), text, count=1)
    if args.check:
        if new != text:
            print("handler_table: SERVED is stale (python -m tools.handler_table)",
                  file=sys.stderr)
            return 1
        return 0
    INIT.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
