"""Nsight Compute on each day05 forward version and the backward, at one large shape.

    python bench/profile_layernorm.py [--rows 16384 --cols 4096 --dtype float32]

Runs itself under ncu (--clock-control none, our kernels only) and prints, per kernel, the
duration, DRAM throughput as a share of peak, DRAM bytes read and written, achieved
occupancy and registers per thread.
"""

import argparse
import os
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

METRICS = [
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
]


def run_kernels(rows: int, cols: int, dtype: torch.dtype) -> None:
    """The profiled part: each version once, on the same input."""
    from bench.reference_build import build_reference

    ext, _ = build_reference("day05_layernorm_performance")
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    gamma, beta = torch.ones(cols, device="cuda", dtype=dtype), torch.zeros(cols, device="cuda", dtype=dtype)
    for version in ext.FORWARD_KERNELS[1:]:
        _, mean, rstd = ext._ext.forward(x, gamma, beta, 1e-5, version)
    dy = torch.randn_like(x)  # not x itself: the backward must read two tensors, not one twice
    for version in ext.BACKWARD_KERNELS[1:]:
        ext._ext.backward(dy, x, gamma, mean, rstd, version)
    torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        run_kernels(args.rows, args.cols, getattr(torch, args.dtype))
        return
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    command = [
        ncu,
        "--clock-control",
        "none",
        "-k",
        "regex:layernorm|param|partials",
        "--metrics",
        ",".join(METRICS),
        sys.executable,
        os.path.abspath(__file__),
        "--inside",
        "--rows",
        str(args.rows),
        "--cols",
        str(args.cols),
        "--dtype",
        args.dtype,
    ]
    print(" ".join(command[:6]), "...")
    sys.exit(subprocess.run(command).returncode)


if __name__ == "__main__":
    main()
