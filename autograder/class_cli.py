"""The command line of running a class: gradescope, grade-all, slurm, merge (the student
bundle is the authoring tools': python -m course.authoring.release).

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


def _gradescope(args) -> int:
    from autograder import gradescope
    from course.spec import units

    if not args.out.endswith(".zip"):
        args.parser.error(f"OUT {args.out!r}: expected a path ending in .zip")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        args.parser.error(f"OUT {args.out!r}: the folder to write it in does not exist")
    try:
        print(f"wrote {gradescope.write_zip(units.load(args.unit), args.out)}")
    except FileNotFoundError as error:  # an installed grader, without the project's pyproject.toml
        args.parser.error(str(error))
    return 0


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected K/N with 0 <= K < N, such as 0/4")
    return int(index), int(count)


def _roster(args) -> list[dict] | None:
    from autograder.roster import read_roster

    try:
        return read_roster(args.roster) if args.roster else None
    except ValueError as error:
        args.parser.error(str(error))


def _late_policy(args):
    """--late-policy FILE read, or --due WHEN as a policy with a deadline alone, or None."""
    from autograder import late_policy

    if args.late_policy and args.due:
        args.parser.error(f"--due {args.due!r}: expected --due or --late-policy, not both (put it in the file)")
    if args.late_policy:
        try:
            return late_policy.read_policy(args.late_policy)
        except ValueError as error:
            args.parser.error(str(error))
    if args.due is None:
        return None
    try:
        return late_policy.from_due(args.due)
    except ValueError:
        args.parser.error(
            f"--due {args.due!r}: expected a date and time such as 2031-03-01T23:59 or 2031-03-01T23:59-05:00"
        )


def _reports(args, out: str, unit: str, roster, policy) -> list | None:
    """The class's reports written; None, with the reason on stderr, where answers.csv holds a
    score that cannot be folded in (the reports stay as they were)."""
    from autograder import gradebook

    try:
        return gradebook.write_reports(out, unit, args.anonymise, roster, policy)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def _check_unit_of(args, out: str) -> None:
    """OUT graded for another unit: its grades are not this unit's."""
    from autograder import gradebook

    others = gradebook.other_units(out, args.unit)
    if others:
        args.parser.error(
            f"--unit {args.unit}: {out!r} holds gradings of {', '.join(sorted(others))}; "
            f"expected --unit {' or '.join(sorted(others))}, or another --out folder"
        )


def _check_gpus(args, unit, gpus: list[str]) -> None:
    """A unit with GPU cases graded without a GPU would score them all 0: only when asked."""
    from autograder import batch

    cases = batch.gpu_cases(unit) if not (gpus or args.cpu_only) else []
    if cases:
        args.parser.error(
            f"--gpus {args.gpus}: {unit.name} has {len(cases)} GPU cases and no GPU is visible here; "
            f"grade on a GPU machine, or pass --cpu-only to grade its CPU cases alone and report "
            f"the GPU cases as not run: no GPU"
        )


def _selected(args, submissions: list) -> list:
    """The submissions `--only` names (each graded again), or all; an id no submission has is an error."""
    if not args.only:
        return submissions
    ids = {s.id for s in submissions}
    unknown = [name for name in args.only if name not in ids]
    if unknown:
        args.parser.error(
            f"--only {unknown[0]}: no submission has this id; expected one of "
            f"{', '.join(sorted(ids)[:20]) or 'none: no submission was found'}"
        )
    return [s for s in submissions if s.id in args.only]


def _grade_all(args) -> int:
    from autograder import batch, collect, gradebook
    from course.spec import units

    check_out_folder(args.parser, "--out", args.out)
    check_out_folder(args.parser, "--work", args.work)
    check_time_limit(args.parser, args.time_limit)
    unit = units.load(args.unit)
    roster, policy = _roster(args), _late_policy(args)
    from autograder.sandbox import SandboxError, check_works

    try:
        check_works(args.sandbox)  # student code: no grading starts where none can be confined
    except SandboxError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        gpus = batch.parse_gpus(args.gpus)
        submissions = collect.collect(args.submissions, unit)
    except ValueError as error:
        args.parser.error(str(error))
    if args.jobs is not None and args.jobs < 1:
        args.parser.error(f"--jobs {args.jobs}: expected a number of gradings at once, 1 or more")
    _check_gpus(args, unit, gpus)
    _check_unit_of(args, args.out)
    graded = _selected(args, submissions)
    gradebook.write_expected(os.path.abspath(args.out), submissions)  # the class as handed in now
    if args.shard:
        index, count = args.shard
        graded = graded[index::count]
    options = batch.Options(
        unit,
        os.path.abspath(args.out),
        args.sandbox,
        args.time_limit,
        args.regrade or bool(args.only),
        args.work,
        args.cpu_only,
    )
    progress = batch.grade_all(graded, options, gpus, args.jobs)
    if not args.no_reports:  # stopped too: the reports then list what it stopped as not graded
        if _reports(args, options.out, unit.name, roster, policy) is None:
            return 2
        print(
            f"wrote {args.out}/gradebook.csv, answers.csv, leaderboard.md, leaderboard.html, failures.md, grading_time.md",
            file=sys.stderr,
        )
    if progress.stopped:
        print("stopped: run the same command again to grade what was stopped or not reached", file=sys.stderr)
        return 128 + progress.stopped
    return 1 if progress.failed or progress.busy else 0


