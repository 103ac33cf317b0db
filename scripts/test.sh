#!/usr/bin/env bash
# Install everything the tests need, then run the whole suite: tests, ruff, mypy,
# import-linter. Exits non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
status=0
python3 -m ruff check src tools tests benchmarks || status=1
python3 -m mypy || status=1
lint-imports || status=1
python3 -m pytest "$@" || status=1
exit $status
