"""The graded compute-sanitizer cases (course.sanitize.sanitizer_cases): the student's op on
the suite's small CUDA values cases, in a sandboxed child that runs under the tool.

The verdict is the tool's exit code, which the student's code cannot set: compute-sanitizer
is the child's parent, and it exits with ERROR_EXIT when it saw an error, 0 when it saw none,
and otherwise only when killed or stopped. A clean exit counts only if the op ran every case
without raising: an op that refuses every call (a starter's TODO) runs no kernel to check.
The report shown is the tool's own lines of the child's output.
"""
from __future__ import annotations

import fnmatch

from autograder.runner import GroupRunner
from course.cases import Case, make_input_sets
from course.judge import Verdict
from course.sanitize import ERROR_EXIT, SLOWDOWN, find_sanitizer, report_lines, small_cuda_cases


def sanitized_verdicts(spec, cases: list[tuple[int, Case]], runner_args: dict, seed: int) -> dict[int, Verdict]:
    """{case index: verdict} for the sanitizer cases given. runner_args: GroupRunner's (load,
    sandbox, work, env, deadline, shared) for the student's build."""
    sanitizer = find_sanitizer()
    verdicts = {}
    for index, case in cases:
        tool, skip = case.params["tool"], case.params.get("skip", ())
        small = [(i, c) for i, c in enumerate(spec.CASES) if c in small_cuda_cases(spec)
                 and not any(fnmatch.fnmatchcase(c.name, pattern) for pattern in skip)]
        if sanitizer is None:
            verdicts[index] = Verdict(False, "not run: compute-sanitizer is not on the grading machine")
            continue
        if not small:
            verdicts[index] = Verdict(False, "not run: the suite has no small GPU case to run under the tool")
            continue
        env = {**runner_args["env"], "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}  # a tensor is its own allocation
        runner = GroupRunner(**{**runner_args, "env": env}, prefix=f"sanitize_{tool}_", slowdown=SLOWDOWN,
                             wrapper=(sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
                                      "--print-limit", "10"))
        inputs = {i: make_input_sets(spec, c, seed) for i, c in small}
        reason, results = runner.run_once("cuda", case.device, small, inputs)
        names = ", ".join(c.name for _, c in small)
        raised = [c.name for i, c in small if not isinstance(results.get(i), dict) or "exception" in results[i]]
        if runner.exit_code == ERROR_EXIT:
            verdicts[index] = Verdict(False, f"{tool} reported errors while your op ran {names}:\n"
                                             f"{report_lines(runner.stdout)}")
        elif runner.exit_code != 0 or len(results) < len(small):
            why = reason or f"it exited with code {runner.exit_code}"
            verdicts[index] = Verdict(False, f"the run under {tool} did not finish its cases: {why}")
        elif raised:
            first = results.get(next(i for i, c in small if c.name == raised[0]))
            error = first.get("exception", "") if isinstance(first, dict) else str(first)
            verdicts[index] = Verdict(False, f"{tool} has nothing to check: your op raised an error or returned "
                                             f"no result on {', '.join(raised)}; on {raised[0]}:\n{error[:500]}")
        else:
            verdicts[index] = Verdict(True, f"{tool}: no errors in {len(small)} cases ({names})")
    return verdicts
