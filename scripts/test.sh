#!/usr/bin/env bash
# The test suite: generated files, the CPU paths of every unit, compile checks,
# the autograder and its mutants. Tests that need a GPU are skipped without one.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m course.generate --check
python3 -m pytest -q -ra "$@"
