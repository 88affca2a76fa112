"""The checks a unit's ops ask the grader to make itself (course.ops.Op.from_files, new_python):
of the submission's own files, on the grader's copy as the read stage wrote it, before the build
could run any of the submission's code; and of the built package imported in a Python the grader
starts in the sandbox. The test process never runs these cases, and nothing it says counts."""

from __future__ import annotations

import os

from autograder.sandbox import Limits, python_command
from autograder.stages.grading import Grading
from course.build import Built
from course.ops import NewPython
from course.spec.units import Unit

NEW_PYTHON_SECONDS = 90  # to import torch and the package


def _ops(unit: Unit) -> dict:
    return getattr(unit.tests(hidden=True), "OPS", {})


def file_problems(unit: Unit, source_dir: str) -> dict[str, str]:
    """{op name: "" or what its check found wrong} for each op of the unit's suite with a file check."""
    problems = {}
    for name, op in _ops(unit).items():
        if op.from_files is None:
            continue
        try:  # the files are the student's: a check they get past in a way not foreseen fails the op
            problems[name] = str(op.from_files(source_dir))
        except Exception as error:
            problems[name] = f"the grader could not check these files ({type(error).__name__}: {str(error)[:300]})"
    return problems


def new_python_problems(
    unit: Unit, built: Built, build_folder: str, grading: Grading, planned: set[str]
) -> dict[str, str]:
    """{op name: "" or what is wrong} for each op named in `planned` that the unit's suite checks
    in a new Python, each run in the grading's sandbox with the build's install folder on its
    path (the build's sandbox folder, `build_folder`, mounted as for the test processes)."""
    return {
        name: _new_python_problem(op.new_python, built, build_folder, grading)
        for name, op in _ops(unit).items()
        if op.new_python is not None and name in planned
    }


def _new_python_problem(check: NewPython, built: Built, build_folder: str, grading: Grading) -> str:
    if not built.prefix:
        return "the grader found no installed package to import"
    folder = grading.sandbox.folder(grading.folder, "new_python.")
    grading.sandbox.give(folder)
    timeout = min(NEW_PYTHON_SECONDS, grading.deadline.left())
    run = grading.sandbox.start(
        python_command(*check.argv),
        writable=[folder, build_folder],
        cwd=folder,
        env={**grading.env, "PYTHONPATH": os.pathsep.join(filter(None, [built.prefix, grading.env.get("PYTHONPATH")]))},
        limits=Limits(cpu_seconds=int(timeout) * 4 + 10),
    )
    code = run.wait(timeout)
    run.kill()
    if code is None:
        return f"the new Python took over {timeout:.0f} s to import the package"
    try:
        return str(check.problem(code, run.stdout(), run.stderr()))
    except AssertionError as error:
        return str(error)
    except Exception as error:  # its output is the student's: one not foreseen fails the op
        return f"the grader could not read what the new Python printed ({type(error).__name__}: {str(error)[:300]})"
