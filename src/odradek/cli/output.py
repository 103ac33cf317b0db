"""Tables for people, JSON for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Columns padded to their widest cell; numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(isinstance(r[i], int) for r in rows) and bool(rows) for i in range(len(headers))]
    for n, row in enumerate(cells):
        parts = [
            cell.rjust(widths[i]) if numeric[i] and n else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        print("  ".join(parts).rstrip())


def emit_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
