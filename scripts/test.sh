#!/usr/bin/env bash
# Install everything the tests need, then run the whole suite: tests, ruff, mypy,
# import-linter. Exits non-zero if any step fails.
#
#   bash scripts/test.sh           the whole suite (CI runs this)
#   bash scripts/test.sh --fast    the inner loop: everything but the tests marked
#                                  slow (Spark, multi-node clusters, chaos)
# Other arguments go to pytest. ODRADEK_TEST_WORKERS sets the number of pytest-xdist
# workers (default 4; 0 runs in this process, for pdb).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# kcat is one of the real clients the integration tests drive (Debian package).
if ! command -v kcat >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null 2>&1 \
        || echo "scripts/test.sh: could not install kcat; its tests will be skipped" >&2
fi
# The web console's browser tests (tests/integration/console) drive Debian's
# headless Chromium through chromedriver.
if { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; } \
        && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
        || echo "scripts/test.sh: could not install chromium; the console's browser tests will be skipped" >&2
fi
# Spark (tests/spark, pipelines/) runs on Java 17.
if ! command -v java >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) >/dev/null 2>&1 \
        || echo "scripts/test.sh: could not install Java; the Spark tests will be skipped" >&2
fi
# The PostgreSQL connectors' tests (tests/integration/connect) start a private
# PostgreSQL 15 server from Debian's binaries.
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] && command -v apt-get >/dev/null 2>&1 \
        && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq postgresql-15) >/dev/null 2>&1 \
        || echo "scripts/test.sh: could not install PostgreSQL 15; its tests will be skipped" >&2
fi
status=0
python3 -m ruff check src tools tests benchmarks pipelines || status=1
python3 -m mypy || status=1
lint-imports || status=1
args=()
marks="not timing"
timing="timing"
for arg in "$@"; do
    if [ "$arg" = "--fast" ]; then
        marks="not slow and not timing"
        timing="timing and not slow"
    else
        args+=("$arg")
    fi
done
# Most tests wait on sockets, so 4 workers keep 2 cores busy; worksteal with the
# long tests first in each worker's share (tests/conftest.py) keeps them busy to
# the end. Tests marked
# timing assert wall-clock bounds: they run afterwards, alone.
# --durations: the slowest tests, so the suite's time (goal: under 10 min) is watched.
python3 -m pytest -n "${ODRADEK_TEST_WORKERS:-4}" --dist worksteal --durations=25 -m "$marks" \
    "${args[@]}" || status=1
# Exit code 5: no timing test among those asked for.
rc=0
python3 -m pytest --durations=5 -m "$timing" "${args[@]}" || rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then status=1; fi
exit $status
