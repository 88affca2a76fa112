"""python -m autograder grade SUBMISSION --unit UNIT [--out DIR] [--seed N] [--sandbox MODE] [--tests PATTERN ...]
python -m autograder reference [--unit UNIT ...] [--out DIR] [--sandbox MODE] [--tests PATTERN ...]
python -m autograder {gradescope,grade-all,slurm,merge} ...  (running a class: README, Instructors)

`grade` grades a notebook, folder or zip; `reference` grades the course's own
reference solutions (every unit unless named) and prints their reports.
Student code runs in a sandbox (docs/security.md): `--sandbox auto` takes the best that
works here, and a machine where none works refuses to grade, saying what would make one
work; `--sandbox none` runs it unprotected, for local debugging only. The reference
solutions are the course's own code: `reference` runs them without a sandbox unless asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import tempfile

from autograder import class_cli, report
from autograder.grade import grade
from autograder.grade_options import TIME_LIMIT, GradeOptions
from autograder.sandbox import MODES, SandboxError
from course.spec import units


def _grade_and_report(submission: str, unit, out: str, options: GradeOptions) -> bool:
    result = grade(submission, unit, options)
    path = report.write(result, out)  # first: nothing printed after it can cost the report
    print(report.table(result))
    print(f"wrote {path}")
    return all(t.passed or t.not_run for t in result.tests)


def _exit_on_sigterm(signum, frame) -> None:
    """SIGTERM (kill, timeout, a batch's or Slurm's time limit) unwinds like an error: each
    grading's `finally` ends its sandbox's processes, which run in sessions of their own."""
    raise SystemExit(128 + signum)


def _add_grade(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    grade_parser = commands.add_parser("grade", help="grade one submission")
    grade_parser.add_argument("submission", help="a .ipynb, a folder of sources or the notebook's zip")
    grade_parser.add_argument("--unit", required=True, choices=[u.name for u in units.all_units()])
    grade_parser.add_argument("--out", default="results", help="folder for results.json")
    grade_parser.add_argument("--seed", type=int, help="input seed (secret and random when not given)")
    grade_parser.add_argument(
        "--gpu-lock", help="the GPU's lock files, shared by a batch's gradings (grade-all sets it)"
    )
    grade_parser.add_argument(
        "--no-own-tests",
        action="store_true",
        help="leave out a package's own tests/ (grade-all's perf step: its first step ran them)",
    )
    grade_parser.add_argument(
        "--keep-build",
        metavar="DIR",
        help="store the build into DIR, a new folder, for a later step (grade-all sets it)",
    )
    grade_parser.add_argument(
        "--prebuilt",
        metavar="DIR",
        help="run the build a first step kept in DIR instead of building (grade-all sets it)",
    )
    return grade_parser


def _add_reference(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    reference_parser = commands.add_parser("reference", help="grade the reference solutions")
    reference_parser.add_argument(
        "--unit",
        action="append",
        choices=[u.name for u in units.all_units()],
        help="unit name (repeatable); default: all",
    )
    reference_parser.add_argument("--out", default="results")
    return reference_parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    grade_parser, reference_parser = _add_grade(commands), _add_reference(commands)
    for sub in (grade_parser, reference_parser):
        sub.add_argument(
            "--tests",
            action="append",
            default=[],
            metavar="PATTERN",
            help="grade only the tests matching this fnmatch pattern (repeatable)",
        )
        sub.add_argument("--sandbox", choices=MODES, default="auto", help="how student code is confined")
        sub.add_argument("--time-limit", type=float, default=TIME_LIMIT, help="seconds for the whole grading")
        sub.add_argument("--work", help="folder for the grading's temporary folder (default: the temp folder)")
    reference_parser.set_defaults(sandbox="none")  # trusted code: no sandbox needed
    class_cli.add_commands(commands)
    return parser


def _say_how_confined(args) -> None:
    if args.command == "reference" and args.sandbox == "none":
        print(
            "Grading the course's own reference solutions: trusted code, run without a sandbox "
            "(--sandbox auto confines them too).",
            file=sys.stderr,
        )
    elif args.sandbox == "none":
        print("WARNING: --sandbox none: student code runs unconfined, as this user", file=sys.stderr)


def _grade_references(args, options: GradeOptions) -> int:
    ok = True
    for unit in units.all_units():
        if args.unit and unit.name not in args.unit:
            continue
        with tempfile.TemporaryDirectory() as folder:
            unit.write("solution", folder)
            ok &= _grade_and_report(folder, unit, os.path.join(args.out, unit.name), options)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a student's text may hold what UTF-8 cannot encode
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    if hasattr(args, "run"):
        return args.run(args)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # a grading's sandbox lives in this process
    class_cli.check_out_folder(parser, "--out", args.out)
    class_cli.check_out_folder(parser, "--work", args.work)
    class_cli.check_time_limit(parser, args.time_limit)
    _say_how_confined(args)
    options = GradeOptions(
        sandbox_mode=args.sandbox, time_limit=args.time_limit, work=args.work, tests=tuple(args.tests)
    )
    try:
        if args.command == "reference":
            return _grade_references(args, options)
        if not os.path.exists(args.submission):
            parser.error(f"submission {args.submission!r} does not exist")
        options = dataclasses.replace(
            options,
            seed=args.seed,
            gpu_lock=args.gpu_lock,
            own_tests=not args.no_own_tests,
            keep_build=args.keep_build,
            prebuilt=args.prebuilt,
        )
        _grade_and_report(args.submission, units.load(args.unit), args.out, options)
        return 0
    except SandboxError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
