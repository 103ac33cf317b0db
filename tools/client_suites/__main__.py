"""Run client libraries' own integration tests against Odradek.

    python -m tools.client_suites fetch     # install step: kafka-python's sdist from PyPI
    python -m tools.client_suites run       # every selection below, counts at the end
    python -m tools.client_suites run --suite kafka-python --part security
    python -m tools.client_suites run --security sasl=on,tls=on,acl=on -- -x -k plain

What runs (:data:`SUITES`):

* kafka-python (the version installed, 3.0.12): its ``test/`` tree is in its
  PyPI sdist, which ``fetch`` downloads with pip and unpacks under
  ``.client-suites/`` (ignored by git). That is the install step; ``run`` never
  downloads, and says to run ``fetch`` when the tree is not there. Its
  ``KafkaFixture.instance`` is replaced by ``kafka_python_plugin`` with one
  that starts ``odradek serve``.
* confluent-kafka-python: its tests are not in the sdist, and this repository
  does not carry another project's code, so ``fetch --confluent-git DIR``
  takes the files the runner needs (:data:`CONFLUENT_FILES`) at
  :data:`CONFLUENT_COMMIT` from a git clone of confluent-kafka-python (DIR is
  its ``.git`` or a bare clone) into ``.client-suites/``; without them its
  selections are left out, saying so. ``confluent_plugin`` gives them their
  ``kafka_cluster``.

Each suite has a ``security`` part (the tests issue 35 names: kafka-python's
SASL and SSL integration tests, confluent-kafka-python's ACL and SCRAM admin
tests) and a ``plaintext`` part (tests of the same suites that need no
security, which show the runner and the fixtures work). Security tests whose
feature is switched off in :mod:`tools.client_suites.security` are skipped
with the reason. The runner prints each selection's counts and a closing
``N passed, N failed, N skipped`` line; it exits 1 if any test failed or
errored.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tools.client_suites.broker import ENV_SECURITY, resolve_switches
from tools.client_suites.cluster import ENV_CLUSTER, ENV_CONTROLLERS

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ODRADEK_SUITES_CACHE", ROOT / ".client-suites"))
CONFLUENT_COMMIT = "8b1c7a613434eee3d0e1287d624d7af04932f410"
"""confluent-kafka-python's master after v2.15.0: the sources of the 2.16 line
this project pins (the 2.16.1 tag was not in the clone at hand)."""
CONFLUENT_FILES = (
    "LICENSE", "tests/__init__.py", "tests/common/__init__.py",
    "tests/integration/__init__.py", "tests/integration/admin",
    "tests/integration/consumer", "tests/integration/producer",
)
"""What ``fetch --confluent-git`` extracts: files and whole folders."""
AIOKAFKA_COMMIT = "672947afe85c91b7d953f0259e69837a711d3246"
"""aiokafka's v0.14.0 tag (the version installed): its tests are in neither
its sdist nor its wheel."""
AIOKAFKA_FILES = ("LICENSE", "tests")


@dataclass(frozen=True)
class Selection:
    suite: str
    part: str
    plugin: str
    files: tuple[str, ...]
    needs: dict[str, str]
    """Test node id (file::name) → the feature it needs beyond its transport;
    the plugin skips it while the feature is off."""
    deselect: tuple[str, ...] = ()
    """Node ids left out (they are in another selection)."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment the suite's tests read (``TEST_CONSUMER_GROUP_PROTOCOL``)."""


KP_ACLS = "test/integration/test_admin_integration.py::test_create_describe_delete_acls"
CONFLUENT_INTEGRATION = ("tests/integration/admin", "tests/integration/consumer",
                         "tests/integration/producer")
"""confluent-kafka-python's tests that run against ``kafka_cluster`` (the
schema-registry, serialization and share-consumer folders need a schema
registry, trivup or Kafka 4.2's share groups)."""
AIOKAFKA_INTEGRATION = tuple(f"tests/test_{name}.py" for name in (
    "admin", "client", "conn", "consumer", "coordinator", "pep492", "producer", "sasl",
    "sender", "transactional_consumer", "transactional_producer"))
"""aiokafka's modules with tests on its ``kafka_server`` (the plugin runs only those)."""
CONFLUENT_NEEDS = {
    "tests/integration/admin/test_basic_operations.py::test_basic_operations": "acl",
    "tests/integration/admin/test_user_scram_credentials.py::test_user_scram_credentials": "sasl",
}

