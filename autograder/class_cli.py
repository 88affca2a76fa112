"""The command line of running a class: release, gradescope, grade-all, slurm, merge.

Each command is a subparser whose `run` takes the parsed arguments and returns the exit
status; autograder/__main__.py registers them beside `grade` and `reference`."""
from __future__ import annotations

import argparse
import math
import os
import sys


def check_out_folder(parser, flag: str, path: str | None) -> None:
    """A folder the command writes into: it need not exist yet, but it must not be a file."""
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        parser.error(f"{flag} {path!r}: expected a folder, and this is a file")


def check_time_limit(parser, seconds: float) -> None:
    if not (math.isfinite(seconds) and seconds > 0):
        parser.error(f"--time-limit {seconds}: expected a number of seconds above 0")


def _release(args) -> int:
    from autograder import release

    try:
        archive = release.write(release.selected_units(args.unit, args.all), args.out, args.repository, args.branch)
    except ValueError as error:
        args.parser.error(str(error))
    print(f"wrote {args.out}/ and {archive}")
    return 0


def _gradescope(args) -> int:
    from autograder import gradescope
    from course.authoring import units

    if not args.out.endswith(".zip"):
        args.parser.error(f"OUT {args.out!r}: expected a path ending in .zip")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        args.parser.error(f"OUT {args.out!r}: the folder to write it in does not exist")
    print(f"wrote {gradescope.write_zip(units.load(args.unit), args.out)}")
    return 0


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected K/N with 0 <= K < N, such as 0/4")
    return int(index), int(count)


def _grade_all(args) -> int:
    from autograder import batch, collect, gradebook
    from course.authoring import units

    check_out_folder(args.parser, "--out", args.out)
    check_out_folder(args.parser, "--work", args.work)
    check_time_limit(args.parser, args.time_limit)
    unit = units.load(args.unit)
    try:
        gpus = batch.parse_gpus(args.gpus)
        submissions = collect.collect(args.submissions, unit)
    except ValueError as error:
        args.parser.error(str(error))
    if args.jobs is not None and args.jobs < 1:
        args.parser.error(f"--jobs {args.jobs}: expected a number of gradings at once, 1 or more")
    if args.shard:
        index, count = args.shard
        submissions = submissions[index::count]
    options = batch.Options(unit, os.path.abspath(args.out), args.sandbox, args.time_limit, args.regrade, args.work)
    progress = batch.grade_all(submissions, options, gpus, args.jobs)
    if not args.no_reports:
        gradebook.write_reports(options.out, unit.name, args.anonymise)
        print(f"wrote {args.out}/gradebook.csv, leaderboard.md, leaderboard.html, failures.md, grading_time.md", file=sys.stderr)
    return 1 if progress.failed else 0


def _merge(args) -> int:
    from autograder import gradebook

    if not os.path.isdir(os.path.join(args.out, gradebook.RESULTS)):
        args.parser.error(f"OUT {args.out!r}: expected the --out folder the shards graded into, "
                          f"with {gradebook.RESULTS}/ in it")
    records = gradebook.write_reports(args.out, args.unit, args.anonymise)
    print(f"merged {len(records)} gradings into {args.out}/gradebook.csv", file=sys.stderr)
    return 0 if records and all(r.results for r in records) else 1


def _slurm(args) -> int:
    import subprocess

    from autograder import collect, gradebook, slurm
    from course.authoring import units

    check_out_folder(args.parser, "--out", args.out)
    try:
        submissions = collect.collect(args.submissions, units.load(args.unit))
    except ValueError as error:
        args.parser.error(str(error))
    count = len(submissions)
    for name in ("gpus_per_task", "cpus_per_task", "per_shard", "jobs"):
        least = 0 if name == "gpus_per_task" else 1
        if getattr(args, name) is not None and getattr(args, name) < least:
            args.parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a whole number, "
                              f"{least} or more")
    for option in args.sbatch_option:  # each is one #SBATCH line of the script
        if "\n" in option or "\r" in option:
            args.parser.error(f"--sbatch-option {option!r}: expected one line, such as --partition=gpu")
    shards = max(1, min(count, math.ceil(count / args.per_shard)))
    job = slurm.Job(os.path.abspath(args.submissions), args.unit, os.path.abspath(args.out), shards,
                    args.gpus_per_task, args.cpus_per_task, args.mem, args.time, args.jobs, args.sandbox,
                    args.sbatch_option)
    submit = slurm.write(job)
    gradebook.write_expected(os.path.abspath(args.out), submissions)  # the merge names any a shard never reached
    print(f"wrote {os.path.dirname(submit)}/grade.sbatch ({shards} tasks), merge.sbatch and submit.sh")
    return subprocess.run(["bash", submit]).returncode if args.submit else 0