def _merge(args) -> int:
    from autograder import gradebook

    if not os.path.isdir(os.path.join(args.out, gradebook.RESULTS)):
        args.parser.error(
            f"OUT {args.out!r}: expected the --out folder the shards graded into, with {gradebook.RESULTS}/ in it"
        )
    roster, policy = _roster(args), _late_policy(args)
    _check_unit_of(args, args.out)
    records = _reports(args, args.out, args.unit, roster, policy)
    if records is None:
        return 2
    print(f"merged {len(records)} gradings into {args.out}/gradebook.csv", file=sys.stderr)
    return 0 if records and all(r.status != gradebook.FAILED for r in records) else 1


def _slurm(args) -> int:
    import subprocess

    from autograder import collect, gradebook, slurm
    from course.spec import units

    check_out_folder(args.parser, "--out", args.out)
    try:
        submissions = collect.collect(args.submissions, units.load(args.unit))
    except ValueError as error:
        args.parser.error(str(error))
    count = len(submissions)
    for name in ("gpus_per_task", "cpus_per_task", "per_shard", "jobs", "at_once"):
        least = 0 if name == "gpus_per_task" else 1
        if getattr(args, name) is not None and getattr(args, name) < least:
            args.parser.error(
                f"--{name.replace('_', '-')} {getattr(args, name)}: expected a whole number, {least} or more"
            )
    lines = [("--sbatch-option", o, "--partition=gpu") for o in args.sbatch_option]  # each one #SBATCH line
    lines += [("--merge-sbatch-option", o, "--partition=cpu") for o in args.merge_sbatch_option]
    lines += [("--setup", line, "'module load cuda'") for line in args.setup]
    for flag, line, example in lines:
        if "\n" in line or "\r" in line:
            args.parser.error(f"{flag} {line!r}: expected one line, such as {example}")
    shards = max(1, min(count, math.ceil(count / args.per_shard)))
    job = slurm.Job(
        os.path.abspath(args.submissions),
        args.unit,
        os.path.abspath(args.out),
        shards,
        gpus_per_task=args.gpus_per_task,
        cpus_per_task=args.cpus_per_task,
        memory=args.mem,
        time=args.time,
        jobs=args.jobs,
        sandbox=args.sandbox,
        sbatch_options=args.sbatch_option,
        at_once=args.at_once,
        setup=args.setup,
        merge_time=args.merge_time,
        merge_options=args.merge_sbatch_option,
        merge_args=_merge_args(args),
    )
    submit = slurm.write(job)
    gradebook.write_expected(os.path.abspath(args.out), submissions)  # the merge names any a shard never reached
    print(f"wrote {os.path.dirname(submit)}/grade.sbatch ({shards} tasks), merge.sbatch and submit.sh")
    return subprocess.run(["bash", submit]).returncode if args.submit else 0


def _merge_args(args) -> list[str]:
    """The merge job's report options, checked now (a bad file fails here, not in the queue),
    with paths every node resolves alike."""
    _roster(args)
    _late_policy(args)
    found = ["--anonymise"] if args.anonymise else []
    for flag, value in (("--roster", args.roster), ("--late-policy", args.late_policy)):
        found += [flag, os.path.abspath(value)] if value else []
    return found + (["--due", args.due] if args.due else [])


def _unit_names() -> list[str]:
    from course.spec import units

    return [unit.name for unit in units.all_units()]


