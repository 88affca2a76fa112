"""Host time of day09's small RMSNorm calls, Triton's and CUDA's against torch's, piece by
piece: where a host-bound call (4096x1024 forward + backward, 16384x1024 quantization)
spends its time.

    python bench/rmsnorm_host.py [--reps 300] [--profile]

The method is bench/host_time.py's. --profile: instead, cProfile's busiest Python functions in
Triton's forward + backward.
"""

import argparse
import cProfile
import os
import pstats
import sys

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.host_time import print_groups
from bench.reference_build import build_reference

EPS = 1e-6


def _norm_inputs(dtype, rows=4096, cols=1024):
    """x, w, dy and x and w as leaves that require grad."""
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    w = (torch.rand(cols, device="cuda") + 0.5).to(dtype)
    return x, w, torch.randn_like(x), (x.detach().requires_grad_(), w.detach().requires_grad_())


class _CudaOpsInPythonFunction(torch.autograd.Function):
    """The CUDA operators in a Python autograd.Function, as the Triton path records its graph:
    what the Python Function and the engine's call into Python cost, without Triton's launches."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        y, rstd = torch.ops.rmsnorm_int8.rms_norm.default(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        ctx.mark_non_differentiable(rstd)
        return y, rstd

    @staticmethod
    def backward(ctx, dy, _drstd):
        x, weight, rstd = ctx.saved_tensors
        dx, dweight = torch.ops.rmsnorm_int8.rms_norm_backward.default(dy, x, weight, rstd)
        return dx, dweight, None


def groups(ext, triton_ops, dtype):
    x, w, dy, leaves = _norm_inputs(dtype)
    rows, cols = x.shape
    kept = {
        "triton": ext.rms_norm(*leaves, EPS, backend="triton"),
        "cuda": ext.rms_norm(*leaves, EPS, backend="cuda"),
        "python": _CudaOpsInPythonFunction.apply(*leaves, EPS)[0],
        "torch": F.rms_norm(leaves[0], (cols,), leaves[1], EPS),
    }  # graphs the backward group runs again
    y, rstd = triton_ops._rms_norm(x, w, EPS)
    # The launches as the functions make them (rmsnorm_triton.py), without the functions.
    block = triton.next_power_of_2(cols)
    forward_kernel, backward_kernel = triton_ops.rms_norm_forward_kernel, triton_ops.rms_norm_backward_kernel
    programs = min(rows, 4 * triton_ops._multiprocessors(x.device))
    partials = torch.empty(programs, cols, device="cuda")
    dx = torch.empty_like(x)
    xq = torch.randn(16384, cols, device="cuda", dtype=dtype)
    q, scale = torch.empty(xq.shape, device="cuda", dtype=torch.int8), torch.empty(16384, device="cuda")
    return {
        "forward + backward through autograd, 4096x1024": {
            "triton: rms_norm (autograd.Function)": lambda: torch.autograd.grad(
                ext.rms_norm(*leaves, EPS, backend="triton"), leaves, dy
            ),
            "cuda: rms_norm (C++ autograd)": lambda: torch.autograd.grad(
                ext.rms_norm(*leaves, EPS, backend="cuda"), leaves, dy
            ),
            "torch: F.rms_norm": lambda: torch.autograd.grad(
                F.rms_norm(leaves[0], (cols,), leaves[1], EPS), leaves, dy
            ),
        },
        "forward recording the graph, 4096x1024": {
            "triton: rms_norm (autograd.Function)": lambda: ext.rms_norm(*leaves, EPS, backend="triton"),
            "cuda ops in a Python autograd.Function": lambda: _CudaOpsInPythonFunction.apply(*leaves, EPS),
            "cuda: rms_norm (C++ autograd)": lambda: ext.rms_norm(*leaves, EPS, backend="cuda"),
            "torch: F.rms_norm": lambda: F.rms_norm(leaves[0], (cols,), leaves[1], EPS),
        },
        "backward of a kept graph (autograd.grad, retain_graph), 4096x1024": {
            name: (lambda y=y: torch.autograd.grad(y, leaves, dy, retain_graph=True))
            for name, y in (
                ("triton: rms_norm (autograd.Function)", kept["triton"]),
                ("cuda ops in a Python autograd.Function", kept["python"]),
                ("cuda: rms_norm (C++ autograd)", kept["cuda"]),
                ("torch: F.rms_norm", kept["torch"]),
            )
        },
        "forward, no grad": {
            "triton: the kernel's launch alone": lambda: forward_kernel[(rows,)](
                x,
                w,
                y,
                rstd,
                cols,
                EPS,
                HAS_WEIGHT=True,
                BLOCK=block,
                num_warps=triton_ops._warps(block, x.element_size()),
            ),
            "triton: the function (checks, outputs, launch)": lambda: triton_ops._run_direct(
                triton_ops._rms_norm, x, w, EPS
            ),
            "triton: torch.ops (the triton_op)": lambda: torch.ops.rmsnorm_triton.rms_norm(x, w, EPS),
            "cuda: torch.ops": lambda: torch.ops.rmsnorm_int8.rms_norm(x, w, EPS),
            "torch: F.rms_norm": lambda: F.rms_norm(x, (cols,), w, EPS),
        },
        "backward, no graph": {
            "triton: the kernel's launch alone": lambda: backward_kernel[(programs,)](
                dy,
                x,
                w,
                rstd,
                dx,
                partials,
                rows,
                cols,
                triton.cdiv(rows, programs),
                HAS_WEIGHT=True,
                BLOCK=block,
                num_warps=triton_ops._warps(block, 4),
            ),
            "triton: partials.sum(0).to(dtype)": lambda: partials.sum(0).to(dtype),
            "triton: the function": lambda: triton_ops._run_direct(triton_ops._rms_norm_backward, dy, x, w, rstd),
            "cuda: torch.ops": lambda: torch.ops.rmsnorm_int8.rms_norm_backward(dy, x, w, rstd),
        },
        "quantization, 16384x1024": {
            "triton: the kernel's launch alone": lambda: triton_ops.rms_norm_quant_kernel[(16384,)](
                xq,
                None,
                w,
                q,
                scale,
                cols,
                EPS,
                HAS_RESIDUAL=False,
                BLOCK=block,
                num_warps=triton_ops._quant_warps(block),
            ),
            "triton: rms_norm_quant (eager, direct)": lambda: ext.rms_norm_quant(xq, w, EPS, backend="triton"),
            "triton: torch.ops (the triton_op)": lambda: torch.ops.rmsnorm_triton.rms_norm_quant(xq, w, EPS),
            "cuda: rms_norm_quant": lambda: ext.rms_norm_quant(xq, w, EPS, backend="cuda"),
        },
    }


def profile_triton(ext, dtype, calls: int = 300) -> None:
    _, _, dy, leaves = _norm_inputs(dtype)

    def fwd_bwd():
        return torch.autograd.grad(ext.rms_norm(*leaves, EPS, backend="triton"), leaves, dy)

    for _ in range(20):
        fwd_bwd()
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fwd_bwd()
    profiler.disable()
    torch.cuda.synchronize()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    parser.add_argument("--profile", action="store_true", help="cProfile Triton's forward + backward instead")
    args = parser.parse_args()
    ext, _ = build_reference("day09_rmsnorm_int8")
    if args.profile:
        return profile_triton(ext, getattr(torch, args.dtypes[0]))
    import rmsnorm_triton  # the build put it on sys.path

    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.reps} rounds; host us: median "
        f"(p20-p80), then the group's last call's median over this one"
    )
    for name in args.dtypes:
        print_groups(name, groups(ext, rmsnorm_triton, getattr(torch, name)), args.reps)


if __name__ == "__main__":
    main()
