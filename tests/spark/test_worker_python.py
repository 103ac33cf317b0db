"""format("odradek") when Spark's Python workers cannot import odradek: the
error names the interpreter and the missing import instead of Spark's bare
DATA_SOURCE_NOT_FOUND. The interpreter without odradek is this one behind a
wrapper whose sitecustomize drops every sys.path entry holding odradek (pyspark
and pyarrow stay importable, as in a virtualenv that lacks only odradek)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from odradek.spark import register
from odradek.spark.workers import import_problem, worker_python

DRIVER = Path(__file__).with_name("worker_check_driver.py")
HIDE = """import os, sys
sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "odradek"))]
"""


@pytest.fixture
def python_without_odradek(tmp_path: Path) -> str:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE)
    wrapper = tmp_path / "python-without-odradek"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{hide}${{PYTHONPATH:+:$PYTHONPATH}}" '
                       f'exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    probe = subprocess.run([str(wrapper), "-c", "import pyspark, pyarrow; import odradek"],
                           capture_output=True, text=True, check=False)
    assert probe.stderr.strip().endswith("No module named 'odradek'"), probe.stderr
    return str(wrapper)


def test_the_check_names_the_missing_import(python_without_odradek: str) -> None:
    assert import_problem(python_without_odradek) == (
        "ModuleNotFoundError: No module named 'odradek'")
    assert import_problem(sys.executable) is None
    assert import_problem("/nonexistent/python3") is not None


def test_register_passes_when_workers_run_this_interpreter(spark: Any) -> None:
    assert worker_python(spark) == (sys.executable, "PYSPARK_PYTHON")
    register(spark)


def test_a_driver_whose_workers_lack_odradek_is_told_which_interpreter_and_why(
        python_without_odradek: str) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": python_without_odradek}
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    proc = subprocess.run([sys.executable, str(DRIVER)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "DATA_SOURCE_NOT_FOUND" in out["load"]  # what Spark alone says
    message = out["register"]
    assert message.startswith(f"Spark's Python workers run {python_without_odradek} "
                              f"(named by PYSPARK_PYTHON), which cannot import odradek: "
                              f"ModuleNotFoundError: No module named 'odradek'.")
    assert "pip install 'odradek[spark]'" in message
