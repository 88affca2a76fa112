"""Grade one submission of one unit. This process never loads student code: it builds in a
child, runs each group of cases in fresh children, and judges here. `grade` runs the stages of
autograder/stages/ in this order:

    plan       which cases run, in which groups, perf groups last
    baselines  where a perf case runs, the reference's fetch starts (autograder/baselines.py):
               planned before the build so that a cold build of it runs beside the student's
    read       the submission into the unit's files
    build      in the sandbox, or the copy of the build a batch's first step kept
    run        each group in fresh children, judged as it ends: a case runs where those it needs passed
    report     the verdicts as the report's entries
    extras     a package's own tests and a notebook's written answers, worth no points"""

from __future__ import annotations

import time

from autograder.grade_options import GradeOptions
from autograder.results import Grade
from autograder.stages.build import build_sources, first_step_build, keep_build
from autograder.stages.extras import extras
from autograder.stages.grading import open_grading
from autograder.stages.plan import plan_cases
from autograder.stages.read import read_submission
from autograder.stages.report import public_case_names, report_cases
from autograder.stages.run import run_cases
from course.spec.units import Unit


def grade(submission: str, unit: Unit, options: GradeOptions | None = None) -> Grade:
    """Grade `submission` (a notebook, folder or zip) in a new folder under options.work,
    removed at the end with every process the grading started."""
    options = GradeOptions() if options is None else options
    if not isinstance(options, GradeOptions):
        raise TypeError(f"options must be a GradeOptions, not {type(options).__name__}")
    with open_grading(unit, options) as grading:
        result = Grade(unit.name, seed=grading.seed, sandbox=grading.sandbox.describe())
        plan = plan_cases(
            unit.tests(hidden=True),
            options.tests,
            grading.has_gpu,
            grading.gpus,
            grading.toolchain,
            grading.gpu_free_bytes,
        )
        if plan.times_perf:
            grading.baselines.prefetch()
        start = time.perf_counter()
        build = first_step_build(options.prebuilt, grading) if options.prebuilt else None
        if build is None:
            build = build_sources(read_submission(submission, grading), grading, options.build_timeout)
            if options.keep_build and build.built is not None:
                keep_build(options.keep_build, build, grading)
        result.answers = build.answers
        result.timings["build_s"] = build.test.seconds = time.perf_counter() - start
        result.tests.append(build.test)
        ran = run_cases(plan, build, grading, result.timings)
        report_cases(result, plan, ran, public_case_names(unit))
        result.tests += extras(build, grading, options.own_tests)
        result.timings["total_s"] = time.perf_counter() - start
    return result