SUITES: tuple[Selection, ...] = (
    Selection("kafka-python", "security", "tools.client_suites.kafka_python_plugin", (
        "test/integration/test_sasl_integration.py",
        "test/integration/test_ssl_integration.py",
        KP_ACLS,
    ), {KP_ACLS: "acl"}),
    Selection("kafka-python", "plaintext", "tools.client_suites.kafka_python_plugin", (
        "test/integration/test_producer_integration.py",
        "test/integration/test_admin_integration.py",
    ), {}, deselect=(KP_ACLS,)),
    Selection("confluent-kafka", "security", "tools.client_suites.confluent_plugin", (
        "tests/integration/admin/test_basic_operations.py",
        "tests/integration/admin/test_user_scram_credentials.py",
    ), {
        "tests/integration/admin/test_basic_operations.py::test_basic_operations": "acl",
        "tests/integration/admin/test_user_scram_credentials.py::"
        "test_user_scram_credentials": "sasl",
    }),
    Selection("confluent-kafka", "plaintext", "tools.client_suites.confluent_plugin", (
        "tests/integration/admin/test_list_offsets.py",
        "tests/integration/admin/test_delete_records.py",
    ), {}),
    # The whole integration parts (issue 38): every test of the suite that runs
    # against its broker fixture, security ones included (skipped while their
    # feature is off).
    Selection("kafka-python", "integration", "tools.client_suites.kafka_python_plugin", (
        "test/integration",
    ), {KP_ACLS: "acl"}),
    Selection("confluent-kafka", "integration", "tools.client_suites.confluent_plugin",
              CONFLUENT_INTEGRATION, CONFLUENT_NEEDS),
    Selection("confluent-kafka", "integration-kip848", "tools.client_suites.confluent_plugin",
              CONFLUENT_INTEGRATION, CONFLUENT_NEEDS,
              env=(("TEST_CONSUMER_GROUP_PROTOCOL", "consumer"),)),
    Selection("aiokafka", "integration", "tools.client_suites.aiokafka_plugin",
              AIOKAFKA_INTEGRATION, {}),
)
PARTS = ("security", "plaintext", "integration", "integration-kip848")


def kafka_python_tree() -> Path:
    version = importlib.metadata.version("kafka-python")
    return CACHE / f"kafka_python-{version}"


def suite_root(suite: str) -> Path:
    if suite == "kafka-python":
        return kafka_python_tree()
    if suite == "aiokafka":
        return CACHE / "aiokafka"
    return CACHE / "confluent-kafka-python"


GIT_SOURCES = {
    "confluent-kafka": (CONFLUENT_COMMIT, CONFLUENT_FILES, "--confluent-git"),
    "aiokafka": (AIOKAFKA_COMMIT, AIOKAFKA_FILES, "--aiokafka-git"),
}
"""Suite → (commit, paths, fetch option): the suites taken from a git clone."""


def fetch_confluent(git_dir: Path) -> int:
    """Extract :data:`CONFLUENT_FILES` at :data:`CONFLUENT_COMMIT` from a clone."""
    return fetch_git("confluent-kafka", git_dir)


def fetch_git(suite: str, git_dir: Path) -> int:
    """Extract a suite's paths at its commit (:data:`GIT_SOURCES`) from a clone."""
    commit, files, _ = GIT_SOURCES[suite]
    target = suite_root(suite)
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", commit,
                              *files], capture_output=True, check=False)
    if archive.returncode:
        print(f"cannot read {commit[:12]} from {git_dir}: "
              f"{archive.stderr.decode(errors='replace').strip()}", file=sys.stderr)
        return 1
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive.stdout)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(target, filter="data")
    print(f"unpacked {target}")
    return 0


def fetch() -> int:
    """Download kafka-python's sdist (the installed version) and unpack its tests."""
    version = importlib.metadata.version("kafka-python")
    tree = kafka_python_tree()
    if (tree / "test" / "__init__.py").is_file():
        print(f"{tree} is there")
        return 0
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"kafka-python=={version}", "-d", tmp],
                       check=True)
        (archive,) = Path(tmp).glob("kafka_python-*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(CACHE, filter="data")
    # ``test`` has no __init__.py in the sdist; without one the standard library's
    # ``test`` package shadows it (a regular package wins over a namespace one).
    (tree / "test" / "__init__.py").touch()
    # The sdist leaves out test/service.py, which test/integration/fixtures.py
    # imports two classes from: those that spawn Kafka, never used here (the
    # plugin replaces KafkaFixture.instance).
    service = tree / "test" / "service.py"
    if not service.exists():
        service.write_text(SERVICE_STANDIN)
    print(f"unpacked {tree}")
    return 0


SERVICE_STANDIN = '''"""Written by tools/client_suites (Odradek): the sdist has no test/service.py.
Kafka is never spawned here; these names only satisfy fixtures.py's import."""


class ExternalService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("not available: the broker is Odradek's (tools/client_suites)")


class SpawnedService(ExternalService):
    pass
'''


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    def add(self, other: Counts) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.errors += other.errors


def read_junit(path: Path) -> Counts:
    counts = Counts()
    if not path.exists():
        return counts
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if "failure" in tags:
            counts.failed += 1
        elif "error" in tags:
            counts.errors += 1
        elif "skipped" in tags:
            counts.skipped += 1
        else:
            counts.passed += 1
    return counts


def run_selection(sel: Selection, switches: dict[str, str], kafka_version: str,
                  extra: list[str], cluster: int = 1, controllers: str = "combined") -> Counts:
    root = suite_root(sel.suite)
    if sel.suite in GIT_SOURCES and not root.is_dir():
        print(f"== {sel.suite} / {sel.part}: left out ({root} is missing: run "
              f"`python -m tools.client_suites fetch {GIT_SOURCES[sel.suite][2]} DIR`)",
              flush=True)
        return Counts()
    if not root.is_dir():
        raise SystemExit(f"{root} is missing: run `python -m tools.client_suites fetch` first "
                         "(the install step)")
    env = dict(os.environ)
    # The Odradek under test: the one on PYTHONPATH if given, else this tree's.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [env.get("PYTHONPATH")]), str(ROOT / "src")])
    env["KAFKA_VERSION"] = kafka_version
    env[ENV_SECURITY] = ",".join(f"{k}={v}" for k, v in switches.items())
    env["ODRADEK_SUITES_NEEDS"] = ";".join(f"{k}={v}" for k, v in sel.needs.items())
    env[ENV_CLUSTER] = str(cluster)
    env[ENV_CONTROLLERS] = controllers
    env.update(sel.env)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", sel.plugin,
               "-p", "tools.client_suites.needs", "-p", "no:cacheprovider",
               "--rootdir", str(root), "-c", str(_ini(root, tmp)), "-q", "-rs",
               "--timeout", "300", "--junitxml", str(junit), "-W", "ignore::DeprecationWarning",
               *sel.files, *(f"--deselect={d}" for d in sel.deselect), *extra]
        where = f"{cluster}-node cluster ({controllers} controllers)" if cluster > 1 \
            else "one node"
        print(f"== {sel.suite} / {sel.part} on {where}: {' '.join(sel.files)}"
              + "".join(f" {k}={v}" for k, v in sel.env), flush=True)
        subprocess.run(cmd, cwd=root, env=env, check=False)
        return read_junit(junit)


