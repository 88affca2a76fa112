"""The op contract: what a unit declares once for each op its tests call.

A suite (solutions/<unit>/public_tests.py) sets OPS = {name: Op(...)}; a case's inputs name
the op they run under "op" (a suite of one op may leave it out). The harness calls the op,
the judge compares its outputs with the reference within the tolerance: neither knows any
unit's ops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

Tolerance = tuple[float, float]  # (atol, rtol): |got - expected| <= atol + rtol * |expected|


@dataclass(frozen=True)
class Op:
    call: Callable            # (ext, inputs) -> a tensor or a tuple of them: runs the student's op
    reference: Callable       # (inputs) -> tuple of tensors, computed in float64 from the inputs as given
    outputs: tuple[str, ...]  # the outputs' names, in order: what a mismatch message calls them
    dtypes: Callable          # (inputs) -> tuple of the dtypes the outputs must have
    tolerance: Callable       # (inputs) -> one Tolerance for every output, or {output name: Tolerance}
    exact_share: tuple[tuple[str, float], ...] = ()  # (output, least share of its elements equal to the
                                                     # reference): integer outputs whose tolerance allows a
                                                     # near tie to round either way, but only rarely

    def tolerances(self, inputs: dict) -> dict[str, Tolerance]:
        allowed = self.tolerance(inputs)
        return allowed if isinstance(allowed, dict) else {name: allowed for name in self.outputs}


def op_for(spec, inputs: dict) -> Op:
    """The op a case's inputs name."""
    if "op" in inputs:
        return spec.OPS[inputs["op"]]
    (only,) = spec.OPS.values()
    return only


def call(spec, ext, inputs: dict):
    return op_for(spec, inputs).call(ext, inputs)


# ---- pieces several suites declare their ops with ----

EXACT: Tolerance = (0.0, 0.0)


def exact(inputs: dict) -> Tolerance:
    """The tolerance of outputs that are counts or flags: no error at all."""
    return EXACT


def dtypes_like(name: str, count: int = 1) -> Callable:
    """A dtypes function: `count` outputs, each of the dtype of input `name`."""
    return lambda inputs: (inputs[name].dtype,) * count


def flag(call: Callable, name: str, tolerance: Callable = exact) -> Op:
    """An op whose one output is a bool tensor that must be True (gradcheck's verdict, say)."""
    return Op(call, lambda inputs: (torch.tensor(True),), (name,), lambda inputs: (torch.bool,), tolerance)


def gradients(function: Callable, inputs: dict, names: tuple[str, ...], upstream: str) -> tuple:
    """The gradients of function(*the inputs `names`) for those inputs, with inputs[upstream] as
    the gradient of its output: autograd through the student's op. The leaves are new tensors on
    the inputs' storage, so the inputs themselves stay as the harness made them."""
    leaves = tuple(inputs[name].detach().requires_grad_() for name in names)
    return torch.autograd.grad(function(*leaves), leaves, inputs[upstream])


def gradcheck(function: Callable, inputs: dict, names: tuple[str, ...]) -> torch.Tensor:
    """Whether torch.autograd.gradcheck finds function's backward consistent with its forward at
    the inputs `names`, as a bool tensor."""
    leaves = tuple(inputs[name].detach().clone().requires_grad_() for name in names)  # nudged in place
    return torch.tensor(torch.autograd.gradcheck(function, leaves, raise_exception=False))