def _unit_names() -> list[str]:
    from course.authoring import units

    return [unit.name for unit in units.all_units()]


def add_commands(commands: argparse._SubParsersAction) -> None:
    from autograder.release import DEFAULT_REPOSITORY

    release = commands.add_parser("release", help="write the student bundle (folder and zip)")
    release.add_argument("out", help="folder to write (replaced); OUT.zip is written beside it")
    release.add_argument("--unit", action="append", help="unit to release (repeatable)")
    release.add_argument("--all", action="store_true", help="release every unit (their templates hold the "
                         "solved files each hands the next: do it once every unit is past its deadline)")
    release.add_argument("--repository", default=DEFAULT_REPOSITORY,
                         help="OWNER/NAME on GitHub that the Colab badges open the notebooks from")
    release.add_argument("--branch", default="main", help="branch the Colab badges open")
    release.set_defaults(run=_release, parser=release)

    gradescope = commands.add_parser("gradescope", help="write a Gradescope autograder zip (immediate CPU feedback)")
    gradescope.add_argument("unit", choices=_unit_names())
    gradescope.add_argument("out", help="the zip to write (OUT.zip)")
    gradescope.set_defaults(run=_gradescope, parser=gradescope)

    from autograder.grade_options import TIME_LIMIT
    from autograder.sandbox import MODES

    grade_all = commands.add_parser("grade-all", help="grade a class: a folder of submissions or a Gradescope export")
    grade_all.add_argument("submissions", help="a folder of zips, notebooks or folders, or a Gradescope bulk export")
    grade_all.add_argument("--unit", required=True, choices=_unit_names())
    grade_all.add_argument("--out", required=True, help="folder for results/<id>/, gradebook.csv and the reports")
    grade_all.add_argument("--gpus", default="all", help="all, none, or GPU indices such as 0,1")
    grade_all.add_argument("--jobs", type=int, help="gradings at once (default: one per two cores, bounded by memory)")
    grade_all.add_argument("--regrade", action="store_true", help="grade again what was graded by this grader version")
    grade_all.add_argument("--anonymise", action="store_true", help="the leaderboard names no student")
    grade_all.add_argument("--shard", type=_shard, metavar="K/N", help="grade only every N-th submission from the K-th")
    grade_all.add_argument("--no-reports", action="store_true", help="leave the reports to `merge` (Slurm shards)")
    grade_all.add_argument("--sandbox", choices=MODES, default="auto", help="how student code is confined")
    grade_all.add_argument("--time-limit", type=float, default=TIME_LIMIT, help="seconds for each grading")
    grade_all.add_argument("--work", help="folder for the gradings' temporary folders")
    grade_all.set_defaults(run=_grade_all, parser=grade_all)

    merge = commands.add_parser("merge", help="write a batch's reports from its results (after Slurm shards)")
    merge.add_argument("out", help="the --out folder the shards graded into")
    merge.add_argument("--unit", required=True, choices=_unit_names())
    merge.add_argument("--anonymise", action="store_true", help="the leaderboard names no student")
    merge.set_defaults(run=_merge, parser=merge)

    slurm = commands.add_parser("slurm", help="write a Slurm job array that runs grade-all on shards, then merge")
    slurm.add_argument("submissions", help="as for grade-all, on a filesystem every node sees")
    slurm.add_argument("--unit", required=True, choices=_unit_names())
    slurm.add_argument("--out", required=True, help="as for grade-all, on a filesystem every node sees")
    slurm.add_argument("--per-shard", type=int, default=25, help="submissions per array task")
    slurm.add_argument("--gpus-per-task", type=int, default=1)
    slurm.add_argument("--cpus-per-task", type=int, default=8)
    slurm.add_argument("--mem", default="", help="memory per task (e.g. 64G); default: the partition's")
    slurm.add_argument("--time", default="04:00:00", help="time limit per task")
    slurm.add_argument("--jobs", type=int, help="gradings at once in a task (default: grade-all's)")
    slurm.add_argument("--sandbox", choices=MODES, default="auto")
    slurm.add_argument("--sbatch-option", action="append", default=[], metavar="OPTION",
                       help="an extra #SBATCH line, e.g. --partition=gpu (repeatable)")
    slurm.add_argument("--submit", action="store_true", help="run submit.sh now")
    slurm.set_defaults(run=_slurm, parser=slurm)
