"""The graded compute-sanitizer cases (course.sanitize.sanitizer_cases): the student's op on
the suite's small CUDA values cases, in a sandboxed child that runs under the tool.

The verdict is the tool's exit code, which the student's code cannot set: compute-sanitizer
is the child's parent, and it exits with ERROR_EXIT when it saw an error, 0 when it saw none,
and otherwise only when killed or stopped. A clean exit counts only if every case's result,
judged here like any other, is right: an op that refuses every call (a starter's TODO), or a
child that writes results without running the op, gives the tool nothing to vouch for. The
report shown is the tool's own lines of the child's output.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable

from autograder.runner import GroupRunner, secret_order
from course.cases import Case, make_input_sets
from course.judge import Verdict
from course.sanitize import (
    ERROR_EXIT,
    SANITIZER,
    SLOWDOWN,
    find_sanitizer,
    report_lines,
    small_cuda_cases,
    tool_env,
)


def cases_run_under(spec, case: Case) -> list[tuple[int, Case]]:
    """(index, case) of the small CUDA cases a sanitizer case runs under its tool."""
    small_names = {c.name for c in small_cuda_cases(spec)}
    skip = case.params.get("skip", ())
    return [
        (i, c)
        for i, c in enumerate(spec.CASES)
        if c.name in small_names and not any(fnmatch.fnmatchcase(c.name, pattern) for pattern in skip)
    ]


def lost_with(spec, lost: set[str]) -> set[str]:
    """The sanitizer cases a submission loses along with the cases `lost`: one whose small
    cases include a lost one has, under its tool, wrong results to vouch for."""
    return {
        case.name
        for case in spec.CASES
        if case.kind == SANITIZER and any(c.name in lost for _, c in cases_run_under(spec, case))
    }


def sanitized_verdicts(
    spec,
    cases: list[tuple[int, Case]],
    runner_args: dict,
    seed: int,
    judge_result: Callable[[Case, list[dict], dict | str], Verdict],
) -> tuple[dict[int, Verdict], dict[int, float]]:
    """({case index: verdict}, {case index: seconds of its run under the tool}) for the
    sanitizer cases given. runner_args: GroupRunner's (load, sandbox, work, env, deadline,
    shared) for the student's build; judge_result(case, its input sets, the child's raw
    result): the grader's verdict on one case's result."""
    sanitizer = find_sanitizer()
    verdicts, seconds = {}, {}
    for index, case in cases:
        tool, small = case.params["tool"], cases_run_under(spec, case)
        if sanitizer is None:
            verdicts[index] = Verdict(False, "not run: compute-sanitizer is not on the grading machine")
            continue
        if not small:
            verdicts[index] = Verdict(False, "not run: the suite has no small GPU case to run under the tool")
            continue
        env = {**runner_args["env"], **tool_env(tool)}  # a tensor is its own allocation
        runner = GroupRunner(
            **{**runner_args, "env": env},
            prefix=f"sanitize_{tool}_",
            slowdown=SLOWDOWN,
            wrapper=(sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "10"),
        )
        inputs = {i: make_input_sets(spec, c, seed) for i, c in small}
        start = time.perf_counter()
        reason, results = runner.run_once("cuda", case.device, secret_order(small, seed), inputs)
        seconds[index] = time.perf_counter() - start
        names = ", ".join(c.name for _, c in small)
        if runner.exit_code == ERROR_EXIT:
            verdicts[index] = Verdict(
                False, f"{tool} reported errors while your op ran {names}:\n{report_lines(runner.stdout)}"
            )
        elif runner.exit_code != 0 or len(results) < len(small):
            why = reason or f"it exited with code {runner.exit_code}"
            verdicts[index] = Verdict(False, f"the run under {tool} did not finish its cases: {why}")
        else:
            wrong = [(c.name, judge_result(c, inputs[i], results[i])) for i, c in small]
            wrong = [(name, verdict) for name, verdict in wrong if not verdict.passed]
            if wrong:
                verdicts[index] = Verdict(
                    False,
                    f"{tool} saw no error, but has nothing to vouch for: your op's "
                    f"results under it were not right on {', '.join(n for n, _ in wrong)}; "
                    f"on {wrong[0][0]}:\n{wrong[0][1].message[:500]}",
                )
            else:
                verdicts[index] = Verdict(True, f"{tool}: no errors in {len(small)} cases ({names})")
    return verdicts, seconds