def _ini(root: Path, tmp: str) -> Path:
    """A pytest ini of the suite's own settings where it has them (kafka-python's
    pyproject), else an empty one, so this repository's are not picked up."""
    own = root / "pyproject.toml"
    if own.exists() and "[tool.pytest.ini_options]" in own.read_text():
        return own
    ini = Path(tmp) / "pytest.ini"
    ini.write_text("[pytest]\n")
    return ini


def run(args: argparse.Namespace) -> int:
    switches = resolve_switches(args.security)
    print("security: " + ", ".join(f"{k} {v}" for k, v in switches.items())
          + "  (tools/client_suites/security.py)")
    total = Counts()
    lines = []
    for sel in SUITES:
        if args.suite not in ("all", sel.suite):
            continue
        if args.part not in ("all", sel.part) or (args.part == "all" and sel.part.startswith(
                "integration")):
            continue  # "all" is the issue-35 selections; the integration parts are asked for
        counts = run_selection(sel, switches, args.kafka_version, args.pytest_args,
                               args.cluster, args.controllers)
        total.add(counts)
        lines.append(f"{sel.suite:16} {sel.part:18} {counts.passed:4} passed "
                     f"{counts.failed:4} failed {counts.skipped:4} skipped "
                     f"{counts.errors:4} errors")
    print("\n".join(["", "client suites against Odradek:", *lines]))
    print(f"{total.passed} passed, {total.failed + total.errors} failed, "
          f"{total.skipped} skipped")
    return 1 if total.failed or total.errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.client_suites",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    verbs = parser.add_subparsers(dest="verb", required=True)
    fetch_p = verbs.add_parser("fetch", help="install step: download kafka-python's sdist "
                               "(tests); with --confluent-git, confluent's tests from a clone")
    fetch_p.add_argument("--confluent-git", type=Path, metavar="DIR",
                         help="a git clone of confluent-kafka-python (its .git, or bare)")
    fetch_p.add_argument("--aiokafka-git", type=Path, metavar="DIR",
                         help="a git clone of aiokafka (its .git, or bare)")
    run_p = verbs.add_parser("run", help="run the suites against odradek serve")
    run_p.add_argument("--suite", choices=("all", "kafka-python", "confluent-kafka",
                                           "aiokafka"), default="all")
    run_p.add_argument("--part", choices=("all", *PARTS), default="all",
                       help="all: the security and plaintext selections; the integration "
                       "parts run when named")
    run_p.add_argument("--cluster", type=int, default=1, metavar="N",
                       help="run against an N-node Odradek cluster (PLAINTEXT, the suites' "
                       "topics at RF=3, min.insync.replicas=2)")
    run_p.add_argument("--controllers", choices=("combined", "separate"), default="combined",
                       help="with --cluster: every node broker and controller (combined), "
                       "or three controller-only nodes besides the N brokers")
    run_p.add_argument("--security", default="", metavar="FEATURE=auto|on|off,...",
                       help="override tools/client_suites/security.py's switches")
    run_p.add_argument("--kafka-version", default="4.0.0",
                       help="KAFKA_VERSION the suites see (default 4.0.0)")
    run_p.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)
    if args.verb == "fetch":
        done = fetch()
        if done == 0 and args.confluent_git is not None:
            done = fetch_confluent(args.confluent_git)
        if done == 0 and args.aiokafka_git is not None:
            done = fetch_git("aiokafka", args.aiokafka_git)
        return done
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
