"""The own-code check's allowlist (course/own_code.py), its observers' comparison, and the names
in a submission's sources that would hide PyTorch's work from it (autograder/hidden_calls.py)."""

import os

import pytest
import torch

from autograder.hidden_calls import hidden_calls, hiding_problems
from course.harness import _OpsSeen
from course.own_code import ops_problem
from course.spec import units

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAY01 = units.load("day01_relu_bias").tests(hidden=True)
DAY09 = units.load("day09_rmsnorm_int8").tests(hidden=True)
ALLOCATES = ["aten::empty", "aten::empty_strided"]


def test_structural_ops_pass_and_any_other_is_named():
    structural = [*ALLOCATES, "aten::contiguous", "aten::copy_", "aten::view", "detach", "fast_layernorm::forward"]
    assert ops_problem(DAY01, "forward", structural, ["aten::empty", "aten::view"]) == ""
    # a LayerNorm of ops no list of forbidden ones named
    composed = ops_problem(DAY01, "forward", [*ALLOCATES, "aten::sum", "aten::sub"], ["aten::mul.Tensor"])
    assert composed.startswith("the op called aten::mul, aten::sub, aten::sum:")
    assert "aten::relu" in ops_problem(DAY01, "forward", ALLOCATES, ["aten::empty", "aten::relu"])


def test_a_unit_adds_ops_for_one_op_only():
    assert ops_problem(DAY09, "perf_autograd", [*ALLOCATES, "aten::sum"], None) == ""
    assert "aten::sum" in ops_problem(DAY09, "quant", [*ALLOCATES, "aten::sum"], ["aten::empty"])


def test_the_observers_must_agree_and_see_something():
    hidden = ops_problem(DAY01, "forward", ALLOCATES, ["aten::empty", "aten::clone"])
    assert "aten::clone while no profiler was on" in hidden
    assert "showed no PyTorch op" in ops_problem(DAY01, "forward", ["ReluBias"], ["aten::empty"])
    assert "showed no PyTorch op" in ops_problem(DAY01, "forward", ALLOCATES, [])
    assert ops_problem(DAY01, "forward", ALLOCATES, None) == ""  # a perf case's call: no mode watched


def test_the_dispatch_mode_sees_inside_an_operator_of_the_submissions():
    """As day07 and day09 register theirs: a kernel for the CPU alone, and torch.library.custom_op's
    (one for every device, here writing an input in place)."""
    library = torch.library.Library("own_code_toy", "DEF")
    library.define("scale(Tensor x) -> Tensor")
    library.impl("scale", lambda x: x.mul(2), "CPU")

    @torch.library.custom_op("own_code_toy::shift", mutates_args=("residual",))
    def shift(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        residual.add_(x)
        return x.neg()

    x, residual = torch.randn(5), torch.zeros(5)
    with _OpsSeen() as seen:
        y, z = torch.ops.own_code_toy.scale(x), shift(x, residual)
    assert torch.equal(y, 2 * x) and torch.equal(z, -x) and torch.equal(residual, x)
    assert {"own_code_toy::scale", "aten::mul", "own_code_toy::shift", "aten::add_", "aten::neg"} <= seen.names


@pytest.mark.parametrize(
    "line, name",
    [
        ("c10::impl::ExcludeDispatchKeyGuard unseen(c10::DispatchKey::Python);", "ExcludeDispatchKeyGuard"),
        ("with torch._C._DisableTorchDispatch():", "_DisableTorchDispatch"),
        ("if torch.autograd._profiler_enabled():", "_profiler_enabled"),
        ("} else if (at::hasThreadLocalCallbacks()) {", "hasThreadLocalCallbacks"),
        ("return at::native::layer_norm(x, {d}, g, b, eps);", "native::"),
        ("#include <ATen/ops/relu_native.h>", "relu_native.h"),
        ("at::_ops::relu::redispatch(keys, x);", "redispatch"),
    ],
)
def test_a_hiding_call_is_named(line, name):
    (problem,) = hiding_problems(f"// ok\n{line}\n")
    assert problem.startswith("line 2 names") and name in problem


def test_the_courses_sources_hide_nothing():
    """Every unit's reference and template (day09's autograd guard below autograd included)."""
    for root in ("solutions", "src_templates"):
        for unit in sorted(os.listdir(os.path.join(REPO, root))):
            assert hidden_calls(os.path.join(REPO, root, unit)) == (), unit