def _add_grade_all(commands: argparse._SubParsersAction) -> None:
    from autograder.grade_options import TIME_LIMIT
    from autograder.sandbox import MODES

    grade_all = commands.add_parser("grade-all", help="grade a class: a folder of submissions or a Gradescope export")
    grade_all.add_argument("submissions", help="a folder of zips, notebooks or folders, or a Gradescope bulk export")
    grade_all.add_argument("--unit", required=True, choices=_unit_names())
    grade_all.add_argument("--out", required=True, help="folder for results/<id>/, gradebook.csv and the reports")
    grade_all.add_argument("--gpus", default="all", help="all, none, or GPU indices such as 0,1")
    grade_all.add_argument("--jobs", type=int, help="gradings at once (default: one per two cores, bounded by memory)")
    grade_all.add_argument("--regrade", action="store_true", help="grade again what was graded by this grader version")
    grade_all.add_argument(
        "--anonymise",
        action="store_true",
        help="the leaderboard names no student (a keyed hash of each id; the key: OUT/.anonymise-key)",
    )
    grade_all.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="grade again only this submission (its id in OUT/results/; repeatable), then rewrite the reports",
    )
    grade_all.add_argument(
        "--cpu-only",
        action="store_true",
        help="grade a unit's CPU cases alone, its GPU cases "
        "reported not run: no GPU (without it, a unit with GPU cases needs a GPU)",
    )
    grade_all.add_argument(
        "--roster",
        metavar="FILE",
        help="a CSV of the class (columns id, name, email, sid: "
        "autograder/roster.py): students with no hand-in are listed as missing",
    )
    grade_all.add_argument(
        "--due",
        metavar="WHEN",
        help="the due time, such as 2031-03-01T23:59-05:00: a hand-in "
        "after it (Gradescope's created_at, else its file's time) has status late; "
        "short for a --late-policy with a deadline alone",
    )
    grade_all.add_argument(
        "--late-policy",
        metavar="FILE",
        help="a TOML file: deadline with its time zone, grace_minutes, and penalty_per_day "
        "or a late_days budget (autograder/late_policy.py); the gradebook shows days late and the penalty",
    )
    grade_all.add_argument("--shard", type=_shard, metavar="K/N", help="grade only every N-th submission from the K-th")
    grade_all.add_argument("--no-reports", action="store_true", help="leave the reports to `merge` (Slurm shards)")
    grade_all.add_argument("--sandbox", choices=MODES, default="auto", help="how student code is confined")
    grade_all.add_argument("--time-limit", type=float, default=TIME_LIMIT, help="seconds for each grading")
    grade_all.add_argument("--work", help="folder for the gradings' temporary folders")
    grade_all.set_defaults(run=_grade_all, parser=grade_all)


def add_commands(commands: argparse._SubParsersAction) -> None:
    gradescope = commands.add_parser("gradescope", help="write a Gradescope autograder zip (immediate CPU feedback)")
    gradescope.add_argument("unit", choices=_unit_names())
    gradescope.add_argument("out", help="the zip to write (OUT.zip)")
    gradescope.set_defaults(run=_gradescope, parser=gradescope)

    _add_grade_all(commands)
    from autograder.sandbox import MODES

    merge = commands.add_parser("merge", help="write a batch's reports from its results (after Slurm shards)")
    merge.add_argument("out", help="the --out folder the shards graded into")
    merge.add_argument("--unit", required=True, choices=_unit_names())
    merge.add_argument("--anonymise", action="store_true", help="the leaderboard names no student")
    merge.add_argument("--roster", metavar="FILE", help="as for grade-all")
    merge.add_argument("--due", metavar="WHEN", help="as for grade-all")
    merge.add_argument("--late-policy", metavar="FILE", help="as for grade-all")
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
    slurm.add_argument(
        "--sbatch-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="an extra #SBATCH line of the array, e.g. --partition=gpu (repeatable)",
    )
    slurm.add_argument("--at-once", type=int, metavar="K", help="array tasks running at once (--array=...%%K)")
    slurm.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="LINE",
        help="a shell line run before the command in each job, e.g. 'module load cuda' (repeatable)",
    )
    slurm.add_argument("--merge-time", default="00:30:00", help="time limit of the merge job (one core, no GPU)")
    slurm.add_argument(
        "--merge-sbatch-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="an extra #SBATCH line of the merge job, e.g. --partition=cpu (repeatable); it takes none of the array's",
    )
    slurm.add_argument("--anonymise", action="store_true", help="as for merge: the leaderboard names no student")
    slurm.add_argument("--roster", metavar="FILE", help="as for grade-all; the merge job reads it")
    slurm.add_argument("--due", metavar="WHEN", help="as for grade-all; the merge job applies it")
    slurm.add_argument("--late-policy", metavar="FILE", help="as for grade-all; the merge job applies it")
    slurm.add_argument("--submit", action="store_true", help="run submit.sh now")
    slurm.set_defaults(run=_slurm, parser=slurm)
