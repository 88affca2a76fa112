"""Host time of each piece of a small LayerNorm call, the day07 package's and torch's: where a
host-bound call (4096x1024) spends its time.

    python bench/layernorm_package_host.py [--rows 4096] [--cols 1024]

Each line is the median host time of one piece (time.perf_counter around the call) while a
sleep kernel keeps the GPU busy, so no call waits on the GPU. Then the profiler's table of
both forward + backward calls, by CPU time.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference  # noqa: E402

EPS = 1e-5


def host_us(fn, reps=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        torch.cuda._sleep(2_000_000)  # the GPU stays busy: what is left is the host's time
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def pieces(package, rows, cols, dtype):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    w, b = torch.ones(cols, device="cuda", dtype=dtype), torch.zeros(cols, device="cuda", dtype=dtype)
    dy = torch.randn_like(x)
    leaves = tuple(t.detach().requires_grad_() for t in (x, w, b))
    mean, rstd = torch.zeros(rows, device="cuda"), torch.ones(rows, device="cuda")
    y_torch = F.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS)
    y_ours = package.layer_norm(leaves[0], cols, leaves[1], leaves[2], EPS)
    return {
        "forward op, no grad: ours": lambda: torch.ops.fast_layernorm.forward.default(x, w, b, EPS),
        "forward op, no grad: aten::native_layer_norm": lambda: torch.ops.aten.native_layer_norm(x, (cols,), w, b,
                                                                                                 EPS),
        "layer_norm, no grad: ours": lambda: package.layer_norm(x, cols, w, b, EPS),
        "layer_norm, no grad: F.layer_norm": lambda: F.layer_norm(x, (cols,), w, b, EPS),
        "layer_norm recording the graph: ours": lambda: package.layer_norm(leaves[0], cols, leaves[1], leaves[2],
                                                                           EPS),
        "layer_norm recording the graph: F.layer_norm": lambda: F.layer_norm(leaves[0], (cols,), leaves[1],
                                                                             leaves[2], EPS),
        "backward op: ours": lambda: torch.ops.fast_layernorm.backward.default(dy, x, w, mean, rstd),
        "autograd.grad of a saved graph: ours": lambda: torch.autograd.grad(y_ours, leaves, dy, retain_graph=True),
        "autograd.grad of a saved graph: torch": lambda: torch.autograd.grad(y_torch, leaves, dy, retain_graph=True),
        "forward + backward: ours": lambda: torch.autograd.grad(
            package.layer_norm(leaves[0], cols, leaves[1], leaves[2], EPS), leaves, dy),
        "forward + backward: torch": lambda: torch.autograd.grad(
            F.layer_norm(leaves[0], (cols,), leaves[1], leaves[2], EPS), leaves, dy),
        "three torch.empty_like (for scale)": lambda: (torch.empty_like(x), torch.empty_like(x),
                                                       torch.empty_like(x)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    args = parser.parse_args()
    build_reference("day07_layernorm_package")
    import fast_layernorm as package  # the build put it on sys.path

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.rows}x{args.cols}")
    for dtype in (torch.float32, torch.bfloat16):
        calls = pieces(package, args.rows, args.cols, dtype)
        for name, fn in calls.items():
            print(f"{str(dtype)[6:]:9} {name:48} host {host_us(fn):7.1f} us")
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as profile:
            for _ in range(20):
                calls["forward + backward: ours"]()
                calls["forward + backward: torch"]()
        print(profile.key_averages().table(sort_by="cpu_time_total", row_limit=20))


if __name__ == "__main__":
    main()
