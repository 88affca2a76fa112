"""Extras: a package's own tests/, run with pytest against its build (worth no points), and a
notebook's written answers, out of their points and pending grading by hand."""

from __future__ import annotations

import os
import time

from autograder.results import TestResult
from autograder.sandbox import CPUS, Limits, python_command
from autograder.stages.answers import written_entries
from autograder.stages.build import Build
from autograder.stages.grading import Grading

OWN_TESTS = "own_tests"  # the tag of a package's own tests in results.json: reported, worth no points
OWN_TESTS_TIMEOUT = 300
OWN_TESTS_LINE = 300  # characters of one line of the package's pytest output kept in the report


def extras(build: Build, grading: Grading, own_tests: bool) -> list[TestResult]:
    """The entries after the graded cases: own tests (where asked for, and the package has
    them), then the written answers."""
    entries = []
    has_own_tests = grading.unit.build == "wheel" and os.path.isdir(os.path.join(build.source_dir, "tests"))
    if own_tests and build.built is not None and has_own_tests:
        start = time.perf_counter()
        entries.append(run_own_tests(build, grading))
        entries[-1].seconds = time.perf_counter() - start
    return entries + written_entries(grading.unit, build.answers)


def run_own_tests(build: Build, grading: Grading) -> TestResult:
    """pytest on the package's own tests/ against the installed build, in the sandbox, after
    every graded case (it may write to the build's folder, which nothing reads after it).
    Reported for the student and the instructor, worth no points: the student wrote them."""
    test = TestResult(OWN_TESTS, 0.0, False, "", visibility="visible", tags=(OWN_TESTS, "report"))
    deadline, gpu_lock, env = grading.deadline, grading.gpu_lock, grading.env
    timeout = min(OWN_TESTS_TIMEOUT, deadline.left())
    pytest_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [build.built.prefix, env.get("PYTHONPATH")]))}
    command = python_command(
        "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "--color=no", os.path.join(build.source_dir, "tests")
    )
    held = gpu_lock.acquire(False, lambda: deadline.passed) if gpu_lock is not None else None
    if gpu_lock is not None and held is None:
        test.output, test.not_run = deadline.not_run(), True
        return test
    try:  # they may use the GPU: in a batch, beside others' tests but never during a timing
        code, log = grading.sandbox.run(
            command,
            timeout=min(timeout, deadline.left()),
            writable=[build.folder],
            cwd=build.source_dir,
            env=pytest_env,
            limits=Limits(cpu_seconds=int(timeout * CPUS) + 60),
        )
    finally:
        if held is not None:
            held.release()
    if "No module named pytest" in log:
        test.output, test.not_run = "not run: pytest is not installed on the grading machine", True
        return test
    lines = log.strip().splitlines()
    # The student's own text, shown in the report: a bounded amount of it.
    outcomes = [line[:OWN_TESTS_LINE] for line in lines if line.startswith(("FAILED", "ERROR", "SKIPPED"))][:20]
    summary = (
        f"stopped after {timeout:.0f} s" if code is None else (lines[-1][:OWN_TESTS_LINE] if lines else "no output")
    )
    test.passed = code == 0
    test.output = "\n".join([f"your tests/ (reported, not graded): {summary}", *outcomes])
    return test
