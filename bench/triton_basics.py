"""day08's reference Triton kernels against PyTorch: the vector add against x + y, the softmax
against torch.softmax, in GB/s and as a share of the copy ceiling.

    python bench/triton_basics.py [--dtypes float32 bfloat16] [--markdown out.md]

Timed with course/bench.py (CUDA events, L2 flushed, rotating inputs, outputs re-checked).
Bytes: the add reads x and y and writes out; the softmax reads x and writes y. Ends with the
issue's targets, each marked met or missed.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference  # noqa: E402
from course import bench  # noqa: E402

SOFTMAX_COLS = (256, 1024, 4096, 8192, 16384, 32768, 65536)
ELEMENTS = 1 << 26  # per tensor: 256 MB of fp32


def close(got, expected, dtype):
    tolerance = 2e-2 if dtype != torch.float32 else 1e-5
    error = (got.float() - expected.float()).abs().max().item()
    return "" if error <= tolerance else f"max abs error {error:.3g}"


def add_row(ext, dtype, ceiling):
    sets = [(torch.randn(ELEMENTS, device="cuda", dtype=dtype), torch.randn(ELEMENTS, device="cuda", dtype=dtype))
            for _ in range(2)]
    return bench.compare(f"add {ELEMENTS} {str(dtype)[6:]}", ext.vector_add, lambda x, y: x + y, sets,
                         3 * ELEMENTS * sets[0][0].element_size(),
                         check=lambda out, args: close(out, args[0] + args[1], dtype), ceiling=ceiling)


def softmax_row(ext, cols, dtype, ceiling):
    rows = ELEMENTS // cols
    sets = [(torch.randn(rows, cols, device="cuda", dtype=dtype),) for _ in range(2)]
    return bench.compare(f"softmax {rows}x{cols} {str(dtype)[6:]}", ext.softmax, lambda x: torch.softmax(x, -1),
                         sets, 2 * rows * cols * sets[0][0].element_size(),
                         check=lambda y, args: close(y, torch.softmax(args[0].float(), -1), dtype),
                         ceiling=ceiling, d=cols)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--markdown", help="also write the tables as markdown to this file")
    args = parser.parse_args()
    ext, _ = build_reference("day08_triton_basics")
    ceiling = bench.copy_ceiling_gbs()
    dtypes = [getattr(torch, name) for name in args.dtypes]
    adds = [add_row(ext, dtype, ceiling) for dtype in dtypes]
    softmaxes = [softmax_row(ext, cols, dtype, ceiling) for dtype in dtypes for cols in SOFTMAX_COLS]
    tables = [bench.format_table(adds, ceiling, "vector add: ours vs x + y"),
              bench.format_table(softmaxes, ceiling, "softmax: ours vs torch.softmax")]
    at_4096 = [r for r in softmaxes if r.d == 4096]
    targets = [
        ("softmax >= 0.85 of the ceiling at 16384x4096", all(r.of_ceiling >= 0.85 for r in at_4096)),
        ("softmax >= 1.0x torch at every shape", all(r.speedup >= 1.0 for r in softmaxes)),
        ("vector add >= 0.95x torch", all(r.speedup >= 0.95 for r in adds)),
        ("every output right after timing", not any(r.wrong for r in adds + softmaxes)),
    ]
    bench.report(tables, targets, args.markdown)


if __name__ == "__main__":
    main()
