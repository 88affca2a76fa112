"""Judge: the verdicts on a group's raw results, taken in the grader's process, which never
loads student code. A result is first checked to be well formed (autograder/result_schema.py),
then judged (course/judge.py), then, for a perf case, checked to have run the student's own
kernels at the timed size (autograder/timed_kernels.py); an own-code verdict last against what
the submission's sources name (autograder/hidden_calls.py). A case whose op checks the
submission's files, or the package in a new Python, is judged on what the grader found itself
(autograder/parent_checks.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType

from autograder.observer.verdict import OwnKernels
from autograder.result_schema import result_problem, timing_problem
from autograder.timed_kernels import own_code_at_timed_size, profiled_case
from course.cases import OWN_KERNEL, Case
from course.judge import Verdict, judge, judge_grader_check
from course.ops import op_for


@dataclass(frozen=True)
class GraderFindings:
    """What the grader found itself, not through the test process: the submission's files read
    before its build could change them, and the grader's own checks (autograder/parent_checks.py)."""

    hidden_calls: tuple[str, ...] = ()  # what hides calls from the own-code check (autograder/hidden_calls.py)
    problems: dict[str, str] = field(default_factory=dict)  # {op: its grader-made check's finding}


def judge_group(
    spec: ModuleType,
    cases: list[tuple[int, Case]],
    input_sets: dict[int, list[dict]],
    outcomes: dict[int, dict | str],
    baselines: dict[int, dict | str],
    own_kernels: frozenset[str],
    observed: dict | None = None,
    own: OwnKernels | None = None,
    grader: GraderFindings = GraderFindings(),
) -> dict[int, Verdict]:
    """{index: verdict} for `cases`, from the children's raw results (`outcomes`) and, for perf
    cases, their baselines' (torch's op and the reference, timed apart) and their runs under the
    observer (`observed`, with `own`: autograder/observer/). `grader`: what the grader found
    itself."""
    observed = observed or {}
    return {
        index: verdict(
            spec,
            case,
            input_sets[index],
            outcomes.get(index, "the test process was not given this test"),
            baselines.get(index),
            own_kernels,
            observed.get(index),
            own,
            grader,
        )
        for index, case in cases
    }


def verdict(
    spec: ModuleType,
    case: Case,
    input_sets: list[dict],
    outcome: dict | str,
    baseline: dict | str | None,
    own_kernels: frozenset[str],
    observed=None,
    own: OwnKernels | None = None,
    grader: GraderFindings = GraderFindings(),
) -> Verdict:
    """The verdict on one raw result (a string: why the child left none)."""
    try:  # a check the result gets past in a way not foreseen costs this case, never the whole report
        checked = _checked_by_grader(spec, input_sets, grader)
        if checked is not None:
            return judge_grader_check(case, checked)
        if not isinstance(outcome, dict):
            return Verdict(False, outcome)
        problem = result_problem(spec, case, input_sets, outcome)
        # A baseline that raised is not malformed: the judge reports the case as not run, with why.
        if not problem and case.kind == "perf" and isinstance(baseline, dict) and "exception" not in baseline:
            why = timing_problem(baseline) or timing_problem(baseline, "reference_timing")
            problem = why and f"the run timing torch's op and the reference returned {why}"
        if problem:
            return Verdict(False, f"the test process returned a malformed result: {problem}")
        found = judge(spec, case, input_sets, outcome, baseline, own_kernels)
        judged = own_code_at_timed_size(spec, case, input_sets, outcome, found, own_kernels, observed, own)
        return _unless_hidden(case, judged, grader.hidden_calls)
    except Exception as error:
        return Verdict(False, f"the grader could not judge this result ({type(error).__name__}: {str(error)[:300]})")


def _unless_hidden(case: Case, found: Verdict, hidden: tuple[str, ...]) -> Verdict:
    """`found`, failed where it vouches for the op's own code (an own-code case, a GPU perf case's
    call at the timed size) and the sources name a way to hide PyTorch's calls from its observers."""
    own_code = OWN_KERNEL in case.checks or profiled_case(case) is not None
    if not (found.passed and own_code and hidden):
        return found
    lines = "\n".join(f"  {line}" for line in hidden[:3])
    message = (
        "your sources name calls that hide PyTorch's work from this check (or ask whether it watches), "
        f"so it cannot vouch for your own code; remove them:\n{lines}"
    )
    return Verdict(False, message, 0.0 if case.kind == "perf" else None, found.measurements)


def _checked_by_grader(spec: ModuleType, input_sets: list[dict], grader: GraderFindings) -> str | None:
    """What the grader's own check found for a case whose op it checks itself ("" for nothing
    wrong; course.ops.Op.checked_by_grader); None for any other case. The test process never
    ran such a case."""
    if not input_sets:
        return None
    op = op_for(spec, input_sets[-1])
    if not op.checked_by_grader:
        return None
    name = next(name for name, each in spec.OPS.items() if each is op)
    return grader.problems.get(name, "not run: the grader did not make this check")
