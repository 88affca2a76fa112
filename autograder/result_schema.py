"""The shape of a raw result a child may hand back, checked before the judge reads it.

The child runs student code, so its result file is data from an adversary: every part the
judge reads for the case must be there, of the right type, and nothing may be left out to be
taken as a pass (an empty list of outputs, a missing profile). How many outputs a call returns
is the op contract's (course/ops.py), never the child's; values, dtypes, shapes and the count
of the outputs are the judge's to compare, with its messages.
"""

from __future__ import annotations

import torch

from autograder.untrusted_files import finite_number
from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, SIDE_STREAM, Case
from course.ops import op_for

TIMING_KEYS = ("median_ms", "spread", "reps")


def _tensor_problem(name: str, value) -> str:
    if not isinstance(value, torch.Tensor):
        return f"{name} is a {type(value).__name__}, not a tensor"
    if value.layout != torch.strided or value.device.type != "cpu" or value.is_quantized:
        return f"{name} is not a plain tensor on the CPU"
    return ""


def _strings_problem(name: str, value) -> str:
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        return f"{name} is not a list of names"
    return ""


def _outputs_problem(spec, input_sets: list[dict], result: dict) -> str:
    outputs, devices = result.get("outputs"), result.get("output_devices")
    if not isinstance(outputs, (list, tuple)):
        return "outputs is not a list"
    if len(outputs) != len(input_sets):
        return f"outputs holds {len(outputs)} set(s) of outputs for {len(input_sets)} set(s) of inputs"
    if not isinstance(devices, (list, tuple)) or len(devices) != len(outputs):
        return "the devices of the outputs are missing"
    for number, (inputs, got, where) in enumerate(zip(input_sets, outputs, devices)):
        if not isinstance(got, (list, tuple)):
            return f"output set {number} is not a tuple"
        if _strings_problem("", where) or len(where) != len(got):
            return f"the devices of output set {number} are not one name per output"
        names = op_for(spec, inputs).outputs
        for position, value in enumerate(got):  # every one sent, the op's or not
            problem = _tensor_problem(names[position] if position < len(names) else f"output {position + 1}", value)
            if problem:
                return problem
    return ""


def _as_the_op_returns(spec, input_sets: list[dict], result: dict) -> bool:
    """Whether every output set holds as many outputs as the op contract names: the count is the
    suite's, never the child's. Where it is not, the judge fails the case on its count before
    it reads anything else of the result."""
    return all(len(got) == len(op_for(spec, inputs).outputs) for inputs, got in zip(input_sets, result["outputs"]))


def _fresh_call_problem(spec, input_sets: list[dict], result: dict) -> str:
    """'' when a case called last on new buffers (Case.called_fresh) holds the first call's
    outputs as they were after the last call, and the memory of every output and input."""
    after, memory = result.get("first_after"), result.get("memory")
    names = op_for(spec, input_sets[0]).outputs
    if not isinstance(after, (list, tuple)) or len(after) != len(names):
        return "the first call's outputs after the last call are missing"
    problem = next(
        filter(None, (_tensor_problem(f"{name} after the last call", v) for name, v in zip(names, after))), ""
    )
    if problem:
        return problem
    if not isinstance(memory, dict) or set(memory) != {"first", "last", "first_inputs", "last_inputs"}:
        return "where the outputs and inputs lie in memory is missing"
    for key, spans in memory.items():
        # the outputs: one span each; the inputs: as many as the spec's layouts made
        count = len(after) if key in ("first", "last") else None
        if not isinstance(spans, (list, tuple)) or len(spans) != (count or len(spans)) or not all(map(_is_span, spans)):
            return f"where the {key.replace('_', ' ')} lie in memory is not one [start, end) per tensor"
    return ""


def _is_span(span) -> bool:
    return (
        isinstance(span, (list, tuple))
        and len(span) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in span)
        and 0 <= span[0] <= span[1]
    )


def timing_problem(result, key: str = "timing") -> str:
    timing = result.get(key) if isinstance(result, dict) else None
    if not isinstance(timing, dict):
        return f"no {key.replace('_', ' ')}"
    for key in TIMING_KEYS:
        if not finite_number(timing.get(key)):
            return f"timing {key} is not a number"
    return ""


def result_problem(spec, case: Case, input_sets: list[dict], result, watched: bool = True) -> str:
    """'' when `result` holds everything the judge reads for `case`; else what is wrong.
    `watched`: an own-code case's call was also watched by a dispatch mode ("ops_seen"), as
    every values case's is; a perf case's profiled call is not."""
    if not isinstance(result, dict):
        return f"the result is a {type(result).__name__}, not a dict"
    if "exception" in result:
        return "" if isinstance(result["exception"], str) else "its exception message is not text"
    if case.kind == "error":
        error = result.get("error", ())
        if error is None:
            return ""
        if not (isinstance(error, (list, tuple)) and len(error) == 2 and all(isinstance(e, str) for e in error)):
            return "the error is neither None nor (type name, message)"
        return ""
    if case.kind == "perf":
        return timing_problem(result) or _outputs_problem(spec, input_sets, result)
    problem = _outputs_problem(spec, input_sets, result)
    if not problem and not _as_the_op_returns(spec, input_sets, result):
        return ""  # the judge says how many outputs it expected
    if not problem and case.called_fresh and len(input_sets) > 1:
        problem = _fresh_call_problem(spec, input_sets, result)
    # (a side-stream run records no inputs after the call: it copies them in on its stream)
    if not problem and INPUTS_UNCHANGED in case.checks and SIDE_STREAM not in case.checks:
        after = result.get("inputs_after")
        names = [k for k, v in input_sets[-1].items() if isinstance(v, torch.Tensor)]
        if not isinstance(after, dict) or set(after) != set(names):
            return "the inputs after the call are missing"
        problem = next(filter(None, (_tensor_problem(f"input {k}", after[k]) for k in names)), "")
    if not problem and OWN_KERNEL in case.checks:
        problem = _strings_problem("the profiled ops", result.get("ops"))
        if not problem and watched:
            problem = _strings_problem("the ops the dispatch mode saw", result.get("ops_seen"))
        if not problem and case.device.startswith("cuda"):
            problem = _strings_problem("the profiled kernels", result.get("kernels"))
    return problem


def profiled_run_problem(spec, case: Case, input_sets: list[dict], result) -> str:
    """result_problem of a perf case's profiled call at the timed size (autograder/timed_kernels.py,
    profiled_run: `case` is its profiled_case), which also holds the GPU's busy time in ms."""
    problem = result_problem(spec, case, input_sets, result, watched=False)
    if problem or "exception" in result:
        return problem
    busy = result.get("busy_ms")
    if not finite_number(busy) or busy < 0:
        return "the GPU's busy time in the profiled call is not a number of ms"
    return ""
