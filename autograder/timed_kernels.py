"""A GPU perf case's op, profiled once at the size it was timed at.

Values cases check on small inputs that the op runs code of its own; an op could still hand
the sizes it is timed at to PyTorch. The child runs the perf case's op once more on its first
input set under the profiler, and the perf points need a kernel of the student's own and no
forbidden op in that call.
"""
from __future__ import annotations

import dataclasses

from autograder.result_schema import result_problem
from course import kernel_names
from course.cases import OWN_KERNEL, Case
from course.judge import Verdict, judge


def profiled_case(case: Case) -> Case | None:
    """For a perf case on a GPU, the values case its child also runs on the first input set,
    profiled; None for other cases."""
    if case.kind != "perf" or not case.device.startswith("cuda"):
        return None
    return dataclasses.replace(case, kind="values", checks=(OWN_KERNEL,))


def own_code_at_timed_size(spec, case: Case, input_sets: list[dict], outcome: dict, verdict: Verdict,
                           own_kernels: frozenset[str]) -> Verdict:
    """A perf verdict that earned points keeps them only if the op ran kernels of its own at the
    size it was timed at (profiled_case)."""
    profiled = profiled_case(case)
    if profiled is None or not verdict.passed or "exception" in outcome:
        return verdict
    run = outcome.get("own_kernel")
    problem = result_problem(spec, profiled, input_sets[:1], run) if isinstance(run, dict) else "no profiled call"
    if problem:
        return Verdict(False, f"the test process returned a malformed result: {problem}", 0.0, verdict.measurements)
    # At the size it is timed at, an op may let PyTorch help (day09's autograd reference sums
    # partial dweights with torch); what must hold there is no forbidden op and a kernel of its own.
    run = {**run, "kernels": [k for k in run["kernels"]
                              if not kernel_names.is_torch_kernel(k) or kernel_names.is_torch_copy_or_fill(k)]}
    checked = judge(spec, profiled, input_sets[:1], run, own_kernels=own_kernels)
    if checked.passed:
        return verdict
    return Verdict(False, f"{verdict.message}\nbut the call, profiled at that size, did not run code of its own, "
                          f"so its time earns no points:\n{checked.message}", 0.0, verdict.measurements)
