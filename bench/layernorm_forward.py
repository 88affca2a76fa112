"""day02 reference LayerNorm forward vs torch.nn.functional.layer_norm, in GB/s.

    python bench/layernorm_forward.py

Bytes counted: read x, gamma, beta; write y, mean, rstd. The copy ceiling is a
large device-to-device copy measured in the same run.
"""
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from course import units  # noqa: E402
from course.bench import copy_ceiling_gbs, time_op  # noqa: E402
from course.build import build_extension  # noqa: E402

SHAPES = [(4096, 768), (4096, 1024), (16384, 4096), (65536, 7), (2048, 12288)]


def main() -> None:
    unit = units.load("day02_layernorm_forward")
    folder = tempfile.mkdtemp(prefix="bench_")
    unit.write("solution", folder)
    ext, _ = build_extension(unit.name, [os.path.join(folder, f) for f in unit.built], os.path.join(folder, "b"))
    ceiling = copy_ceiling_gbs()
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, copy ceiling {ceiling:.0f} GB/s")
    print(f"{'B x D':>14} {'dtype':>8} {'ours GB/s':>10} {'torch GB/s':>11} {'ours/torch':>10} {'ours/ceiling':>12}")
    for rows, cols in SHAPES:
        for dtype in (torch.float32,):
            sets = [(torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(cols, device="cuda", dtype=dtype),
                     torch.randn(cols, device="cuda", dtype=dtype)) for _ in range(3)]
            size = torch.finfo(dtype).bits // 8
            nbytes = size * (2 * rows * cols + 2 * cols + 2 * rows)
            ours = time_op(lambda x, g, b: ext.forward(x, g, b, 1e-5), sets)
            ref = time_op(lambda x, g, b: F.layer_norm(x, (cols,), g, b, 1e-5), sets)
            y = ext.forward(*sets[0], 1e-5)[0]
            assert torch.allclose(y, F.layer_norm(sets[0][0], (cols,), sets[0][1], sets[0][2], 1e-5), atol=1e-4, rtol=1e-4)
            print(f"{rows:>7} x {cols:<6} {str(dtype)[6:]:>8} {ours.gbs(nbytes):>10.0f} {ref.gbs(nbytes):>11.0f} "
                  f"{ref.median_ms / ours.median_ms:>10.2f} {ours.gbs(nbytes) / ceiling:>12.2f}")


if __name__ == "__main__":
    main()
