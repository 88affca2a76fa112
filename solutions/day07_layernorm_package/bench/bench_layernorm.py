"""GB/s of fast_layernorm against torch and the copy ceiling, over D: writes bench/results.csv
and, where matplotlib is installed, bench/results.png.

    python bench/bench_layernorm.py [--dtype bfloat16] [--rows 4096]
"""
import argparse
import csv
import os

import torch
import torch.nn.functional as F

import fast_layernorm

COLUMNS = (256, 1024, 2560, 4096, 8192, 16384)


def time_ms(fn, reps=50):
    """Median time of fn() in ms, by CUDA events, with the L2 flushed before each call."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--rows", type=int, default=4096)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    folder = os.path.dirname(os.path.abspath(__file__))
    rows = []
    for cols in COLUMNS:
        x = torch.randn(args.rows, cols, device="cuda", dtype=dtype)
        weight, bias = torch.ones(cols, device="cuda", dtype=dtype), torch.zeros(cols, device="cuda", dtype=dtype)
        moved = 2 * x.numel() * x.element_size()  # read x, write y
        y = torch.empty_like(x)
        times = {"ours": time_ms(lambda: fast_layernorm.layer_norm(x, (cols,), weight, bias)),
                 "torch": time_ms(lambda: F.layer_norm(x, (cols,), weight, bias)),
                 "copy": time_ms(lambda: y.copy_(x))}
        rows.append({"D": cols, **{f"{name}_GBps": round(moved / t / 1e6, 1) for name, t in times.items()}})
        print(rows[-1])
    with open(os.path.join(folder, "results.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: wrote the CSV only")
        return
    for name in ("ours", "torch", "copy"):
        plt.plot([r["D"] for r in rows], [r[f"{name}_GBps"] for r in rows], marker="o", label=name)
    plt.xscale("log", base=2)
    plt.xlabel("D")
    plt.ylabel("GB/s (forward)")
    plt.title(f"LayerNorm forward, {args.rows} rows, {args.dtype}, {torch.cuda.get_device_name()}")
    plt.legend()
    plt.savefig(os.path.join(folder, "results.png"), dpi=120)


if __name__ == "__main__":
    main()
