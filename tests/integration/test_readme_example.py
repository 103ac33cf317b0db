"""The README's first Python example, run as written in a fresh interpreter:
it prints the record and ends without an error line (a client that outlives
the broker prints librdkafka's ``FAIL ... Disconnected``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def first_python_example() -> str:
    found = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert found, "README.md has no Python example"
    return found.group(1)


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(first_python_example())
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "b'hello'\n"
    assert "FAIL" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert done.stderr.strip() == ""
