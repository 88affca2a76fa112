"""The op contract: what a unit declares once for each op its tests call.

A suite (solutions/<unit>/public_tests.py) sets OPS = {name: Op(...)}; a case's inputs name
the op they run under "op" (a suite of one op may leave it out). The harness calls the op,
the judge compares its outputs with the reference within the tolerance: neither knows any
unit's ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Tolerance = tuple[float, float]  # (atol, rtol): |got - expected| <= atol + rtol * |expected|


@dataclass(frozen=True)
class NewPython:
    """A check of the built package in a Python of its own (day07's fresh import): the grader
    starts it itself, in the sandbox with the package's install folder on its path, and judges
    what it printed; the test process's answer counts only in the notebook."""

    argv: tuple[str, ...]  # after the interpreter: ("-c", script, ...)
    problem: Callable  # (exit code or None, stdout, stderr) -> "" or what is wrong; may raise AssertionError


@dataclass(frozen=True)
class Op:
    call: Callable  # (ext, inputs) -> a tensor or a tuple of them: runs the student's op
    reference: Callable  # (inputs) -> tuple of tensors, computed in float64 from the inputs as given
    outputs: tuple[str, ...]  # the outputs' names, in order: what a mismatch message calls them
    dtypes: Callable  # (inputs) -> tuple of the dtypes the outputs must have
    tolerance: Callable  # (inputs) -> one Tolerance for every output, or {output name: Tolerance}
    exact_share: tuple[tuple[str, float], ...] = ()  # (output, least share of its elements equal to the
    # reference): integer outputs whose tolerance allows a
    # near tie to round either way, but only rarely
    against_itself: bool = False  # reference takes (inputs, outputs): what is right follows from the op's
    # own raw outputs (gradcheck), worked out by the judge, not the child
    host_outputs: tuple[str, ...] = ()  # outputs the call makes on the CPU (a count, a verdict); every
    # other one must come back on the case's device
    diagnose: Callable | None = None  # (output name, got, inputs) -> lines naming the mistake a wrong
    # output follows: a unit's own reading of a mismatch (day06: which term of GELU's derivative
    # is off), shown beside course.hints' patterns
    in_place: tuple[str, ...] = ()  # outputs that are inputs the op writes in place, returned to be
    # judged: they share the inputs' memory by design (course.cases.Case.called_fresh)
    from_files: Callable | None = None  # (the submission's folder) -> "" or what is wrong: a check of
    # the student's files alone. The grader makes it on its own copy, read before the build ran
    # (autograder/parent_checks.py); the test process's answer counts only in the notebook
    new_python: NewPython | None = None  # a check the grader runs in a Python of its own (NewPython)

    @property
    def checked_by_grader(self) -> bool:
        """Whether the grader makes this op's check itself: the test process never runs it."""
        return self.from_files is not None or self.new_python is not None

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


def flag(
    call: Callable,
    name: str,
    tolerance: Callable = exact,
    from_files: Callable | None = None,
    new_python: NewPython | None = None,
) -> Op:
    """An op whose one output is a bool tensor that must be True (gradcheck's verdict, say).
    `from_files`, `new_python`: where the grader makes the check itself (Op's fields)."""
    return Op(
        call,
        lambda inputs: (torch.tensor(True),),
        (name,),
        lambda inputs: (torch.bool,),
        tolerance,
        host_outputs=(name,),
        from_files=from_files,
        new_python=new_python,
    )


def gradients(function: Callable, inputs: dict, names: tuple[str, ...], upstream: str) -> tuple:
    """The gradients of function(*the inputs `names`) for those inputs, with inputs[upstream] as
    the gradient of its output: autograd through the student's op. The leaves are new tensors on
    the inputs' storage, so the inputs themselves stay as the harness made them."""
    leaves = tuple(inputs[name].detach().requires_grad_() for name in names)
    return torch.autograd.grad(function(*leaves), leaves, inputs[upstream])


# torch.autograd.gradcheck's defaults: the step of its central differences, and how far the
# two Jacobians may differ: |backward - differences| <= atol + rtol * |differences|.
GRADCHECK_STEP = 1e-6
GRADCHECK_TOLERANCE: Tolerance = (1e-5, 1e-3)
GRADCHECK_OUTPUTS = ("forward at each input nudged by +-h", "jacobian from backward")


def jacobian_probe(function: Callable, inputs: dict, names: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The raw data torch.autograd.gradcheck compares, for the judge to compare (gradcheck_op):
    function(*the inputs `names`) returns one tensor of n_out elements; the inputs have n_in.
    - nudged [2, n_in, n_out]: the output with input element i raised (0) or lowered (1) by
      GRADCHECK_STEP, in place, as gradcheck nudges it;
    - backward [n_in, n_out]: column j is the gradient of output element j, one backward each."""
    leaves = tuple(
        inputs[name].detach().clone(memory_format=torch.contiguous_format).requires_grad_() for name in names
    )
    output = function(*leaves)
    if not isinstance(output, torch.Tensor):
        raise TypeError(f"gradcheck: the op returned a {type(output).__name__}, not a tensor")
    n_in, n_out = sum(leaf.numel() for leaf in leaves), output.numel()
    backward = torch.zeros(n_in, n_out, dtype=torch.float64)
    for j in range(n_out):
        seed = torch.zeros(n_out, dtype=output.dtype, device=output.device)
        seed[j] = 1
        grads = torch.autograd.grad(output, leaves, seed.view_as(output), retain_graph=True, allow_unused=True)
        backward[:, j] = torch.cat(
            [
                (g if g is not None else torch.zeros_like(leaf)).detach().reshape(-1).cpu()
                for g, leaf in zip(grads, leaves)
            ]
        ).double()
    nudged = torch.zeros(2, n_in, n_out, dtype=torch.float64)
    row = 0
    for leaf in leaves:
        flat = leaf.data.view(-1)
        for k in range(flat.numel()):
            original = flat[k].item()
            for side, step in enumerate((GRADCHECK_STEP, -GRADCHECK_STEP)):
                flat[k] = original + step
                nudged[side, row] = function(*leaves).detach().reshape(-1).cpu().double()
            flat[k] = original
            row += 1
    return nudged, backward


def _gradcheck_expected(names: tuple[str, ...], output_like: str) -> Callable:
    def expected(inputs: dict, outputs: tuple) -> tuple[torch.Tensor, torch.Tensor]:
        """(the nudged outputs as returned, the Jacobian they give by central differences): the
        backward's must match the latter. Shapes come from the inputs, never from the child."""
        nudged = outputs[0]
        n_in = sum(inputs[name].numel() for name in names)
        shape = (2, n_in, inputs[output_like].numel())
        if tuple(nudged.shape) != shape:  # the judge reports the shape; nothing to difference
            return torch.zeros(shape, dtype=torch.float64), torch.zeros(shape[1:], dtype=torch.float64)
        return nudged, (nudged[0].double() - nudged[1].double()) / (2 * GRADCHECK_STEP)

    return expected


def gradcheck_op(call: Callable, names: tuple[str, ...], output_like: str = "x") -> Op:
    """torch.autograd.gradcheck with the verdict taken by the judge: `call(ext, inputs)` returns
    jacobian_probe of the op at the inputs `names` (float64), whose one output has the shape of
    input `output_like`. The backward's Jacobian must match the forward's finite differences
    within gradcheck's tolerance, as gradcheck requires, so the op is judged against itself."""
    return Op(
        call,
        _gradcheck_expected(names, output_like),
        GRADCHECK_OUTPUTS,
        lambda inputs: (torch.float64, torch.float64),
        lambda inputs: dict(zip(GRADCHECK_OUTPUTS, (EXACT, GRADCHECK_TOLERANCE))),
        against_itself=True,
        host_outputs=GRADCHECK_OUTPUTS,
    )
