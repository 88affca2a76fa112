#!/usr/bin/env bash
# The student path of each unit named: release it, solve its student notebook, run it as a
# student would (the runtime installed from the release), grade the zip it hands in.
#
#   scripts/student_path.sh UNIT ... [--out DIR] [--release DIR] [--student ID] [--t4] [--timeout S]
#
# See course/authoring/student_path.py (--help). Paths are read from the current folder.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m course.authoring.student_path "$@"
