"""The student path as one command: a student who solved the unit, from the release to the grade.

    python -m course.authoring.student_path UNIT ... [--out DIR] [--release DIR] [--student ID]
                                            [--t4] [--timeout S]
    scripts/student_path.sh UNIT ...

For each unit: the student notebook of a release (made into a temporary folder with the
release's own functions, or --release an existing one) is solved region by region
(course/authoring/solved_notebook.py), run top to bottom in an empty folder by a fresh kernel
that installs the runtime from the release (COURSE_RELEASE), the submit cell included, and
the zip it wrote is graded by `python -m autograder grade` (course/authoring/student_path_report.py
reads the verdict). Prints a line per unit; --out DIR keeps summary.json, summary.md and each
unit's notebook output and results.json. Exits 1 when a unit fails.

--t4 plays Colab's T4 on a bigger GPU: code for sm_75 alone (TORCH_CUDA_ARCH_LIST=7.5+PTX),
MAX_JOBS=2, the kernel on 2 cores and its GPU memory capped at 15 GiB
(course/authoring/kernel_limits.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import nbformat

from course.authoring import kernel_limits, release, run_notebook, student_path_report
from course.authoring.solved_notebook import TemplateDrift, solved
from course.authoring.student_path_report import UnitRun
from course.spec.units import REPO, Unit, all_units

T4_MEMORY = 15 * 2**30
T4_CORES = 2


@dataclass(frozen=True)
class Options:
    units: tuple[str, ...]
    out: str | None = None  # folder for the summary and each unit's logs
    release: str | None = None  # an existing release to take the notebooks from; default: a new one
    student: str = "student-path"  # the submit cell's STUDENT
    t4: bool = False  # play Colab's T4 (see the module's docstring)
    timeout: int = 1800  # seconds a cell may run


def run_units(options: Options) -> Iterator[UnitRun]:
    """Each unit's run as it ends: a run cut off keeps what the units before it found."""
    selected = release.selected_units(list(options.units))
    with tempfile.TemporaryDirectory(prefix="student_path_") as work:
        folder = options.release or _new_release(selected, work)
        missing = [
            unit.name
            for unit in selected
            if not os.path.exists(os.path.join(folder, "notebooks", f"{unit.name}.ipynb"))
        ]
        if missing:
            raise ValueError(f"--release {folder}: expected a release with the notebooks of {', '.join(missing)}")
        for unit in selected:
            yield play(unit, os.path.abspath(folder), work, options)


def _new_release(selected: list[Unit], work: str) -> str:
    folder = os.path.join(work, "release")
    release.write(selected, folder)
    return folder


def play(unit: Unit, folder: str, work: str, options: Options) -> UnitRun:
    """One unit's student path: solve, run, grade; the first step that fails says why."""
    result = UnitRun(unit.name)
    logs = os.path.join(options.out or work, unit.name)
    os.makedirs(logs, exist_ok=True)
    try:
        notebook = solved(
            nbformat.read(os.path.join(folder, "notebooks", f"{unit.name}.ipynb"), as_version=4), unit, options.student
        )
    except TemplateDrift as error:
        result.problem = str(error)
        return result
    path = os.path.join(logs, f"{unit.name}.ipynb")
    nbformat.write(notebook, path)
    run_folder = os.path.join(work, "run", unit.name)  # new and empty: nothing built before
    start = time.perf_counter()
    ok, executed, error = run_notebook.run(path, run_folder, options.timeout, kernel_environ(folder, work, options))
    result.notebook_s = round(time.perf_counter() - start, 1)
    text = run_notebook.outputs_text(executed)
    _write(os.path.join(logs, "notebook.txt"), text + error)
    result.build_s = build_seconds(text, unit.name)
    if not ok:
        result.problem = "a cell failed: " + (error.strip().splitlines() or ["no message"])[-1]
        return result
    if not os.path.isdir(os.path.join(run_folder, ".pip_target", "course")):
        result.problem = (
            "the notebook did not install the runtime from the release: its version was importable "
            "already (installed into this Python?), so the release's wheel went untested"
        )
        return result
    submission = os.path.join(run_folder, f"submission_{unit.name}.zip")
    if not os.path.exists(submission):
        result.problem = f"the submit cell wrote no {os.path.basename(submission)}"
        return result
    grade(unit, submission, os.path.join(logs, "grade"), options, result)
    return result


