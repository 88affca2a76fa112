"""The checks of the submission's own files that a unit's ops declare (course.ops.Op.from_files),
made here on the grader's copy as the read stage wrote it, before the build could run any of the
submission's code: the test process's answer for such a case is never read."""

from __future__ import annotations

from course.spec.units import Unit


def file_problems(unit: Unit, source_dir: str) -> dict[str, str]:
    """{op name: "" or what its check found wrong} for each op of the unit's suite with a file check."""
    problems = {}
    for name, op in getattr(unit.tests(hidden=True), "OPS", {}).items():
        if op.from_files is None:
            continue
        try:  # the files are the student's: a check they get past in a way not foreseen fails the op
            problems[name] = str(op.from_files(source_dir))
        except Exception as error:
            problems[name] = f"the grader could not check these files ({type(error).__name__}: {str(error)[:300]})"
    return problems
