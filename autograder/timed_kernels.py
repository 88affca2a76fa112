"""A GPU perf case's op, profiled once at the size it was timed at.

Values cases check on small inputs that the op runs code of its own; an op could still hand
the sizes it is timed at to PyTorch. The child runs the perf case's op once more on its first
input set under the profiler, and the perf points need a kernel of the student's own and no
PyTorch op outside course/own_code.py's list in that call.

An op can also tell the profiler's calls from the timed ones (c01 in docs/security.md: its own
kernel while the profiler is on, PyTorch's op while it is off). The profiled call therefore
also gives the time the GPU was busy with it, and the time the grade is computed from must not
fall far below that: the timed calls cannot have run those kernels.
"""

from __future__ import annotations

import dataclasses

from autograder.observer.verdict import OwnKernels, kernels_problem
from autograder.result_schema import profiled_run_problem, result_problem
from course import kernel_names
from course.cases import OWN_KERNEL, Case
from course.harness import as_timed, collected, for_judge, profile, synchronize, to_device
from course.judge import Verdict, judge
from course.ops import call

# An honest op's timed calls run its kernels on a cold L2 with inputs in new storage, and a
# timed call costs the longer of its GPU and host times (course/bench.py); the profiled call
# runs them on a warm L2. So an honest op's time is at least its kernels' busy time, give or
# take one profiled call against a median: a quarter of slack covers that. What it leaves an op
# that is timed running other kernels than its own: at most a third more speed than its own have.
BUSY_FACTOR = 0.75
OBSERVED_CALLS = 3  # an observed case's calls: its busy time is theirs over this


def profiled_case(case: Case) -> Case | None:
    """For a perf case on a GPU, the values case its child also runs on the first input set,
    profiled; None for other cases."""
    if case.kind != "perf" or not case.device.startswith("cuda"):
        return None
    return dataclasses.replace(case, kind="values", checks=(OWN_KERNEL,), fresh_call=False)  # its sets: judged_sets


# ---- in the child ----


def profiled_run(spec, ext, case: Case, inputs: dict) -> dict:
    """profiled_case's result, as course.harness.execute gives a values case's with the
    own-kernel check ("outputs", "output_devices", "ops", "kernels"), of two calls on one input
    set: one with new memory filled with NaN (an element never written shows), then the profiled
    one, made as the timer makes its calls; and "busy_ms": the GPU's busy time in that call."""
    buffers = to_device(spec, case, inputs)
    got = call(spec, ext, buffers)  # kept: the profiled call's outputs cannot reuse its memory
    synchronize(case.device)
    with as_timed():  # NaN filling would add a write of every output to the busy time
        profiled = profile(spec, ext, buffers, case.device)
    result = collected([for_judge(got), for_judge(profiled.outputs)])
    result.update(ops=profiled.ops, kernels=profiled.kernels, busy_ms=profiled.busy_ms)
    return result


def observed_run(spec, ext, case: Case, inputs: dict, markers: tuple[int, int], flush) -> dict:
    """In a child under the observer (autograder/observer/session.py): profiled_case's calls,
    watched from outside. A call with new memory filled with NaN, as profiled_run's first (it
    also warms the op: Triton compiles, CUDA loads its kernels); then, between two marker copies
    of the sizes `markers`, OBSERVED_CALLS calls made as the timer makes them, on a stream of
    their own, so that a launch on a default stream shows; then flush() hands every record to
    the observer's pipe. Returns the first call's outputs and the last one's, to be judged."""
    import torch

    buffers = to_device(spec, case, inputs)
    got = call(spec, ext, buffers)
    synchronize(case.device)
    stream = torch.cuda.Stream(device=case.device)
    _marker(markers[0], case.device)
    with as_timed(), torch.cuda.stream(stream):
        for _ in range(OBSERVED_CALLS):
            outputs = None  # each call's memory is the caching allocator's again, as in the timer's loop
            outputs = call(spec, ext, buffers)
    torch.cuda.synchronize()
    _marker(markers[1], case.device)
    torch.cuda.synchronize()
    flush()
    return collected([for_judge(got), for_judge(outputs)])


def _marker(size: int, device: str) -> None:
    """A host-to-device copy of `size` bytes on an idle device: one edge of the observed span."""
    import torch

    torch.zeros(size, dtype=torch.uint8).to(device)
    torch.cuda.synchronize()


def judged_sets(input_sets: list[dict]) -> list[dict]:
    """The input sets profiled_run's outputs answer: the first set, twice."""
    return input_sets[:1] * 2


# ---- in the parent ----