def kernel_environ(folder: str, work: str, options: Options) -> dict[str, str]:
    """What the notebook's kernel gets besides this environment: the release to install the
    runtime from and, with --t4, the T4's settings and limits."""
    environ = {"COURSE_RELEASE": os.path.join(folder, release.RUNTIME_DIR)}
    if options.t4:
        cores = sorted(os.sched_getaffinity(0))[:T4_CORES]
        environ.update(t4_build_environ(), IPYTHONDIR=kernel_limits.startup_folder(os.path.join(work, "ipython")))
        environ.update({kernel_limits.CORES: ",".join(map(str, cores)), kernel_limits.GPU_MEMORY: str(T4_MEMORY)})
    return environ


def t4_build_environ() -> dict[str, str]:
    """A T4's builds: code for sm_75 alone (with its PTX, which the driver compiles for the GPU
    at hand: sm_75 code alone cannot load on a newer one), as many compile jobs as its cores."""
    return {"TORCH_CUDA_ARCH_LIST": "7.5+PTX", "MAX_JOBS": str(T4_CORES)}


def build_seconds(text: str, unit: str) -> list[float]:
    """Each build's time the notebook printed ("Built <unit> in X s"), in order."""
    return [float(seconds) for seconds in re.findall(rf"^Built {re.escape(unit)} in ([0-9.]+) s$", text, re.MULTILINE)]


def grade(unit: Unit, submission: str, out: str, options: Options, result: UnitRun) -> None:
    """Grade `submission` as the course's grader does and read its verdict into `result`."""
    # The grader plays a T4's code (sm_75 alone) but not Colab's 2 cores: it is the instructor's machine.
    arch = {"TORCH_CUDA_ARCH_LIST": t4_build_environ()["TORCH_CUDA_ARCH_LIST"]} if options.t4 else {}
    env = dict(os.environ, **arch)
    command = [sys.executable, "-m", "autograder", "grade", submission, "--unit", unit.name, "--out", out]
    log = os.path.join(out, "grade.txt")
    os.makedirs(out, exist_ok=True)
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:  # written as it goes: a grading cut off shows how far it got
        finished = subprocess.run(command, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
    result.grading_s = round(time.perf_counter() - start, 1)
    results = os.path.join(out, "results.json")
    if not os.path.exists(results):
        with open(log, encoding="utf-8", errors="replace") as handle:
            tail = handle.read().strip().splitlines()[-1:] or ["no output"]
        result.problem = f"the grading exited {finished.returncode} with no results.json: {tail[0]}"
        return
    student_path_report.read_verdict(results, result)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("units", nargs="+", metavar="UNIT", help="a unit to play, such as day01_relu_bias")
    parser.add_argument("--out", help="folder for summary.json, summary.md and each unit's logs")
    parser.add_argument("--release", help="take the notebooks from this release instead of making one")
    parser.add_argument("--student", default=Options.student, help="the submit cell's STUDENT")
    parser.add_argument("--t4", action="store_true", help="play Colab's T4: sm_75 code, 2 cores, 15 GiB of GPU memory")
    parser.add_argument("--timeout", type=int, default=Options.timeout, help="seconds a cell may run")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout {args.timeout}: expected a positive number of seconds")
    known = [unit.name for unit in all_units()]
    unknown = [name for name in args.units if name not in known]
    if unknown:
        parser.error(f"UNIT {', '.join(unknown)}: expected units of this course: {', '.join(known)}")
    return Options(tuple(args.units), args.out, args.release, args.student, args.t4, args.timeout)


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    results: list[UnitRun] = []
    try:
        for result in run_units(options):
            results.append(result)
            print(student_path_report.summary_line(result), flush=True)
            if options.out:  # after each unit: a run cut off keeps the summary of those that ended
                student_path_report.write_summary(options.out, results, asdict(options))
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
