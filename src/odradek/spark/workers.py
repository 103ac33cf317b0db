"""Can Spark's Python workers import odradek? Say so, and why not, by name.

``format("odradek")`` runs in Spark's Python workers, not in the driver's
interpreter: the JVM starts them with the interpreter named by the JVM's
``PYSPARK_PYTHON``, else ``spark.pyspark.python``, else ``python3``. Spark's
data source lookup imports the ``pyspark_*`` packages there; when odradek is not
installed in that interpreter (a virtualenv on the driver, a system ``python3``
on the workers) the lookup finds nothing and Spark reports only
``DATA_SOURCE_NOT_FOUND``. :func:`check_worker_python` runs that interpreter
once, tries ``import odradek.spark`` (which needs pyspark and pyarrow too) and
raises :class:`WorkerPythonError` naming the interpreter, where it was named,
and the import error. :func:`odradek.spark.register` calls it first.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

CHECK_TIMEOUT_S = 120.0
_checked: dict[str, str | None] = {}
"""interpreter → why it cannot import odradek.spark (None: it can); one run each."""


class WorkerPythonError(RuntimeError):
    """Spark's Python workers run an interpreter that cannot import odradek."""


def worker_python(spark: Any) -> tuple[str, str]:
    """(interpreter, what named it) for ``spark``'s Python workers, in Spark's
    order: the JVM's ``PYSPARK_PYTHON``, ``spark.pyspark.python``, ``python3``.
    Without a JVM in this process (Spark Connect) the driver's environment
    stands in for the JVM's."""
    env: str | None = None
    try:
        env = spark.sparkContext._jvm.java.lang.System.getenv("PYSPARK_PYTHON")
    except Exception:  # Spark Connect, or no gateway: no JVM environment to ask
        env = os.environ.get("PYSPARK_PYTHON")
    if env:
        return env, "PYSPARK_PYTHON"
    conf = spark.conf.get("spark.pyspark.python", None)
    if conf:
        return str(conf), "spark.pyspark.python"
    return "python3", "Spark's default"


def import_problem(python: str) -> str | None:
    """Why ``python`` cannot ``import odradek.spark`` (its last error line), or
    None if it can. Runs the interpreter once per process and remembers."""
    if python in _checked:
        return _checked[python]
    problem: str | None
    try:
        proc = subprocess.run([python, "-c", "import odradek.spark"], capture_output=True,
                              text=True, timeout=CHECK_TIMEOUT_S, check=False)
    except OSError as exc:
        problem = f"it cannot be run ({exc.strerror or exc})"
    except subprocess.TimeoutExpired:
        problem = f"'import odradek.spark' did not finish within {CHECK_TIMEOUT_S:g} s"
    else:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        problem = None if proc.returncode == 0 else (
            lines[-1] if lines else f"it exited with status {proc.returncode}")
    _checked[python] = problem
    return problem


def check_worker_python(spark: Any) -> None:
    """Raise :class:`WorkerPythonError` unless ``spark``'s Python workers can
    import odradek; the message names the interpreter, what named it, the import
    error and the fix."""
    python, origin = worker_python(spark)
    problem = import_problem(python)
    if problem is None:
        return
    raise WorkerPythonError(
        f"Spark's Python workers run {python} (named by {origin}), which cannot import "
        f"odradek: {problem}. format(\"odradek\") runs in those workers (Spark reports "
        f"DATA_SOURCE_NOT_FOUND when they lack it): install it there "
        f"({python} -m pip install 'odradek[spark]'), or set PYSPARK_PYTHON / "
        f"spark.pyspark.python to an interpreter that has it before the session starts.")
