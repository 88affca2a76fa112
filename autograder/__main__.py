"""python -m autograder grade SUBMISSION --unit UNIT [--out DIR] [--seed N]
python -m autograder reference [--unit UNIT ...] [--out DIR]

`grade` grades a notebook, folder or zip; `reference` grades the course's own
reference solutions (every unit unless named) and prints their reports.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

from autograder import report
from autograder.grade import grade
from course.authoring import units


def _grade_and_report(submission: str, unit, out: str, seed: int | None) -> bool:
    result = grade(submission, unit, seed=seed)
    print(report.table(result))
    path = report.write(result, out)
    print(f"wrote {path}")
    return all(t.passed or t.not_run for t in result.tests)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    grade_parser = commands.add_parser("grade", help="grade one submission")
    grade_parser.add_argument("submission", help="a .ipynb, a folder of sources or the notebook's zip")
    grade_parser.add_argument("--unit", required=True, choices=[u.name for u in units.all_units()])
    grade_parser.add_argument("--out", default="results", help="folder for results.json")
    grade_parser.add_argument("--seed", type=int, help="input seed (secret and random when not given)")
    reference_parser = commands.add_parser("reference", help="grade the reference solutions")
    reference_parser.add_argument("--unit", action="append", help="unit name (repeatable); default: all")
    reference_parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)

    if args.command == "grade":
        if not os.path.exists(args.submission):
            parser.error(f"submission {args.submission!r} does not exist")
        _grade_and_report(args.submission, units.load(args.unit), args.out, args.seed)
        return 0
    ok = True
    for unit in units.all_units():
        if args.unit and unit.name not in args.unit:
            continue
        with tempfile.TemporaryDirectory() as folder:
            unit.write("solution", folder)
            ok &= _grade_and_report(folder, unit, os.path.join(args.out, unit.name), None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
