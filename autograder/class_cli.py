"""The command line of running a class: release, gradescope, grade-all, slurm, merge.

Each command is a subparser whose `run` takes the parsed arguments and returns the exit
status; autograder/__main__.py registers them beside `grade` and `reference`."""
from __future__ import annotations

import argparse


def _release(args) -> int:
    from autograder import release

    try:
        archive = release.write(release.selected_units(args.unit), args.out, args.repository, args.branch)
    except ValueError as error:
        args.parser.error(str(error))
    print(f"wrote {args.out}/ and {archive}")
    return 0


def _gradescope(args) -> int:
    from autograder import gradescope
    from course.authoring import units

    if not args.out.endswith(".zip"):
        args.parser.error(f"OUT {args.out!r}: expected a path ending in .zip")
    print(f"wrote {gradescope.write_zip(units.load(args.unit), args.out)}")
    return 0


def _unit_names() -> list[str]:
    from course.authoring import units

    return [unit.name for unit in units.all_units()]


def add_commands(commands: argparse._SubParsersAction) -> None:
    from autograder.release import DEFAULT_REPOSITORY

    release = commands.add_parser("release", help="write the student bundle (folder and zip)")
    release.add_argument("out", help="folder to write (replaced); OUT.zip is written beside it")
    release.add_argument("--unit", action="append", help="unit to release (repeatable); default: all")
    release.add_argument("--repository", default=DEFAULT_REPOSITORY,
                         help="OWNER/NAME on GitHub that the Colab badges open the notebooks from")
    release.add_argument("--branch", default="main", help="branch the Colab badges open")
    release.set_defaults(run=_release, parser=release)

    gradescope = commands.add_parser("gradescope", help="write a Gradescope autograder zip (immediate CPU feedback)")
    gradescope.add_argument("unit", choices=_unit_names())
    gradescope.add_argument("out", help="the zip to write (OUT.zip)")
    gradescope.set_defaults(run=_gradescope, parser=gradescope)
