"""Build: the submission's sources, in the sandbox with a time limit (`python -m course.build`),
or a copy of the build a batch's first step kept (autograder/stored_build.py). The report's
`build` entry says how it went; of a failed build's log, it shows the errors in the
student's own files."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from autograder.build_log import BUILD_LOG, public_roots, student_errors
from autograder.hidden_calls import hidden_calls
from autograder.results import TestResult
from autograder.sandbox import CPUS, Limits, python_command
from autograder.stages.grading import Grading
from autograder.stages.read import Sources
from autograder.stored_build import StoredBuild, store
from autograder.untrusted_files import is_regular_file
from course.build import BuildError, Built, build_args, libstdcxx_problem, read_built

DONE = {"jit": "compiled", "wheel": "built and installed the wheel", "none": "nothing to build"}


@dataclass(frozen=True)
class Build:
    test: TestResult  # the build's entry in the report
    built: Built | None  # None: there is nothing to run
    folder: str  # its sandbox folder, which the test processes share
    source_dir: str
    answers: dict[str, str] = field(default_factory=dict)  # the notebook's written answers
    hidden_calls: tuple[str, ...] = ()  # autograder/hidden_calls.py, read before the build ran
    file_problems: dict[str, str] = field(default_factory=dict)  # autograder/parent_checks.py, as hidden_calls


def build_sources(sources: Sources, grading: Grading, timeout: float) -> Build:
    test = TestResult("build", 1.0, False, sources.problem, visibility="visible", tags=("build",))
    failed = Build(
        test, None, sources.folder, sources.source_dir, sources.answers, sources.hidden_calls, sources.file_problems
    )
    if sources.problem:
        return failed
    unit, box, build_dir = grading.unit, sources.folder, os.path.join(sources.folder, "build")
    os.makedirs(build_dir)
    grading.sandbox.give(box)
    timeout = min(timeout, grading.deadline.left())
    code, log = grading.sandbox.run(
        python_command(*build_args(unit.plan(), sources.source_dir, build_dir)),
        timeout=timeout,
        writable=[box],
        cwd=box,
        env=grading.env,
        limits=Limits(cpu_seconds=int(timeout * CPUS) + 60),
        ccache=True,
    )
    if code is None:
        test.output = f"the build took longer than {timeout:.0f} s and was stopped"
        return failed
    try:
        record = os.path.join(build_dir, "built.json")  # a package's setup.py could make it a FIFO
        if os.path.lexists(record) and not is_regular_file(record):
            raise BuildError(f"build of {unit.name} left a built.json that is not a regular file", log, [])
        built = read_built(unit.plan(), build_dir, code, log)
    except BuildError as error:
        todos = "\n".join(line for line in error.errors if line.startswith("TODO("))  # a build file's, unwritten
        errors = (
            todos
            or student_errors(error.log, sources.source_dir, build_dir, public_roots(grading.env))
            or (
                "No error was found in your own files: the build failed outside them. Your instructor "
                f"finds the whole log in {BUILD_LOG} beside the results."
            )
        )
        test.output, test.log = "\n".join(filter(None, [error.summary, errors])), error.log
        return failed
    test.passed, test.output = True, DONE[unit.build]
    if built.library and libstdcxx_problem(built.library):  # the children would crash on it
        test.output += "\n" + libstdcxx_problem(built.library)
    return Build(test, built, box, sources.source_dir, sources.answers, sources.hidden_calls, sources.file_problems)


def keep_build(folder: str, build: Build, grading: Grading) -> None:
    """Store the build into `folder` for a batch's perf step; one it cannot store, it builds again."""
    try:
        store(folder, build.source_dir, build.built, grading.unit.plan().to_json(), within=build.folder)
    except (OSError, ValueError) as error:
        print(f"warning: the build was not kept for the perf step: {error}", file=sys.stderr)


def first_step_build(folder: str, grading: Grading) -> Build | None:
    """A fresh copy of the build a batch's first step kept in `folder`; None where there is none."""
    stored = StoredBuild.open(folder)
    if stored is None:
        return None
    box, load = stored.copy_into(grading.sandbox.folder(grading.folder, "prebuilt."))
    grading.sandbox.give(box)
    test = TestResult("build", 1.0, True, "built in the grading's first step", visibility="visible", tags=("build",))
    # The sources as the first step's build left them: a package's setup.py could have changed its own.
    # No file check is made on them (one could now be a link to the grader's files): the perf step
    # judges no case that needs one.
    return Build(test, Built(**load["built"]), box, load["source_dir"], hidden_calls=hidden_calls(load["source_dir"]))
