"""Host time of a small LayerNorm call, the day07 package's against torch's, piece by piece:
where a host-bound call (4096x1024) spends its time.

    python bench/layernorm_package_host.py [--rows 4096] [--cols 1024] [--reps 400]

The method is bench/host_time.py's.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.host_time import print_groups
from bench.reference_build import build_reference

EPS = 1e-5


def groups(package, rows, cols, dtype):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    w = (torch.rand(cols, device="cuda") + 0.5).to(dtype)
    b = torch.randn(cols, device="cuda", dtype=dtype)
    dy = torch.randn_like(x)
    leaves = tuple(t.detach().requires_grad_() for t in (x, w, b))
    mean, rstd = torch.zeros(rows, device="cuda"), torch.ones(rows, device="cuda")
    mean_2d, rstd_2d = mean.unsqueeze(-1), rstd.unsqueeze(-1)  # aten's stats keep the normalized dim
    ours_op, ours_backward = torch.ops.fast_layernorm.forward.default, torch.ops.fast_layernorm.backward.default
    y_ours = package.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS)
    y_torch = F.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS)
    return {
        "forward + backward through autograd": {
            "ours: fast_layernorm.layer_norm": lambda: torch.autograd.grad(
                package.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS), leaves, dy
            ),
            "ours: fast_layernorm::forward, y of its three outputs": lambda: torch.autograd.grad(
                ours_op(*leaves, EPS)[0], leaves, dy
            ),
            "torch: F.layer_norm": lambda: torch.autograd.grad(
                F.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS), leaves, dy
            ),
        },
        "forward, recording the graph": {
            "ours: fast_layernorm::forward (y, mean, rstd)": lambda: ours_op(*leaves, EPS),
            "ours: fast_layernorm.layer_norm (y alone)": lambda: package.layer_norm(
                leaves[0], (cols,), leaves[1], leaves[2], EPS
            ),
            "torch: torch.native_layer_norm": lambda: torch.native_layer_norm(
                leaves[0], (cols,), leaves[1], leaves[2], EPS
            ),
            "torch: F.layer_norm": lambda: F.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS),
        },
        "forward, no grad: the operators called from Python": {
            "ours: torch.ops (schema-matched, boxed)": lambda: ours_op(x, w, b, EPS),
            "torch: torch.ops.aten (schema-matched, boxed)": lambda: torch.ops.aten.native_layer_norm.default(
                x, (cols,), w, b, EPS
            ),
            "torch: torch.native_layer_norm (its own binding)": lambda: torch.native_layer_norm(x, (cols,), w, b, EPS),
        },
        "backward of a kept graph (autograd.grad, retain_graph)": {
            "ours": lambda: torch.autograd.grad(y_ours, leaves, dy, retain_graph=True),
            "torch": lambda: torch.autograd.grad(y_torch, leaves, dy, retain_graph=True),
        },
        "backward operator alone, no graph": {
            "ours: fast_layernorm::backward": lambda: ours_backward(dy, x, w, mean, rstd),
            "torch: aten::native_layer_norm_backward": lambda: torch.ops.aten.native_layer_norm_backward.default(
                dy, x, (cols,), mean_2d, rstd_2d, w, b, [True, True, True]
            ),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    args = parser.parse_args()
    build_reference("day07_layernorm_package")
    import fast_layernorm as package  # the build put it on sys.path

    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.rows}x{args.cols}, "
        f"{args.reps} rounds; host us: median (p20-p80), then torch's median over this one"
    )
    for name in args.dtypes:
        print_groups(name, groups(package, args.rows, args.cols, getattr(torch, name)), args.reps)


if __name__ == "__main__":
    main()
