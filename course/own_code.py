"""What an op may ask of PyTorch while it computes: the own-code check's allowlist.

An own-code case (course.cases.OWN_KERNEL) names every PyTorch operator the op's call reached,
seen twice: by the profiler in the call whose outputs are judged, and by a dispatch mode in a
call without the profiler (course/harness.py). Of those, the op may call only the structural
ops below (memory to write into, and laid out as its kernels read it), and the few its unit adds
for one op (a suite's OWN_CODE_OPS: {op name: ops}), where the reference itself needs them.
Everything else is PyTorch computing in the op's place, named in the verdict.

The judge runs this in the grader's process, which never loads student code: the operators its
own dispatcher knows are PyTorch's. Names in other namespaces are the submission's own
operators, autograd's nodes or a profiler's ranges, none of which compute with PyTorch.
"""

from __future__ import annotations

import torch

# Each of these makes, shapes or fills memory; none computes an output from the inputs' values.
STRUCTURAL_OPS = frozenset(
    {
        # new memory for the outputs and the kernels' scratch (day03's partial sums), as
        # at::empty*, torch.empty_like and x.new_empty make it
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::new_empty",
        "aten::new_empty_strided",
        # the same filled with a constant: a sum over no rows is 0 (day06's dbias), an absent
        # weight is 1 (day04's, day07's at::full), scratch a kernel accumulates into starts at 0;
        # at::empty fills with NaN itself while the course's calls run deterministic
        # (course.harness.empty_is_nan)
        "aten::zeros",
        "aten::zeros_like",
        "aten::new_zeros",
        "aten::ones",
        "aten::ones_like",
        "aten::new_ones",
        "aten::full",
        "aten::full_like",
        "aten::new_full",
        "aten::fill_",
        "aten::zero_",
        # views: another shape or stride over the same memory (a [..., D] input as rows, an
        # autograd leaf made of an input by the course's own calls, course.ops.gradients)
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::view_as",
        "aten::reshape_as",
        "aten::expand_as",
        "aten::unflatten",
        "aten::as_strided",
        "aten::expand",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::flatten",
        "aten::select",
        "aten::slice",
        "aten::narrow",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::detach",
        "aten::alias",
        # a contiguous copy for kernels that walk memory in order (x.contiguous(), day09's
        # 16-byte aligned clone), and a dtype's conversion of an input or output where the
        # contract asks for another dtype than the kernel's (day09's dweight in x's dtype)
        "aten::contiguous",
        "aten::clone",
        "aten::copy_",
        "aten::to",
        "aten::_to_copy",
        "aten::type_as",
        # a named range of the profiler's (torch.profiler.record_function): it computes nothing
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
    }
)


# The namespaces of PyTorch's operators: those its dispatcher knows once torch is imported, taken
# when this module is (course.judge imports it before any build loads: the operators a submission
# registers are not among them), and those of libraries torch registers later, when imported.
TORCH_NAMESPACES = frozenset(name.split("::")[0] for name in torch._C._dispatch_get_all_op_names()) | {
    "aten",
    "prims",
    "inductor",
    "quantized",
    "_quantized",
    "torchvision",
}


def torch_ops(names) -> set[str]:
    """Of the names a call's observers reported, PyTorch's operators, without their overloads."""
    return {name.split(".")[0] for name in names if "::" in name and name.split("::")[0] in TORCH_NAMESPACES}


def allowed_ops(spec, op_name: str | None) -> frozenset[str]:
    """STRUCTURAL_OPS and what the suite adds for the op named `op_name` (its OPS key)."""
    extra = getattr(spec, "OWN_CODE_OPS", {}).get(op_name, ())
    return STRUCTURAL_OPS | frozenset(extra)


def ops_problem(spec, op_name: str | None, profiled, seen) -> str:
    """'' when both observers saw the op call PyTorch only for what it may (`seen` None: no
    dispatch mode watched, as in a perf case's profiled call); else why not."""
    profiled_ops, seen_ops = torch_ops(profiled), torch_ops(seen or ())
    foreign = sorted((profiled_ops | seen_ops) - allowed_ops(spec, op_name))
    if foreign:
        return (
            f"the op called {', '.join(foreign)}: PyTorch computed in its place. Write the computation "
            "yourself: an op may call PyTorch only to allocate, fill, view, copy or convert tensors"
        )
    if not profiled_ops or (seen is not None and not seen_ops):
        return (
            "the op's call showed no PyTorch op at all, not even the allocation of its outputs: it returned "
            "tensors kept from an earlier call, or its work was hidden from the profiler"
        )
    unprofiled = sorted(seen_ops - profiled_ops)
    if unprofiled:
        return (
            f"the op called {', '.join(unprofiled)} while no profiler was on, and not under it: it must "
            "compute the same way whether or not it is watched"
        )
    return ""