def own_code_at_timed_size(
    spec,
    case: Case,
    input_sets: list[dict],
    outcome: dict,
    verdict: Verdict,
    own_kernels: frozenset[str],
    observed=None,
    own: OwnKernels | None = None,
) -> Verdict:
    """A perf verdict that earned points keeps them only if the op ran kernels of its own at the
    size it was timed at (profiled_case), and its timed calls took at least about as long as
    those kernels. `observed`: the case's run under the observer (autograder/observer/session.py,
    Observed), whose kernels and busy time, seen from outside the test process, decide where it
    has them; `own`: the kernels the submission's files define, for it. Without an observation
    the test process's own profile decides, and the verdict says so."""
    profiled = profiled_case(case)
    if profiled is None or not verdict.passed or "exception" in outcome:
        return verdict
    run = outcome.get("own_kernel")
    problem = (
        profiled_run_problem(spec, profiled, judged_sets(input_sets), run)
        if isinstance(run, dict)
        else "no profiled call"
    )
    if problem:
        return Verdict(False, f"the test process returned a malformed result: {problem}", 0.0, verdict.measurements)
    measurements = {**verdict.measurements, "kernels_busy_ms": run["busy_ms"]}
    why = _profiled_call_problem(spec, profiled, judged_sets(input_sets), run, own_kernels)
    busy, note = run["busy_ms"], ""
    if observed is not None and not observed.unavailable:
        why = why or _observed_problem(spec, profiled, judged_sets(input_sets), observed, own)
        if not why:
            busy = observed.observation.busy_ms_per_call
            measurements["observed_busy_ms"] = busy
    elif observed is not None:
        note = f"\n(the GPU's work was not observed from outside the test process: {observed.unavailable})"
    why = why or _faster_than_its_kernels(outcome, busy, observed is not None and not observed.unavailable)
    if not why:
        return dataclasses.replace(verdict, message=verdict.message + note, measurements=measurements)
    return Verdict(False, f"{verdict.message}\nbut {why}{note}", 0.0, measurements)


def _observed_problem(spec, profiled: Case, input_sets: list[dict], observed, own: OwnKernels) -> str:
    """'' if the observed calls answered right and their kernels pass kernels_problem."""
    if observed.problem:
        return f"its calls at that size, observed from outside the test process, cannot be judged: {observed.problem}"
    kernels = kernels_problem(observed.observation, own)
    if kernels:
        return (
            f"in its calls at that size, observed from outside the test process, {kernels}; so its time earns no points"
        )
    values = dataclasses.replace(profiled, checks=())
    problem = result_problem(spec, values, input_sets, observed.outcome)
    checked = None if problem else judge(spec, values, input_sets, observed.outcome)
    if problem or not checked.passed:
        return (
            "its calls at that size, observed from outside the test process, did not answer right, so its "
            "time earns no points:\n" + (problem or checked.message)
        )
    return ""


def _profiled_call_problem(spec, profiled: Case, input_sets: list[dict], run: dict, own_kernels: frozenset[str]) -> str:
    """'' if both calls of profiled_run answered right and the profiled one ran code of its own."""
    # At the size it is timed at, an op may let PyTorch help (day09's autograd reference sums
    # partial dweights with torch); what must hold there is no op outside the allowlist and a kernel of its own.
    run = {
        **run,
        "kernels": [
            k for k in run["kernels"] if not kernel_names.is_torch_kernel(k) or kernel_names.is_torch_copy_or_fill(k)
        ],
    }
    checked = judge(spec, profiled, input_sets, run, own_kernels=own_kernels)
    if checked.passed:
        return ""
    return (
        "the call, profiled at that size, did not run code of its own with the right answer, so its time "
        "earns no points:\n" + checked.message
    )


def _faster_than_its_kernels(outcome: dict, busy: float, observed: bool) -> str:
    """'' unless the time the grade is computed from (median_ms: of the whole calls where work
    went unseen, so work on any stream counts) is well below the GPU's busy time in the
    profiled call (`observed`: in the observed calls, per call)."""
    timed = outcome["timing"]["median_ms"]
    if timed >= BUSY_FACTOR * busy:
        return ""
    if observed:
        return (
            f"its timed calls ran faster than its kernels, observed from outside the test process: {timed:.3f} ms "
            f"timed against {busy:.3f} ms of GPU work per call, so its time earns no points (does it compute "
            f"another way when timed?)"
        )
    return (
        f"its timed calls ran faster than the kernels it runs when profiled: {timed:.3f} ms timed against "
        f"{busy:.3f} ms of its kernels under the profiler, so its time earns no points (does it compute "
        f"another way while the profiler is on?)"
    )
