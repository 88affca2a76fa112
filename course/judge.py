"""Decides pass or fail for one case from what the harness returned.

In the autograder this runs in the parent, which never loads student code; the
reference is computed here, in float64.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, Case


@dataclass
class Verdict:
    passed: bool
    message: str = ""


def describe_mismatch(name: str, got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """'' when got matches expected within atol + rtol*|expected|; else where and by how much."""
    if tuple(got.shape) != tuple(expected.shape):
        return f"{name}: shape {list(got.shape)}, expected {list(expected.shape)}"
    if got.numel() == 0:
        return ""
    got64, exp64 = got.double(), expected.double()
    error = (got64 - exp64).abs()
    allowed = atol + rtol * exp64.abs()
    bad = ~(error <= allowed)  # NaN counts as bad
    if not bad.any():
        return ""
    excess = torch.where(torch.isnan(error), torch.full_like(error, float("inf")), error - allowed)
    worst = torch.unravel_index(torch.argmax(excess), excess.shape)
    index = tuple(int(i) for i in worst)
    finite = error[~torch.isnan(error)]
    relative = (finite / exp64.abs()[~torch.isnan(error)].clamp_min(1e-300)) if finite.numel() else finite
    lines = [
        f"{name}: {int(bad.sum())} of {got.numel()} elements differ (shape {list(got.shape)})",
        f"  worst at index {list(index)}: expected {exp64[index].item():.8g}, got {got64[index].item():.8g}",
        f"  max abs error {finite.max().item() if finite.numel() else float('nan'):.3g}, "
        f"max rel error {relative.max().item() if relative.numel() else float('nan'):.3g} "
        f"(allowed: {atol:g} + {rtol:g}*|expected|)",
    ]
    if torch.isnan(got64).any():
        lines.append(f"  {int(torch.isnan(got64).sum())} NaN in the output: outputs start out as NaN here, "
                     "so NaN usually means an element your code never wrote")
    return "\n".join(lines)


def _judge_error(case: Case, result: dict) -> Verdict:
    error = result.get("error")
    wanted = " and ".join(repr(w) for w in case.error_words)
    if error is None:
        return Verdict(False, f"expected an error naming {wanted}, but the call returned normally")
    kind, message = error
    if "TODO(" in message:
        return Verdict(False, message.strip()[:2000])
    if kind not in ("RuntimeError", "ValueError", "TypeError", "IndexError"):
        return Verdict(False, f"expected a RuntimeError or ValueError, got {kind}: {message[:300]}")
    missing = [w for w in case.error_words if not re.search(rf"\b{re.escape(w)}\b", message, re.IGNORECASE)]
    if missing:
        return Verdict(False, f"the error message should mention {' and '.join(map(repr, missing))}; "
                              f"it was: {message.strip()[:300]}")
    return Verdict(True)


def _is_torch_kernel(signature: str) -> bool:
    """Judged by the kernel's own name, not its parameter types (an accessor is at::...)."""
    name = signature.replace("(anonymous namespace)", "").split("(")[0].split("<")[0]
    return "at::" in name or "cub::" in name or "c10::" in name


def _own_kernel_problem(spec, case: Case, result: dict) -> str:
    called = sorted(set(result.get("ops", ())) & set(spec.FORBIDDEN_OPS))
    if called:
        return f"the op called {', '.join(called)}: write the computation yourself"
    if case.device.startswith("cuda"):
        own = [k for k in result.get("kernels", ()) if not _is_torch_kernel(k)]
        if not own:
            return "no kernel of your own ran on the GPU (the profiler saw only PyTorch's)"
    return ""


def judge(spec, case: Case, input_sets: list[dict], result: dict) -> Verdict:
    if "exception" in result:  # the harness itself raised: the op failed on valid input
        return Verdict(False, result["exception"])
    if case.kind == "error":
        return _judge_error(case, result)
    problems = []
    for index, (inputs, outputs) in enumerate(zip(input_sets, result["outputs"])):
        expected = spec.reference(inputs)  # float64
        names = spec.output_names(inputs) if hasattr(spec, "output_names") else spec.OUTPUT_NAMES
        if len(outputs) != len(expected):
            return Verdict(False, f"returned {len(outputs)} outputs, expected {len(expected)} "
                                  f"({', '.join(names)})")
        tolerances = spec.tolerance(inputs)  # (atol, rtol), or {output name: (atol, rtol)}
        dtypes = spec.output_dtypes(inputs)
        for name, got, exp, dtype in zip(names, outputs, expected, dtypes):
            atol, rtol = tolerances[name] if isinstance(tolerances, dict) else tolerances
            if got.dtype != dtype:
                problems.append(f"{name}: dtype {got.dtype}, expected {dtype}")
                continue
            mismatch = describe_mismatch(name, got, exp, atol, rtol)
            if mismatch:
                problems.append(("on the second call, with new values in the same buffers: " if index else "")
                                + mismatch)
        if problems:
            break
    if INPUTS_UNCHANGED in case.checks and not problems:
        for name, after in result.get("inputs_after", {}).items():
            if not torch.equal(after, input_sets[-1][name]):
                problems.append(f"the op changed its input {name}: inputs must be left as they were")
    if OWN_KERNEL in case.checks and not problems:
        problem = _own_kernel_problem(spec, case, result)
        if problem:
            problems.append(problem)
    if problems:
        return Verdict(False, "\n".join(problems + ([f"hint: {case.hint}"] if case.hint else [])))
    return Verdict(True)
