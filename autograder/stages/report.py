"""Report: the cases' verdicts as the Grade's entries, each visible to the student at once if
the notebook's public suite has it too, after the grades are published if not; a perf case's
measurements beside them, and under a verdict what the run changed about its case (the dtype a
Triton case ran in: course/dtypes.py). autograder/report.py writes the Grade out."""

from __future__ import annotations

from autograder.results import Grade, TestResult
from autograder.stages.plan import Plan
from autograder.stages.run import Ran
from course.spec.units import Unit


def public_case_names(unit: Unit) -> set[str]:
    """Cases students also see in the notebook: those its public_tests.py defines."""
    return {case.name for case in unit.tests(hidden=False).CASES}


def report_cases(result: Grade, plan: Plan, ran: Ran, public: set[str]) -> None:
    """Adds an entry to `result` for each case that ran or was judged not to, in the suite's order;
    one the machine was too small for is worth nothing here (Group.counted)."""
    uncounted = plan.uncounted
    for index, case in enumerate(plan.spec.CASES):
        if index not in ran.verdicts:  # not among the tests asked for
            continue
        verdict = ran.verdicts[index]
        result.tests.append(
            TestResult(
                case.name,
                0.0 if index in uncounted else case.points,
                verdict.passed,
                "\n".join(filter(None, (verdict.message, case.note))),
                visibility="visible" if case.name in public else "after_published",
                tags=(case.group, case.device),
                not_run=verdict.message.startswith("not run"),
                fraction=verdict.fraction,
                seconds=ran.seconds.get(index),
            )
        )
        if verdict.measurements:
            result.perf[case.name] = verdict.measurements
