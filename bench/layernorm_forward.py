"""day02 reference LayerNorm forward vs torch.nn.functional.layer_norm, in GB/s.

    python bench/layernorm_forward.py [PLOT.png]

Bytes counted: read x, gamma, beta; write y, mean, rstd. The copy ceiling is a
large device-to-device copy measured in the same run. The plot needs matplotlib.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference
from course.bench import compare, copy_ceiling_gbs, format_table, plot_gbs

SHAPES = [(4096, 768), (4096, 1024), (16384, 4096), (65536, 7), (2048, 12288)]
EPS = 1e-5


def _check(outputs, args) -> str:
    x, gamma, beta = args
    expected = F.layer_norm(x, (x.shape[1],), gamma, beta, EPS)
    worst = (outputs[0] - expected).abs().max().item()
    return "" if torch.allclose(outputs[0], expected, atol=1e-4, rtol=1e-4) else f"y off by up to {worst:.3g}"


def main() -> None:
    ext, _ = build_reference("day02_layernorm_forward")
    ceiling = copy_ceiling_gbs()
    rows = []
    for rows_count, cols in SHAPES:
        for dtype in (torch.float32,):
            sets = [
                (
                    torch.randn(rows_count, cols, device="cuda", dtype=dtype),
                    torch.randn(cols, device="cuda", dtype=dtype),
                    torch.randn(cols, device="cuda", dtype=dtype),
                )
                for _ in range(3)
            ]
            size = torch.finfo(dtype).bits // 8
            nbytes = size * (2 * rows_count * cols + 2 * cols + 2 * rows_count)
            rows.append(
                compare(
                    f"{rows_count} x {cols} {str(dtype)[6:]}",
                    lambda x, g, b: ext.forward(x, g, b, EPS),
                    lambda x, g, b, cols=cols: F.layer_norm(x, (cols,), g, b, EPS),
                    sets,
                    nbytes,
                    check=_check,
                    ceiling=ceiling,
                    d=cols,
                )
            )
    print(format_table(rows, ceiling, "day02 LayerNorm forward"))
    if len(sys.argv) > 1 and plot_gbs(rows, sys.argv[1]) is not None:
        print(f"wrote {sys.argv[1]}")


if __name__ == "__main__":
    main()
