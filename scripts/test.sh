#!/usr/bin/env bash
# The test suite: generated files, the CPU paths of every unit, compile checks,
# the autograder and its mutants. Tests that need a GPU are skipped without one.
# Six workers on two cores: most of a grading's time is spent starting processes, waiting on
# time limits and linking, not compiling; four workers left the cores idle half the run
# (PYTEST_WORKERS=0 runs serially). Work
# stealing hands a worker whose queue ran dry the other's pending builds: with plain load
# balancing the last tests (mutant builds) often ran on one core while the other idled.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m course.authoring.generate --check
ruff check . && ruff format --check .
# The sandboxed builds read the compiler cache (autograder/compiler_cache.py): what the trusted
# builds write there must be readable by the sandboxes' uids.
export CCACHE_UMASK="${CCACHE_UMASK:-022}"
# ATen.h and torch/extension.h parsed once for every C++ compile of the suite (autograder/precompiled_header.py).
export COURSE_PRECOMPILED_HEADERS="${COURSE_PRECOMPILED_HEADERS-${XDG_CACHE_HOME:-$HOME/.cache}/course-precompiled-headers}"
workers="${PYTEST_WORKERS:-6}"
parallel=()
if [ "$workers" != "0" ] && python3 -c "import xdist" 2>/dev/null; then parallel=(-n "$workers" --dist worksteal); fi
python3 -m pytest -q -ra --durations=20 "${parallel[@]}" "$@"
