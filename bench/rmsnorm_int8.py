"""day09's reference kernels against PyTorch: the fused RMSNorm + INT8 quantization (CUDA and
Triton) against the unfused PyTorch code, eager and under torch.compile; RMSNorm forward and
backward against F.rms_norm, eager and compiled. In GB/s and as a share of the copy ceiling.

    python bench/rmsnorm_int8.py [--markdown out.md]

Timed with course/bench.py (CUDA events, L2 flushed, rotating inputs, outputs re-checked).
Bytes: quant reads x and writes q (1 byte) and a float scale per row; with a residual it also
reads and writes residual; forward + backward read x, write y, read dy and x, write dx. Ends
with the issue's targets, each marked met or missed.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.reference_build import build_reference  # noqa: E402
from course import bench  # noqa: E402

ROWS = 16384
QUANT_COLS = (1024, 4096, 8192, 14336)
NORM_SHAPES = ((4096, 1024), (8192, 4096), (16384, 8192))  # the last one graded
EPS = 1e-6


def quant_check(ext):
    def check(outputs, args):
        q, scale = outputs[0], outputs[1]
        q_ref, scale_ref = ext.rms_norm_quant_unfused(args[0], args[1], EPS)[:2]
        off = (q.int() - q_ref.int()).abs()
        if off.max().item() > 1 or (off > 0).double().mean().item() > 1e-3:
            return f"q differs from the unfused code on {(off > 0).double().mean().item():.3%} of elements"
        error = ((scale - scale_ref).abs() / scale_ref.abs().clamp_min(1e-30)).max().item()
        return "" if error <= 1e-5 else f"scale relative error {error:.3g}"
    return check


def quant_rows(ext, backend, baseline, label, dtype, ceiling):
    rows = []
    for cols in QUANT_COLS:
        sets = [(torch.randn(ROWS, cols, device="cuda", dtype=dtype), torch.randn(cols, device="cuda", dtype=dtype))
                for _ in range(2)]
        nbytes = ROWS * cols * (sets[0][0].element_size() + 1) + 4 * ROWS
        rows.append(bench.compare(f"{backend} {ROWS}x{cols} {str(dtype)[6:]} vs {label}",
                                  lambda x, w: ext.rms_norm_quant(x, w, EPS, backend=backend), baseline, sets, nbytes,
                                  check=quant_check(ext), ceiling=ceiling, d=cols))
    return rows


def residual_row(ext, backend, dtype, ceiling):
    cols = 4096
    sets = [tuple(torch.randn(*shape, device="cuda", dtype=dtype) for shape in ((ROWS, cols), (ROWS, cols), (cols,)))
            for _ in range(2)]
    nbytes = ROWS * cols * (3 * sets[0][0].element_size() + 1) + 4 * ROWS
    # Both update residual in place on every call: the values drift, the work does not.
    return bench.compare(f"{backend} residual {ROWS}x{cols} {str(dtype)[6:]} vs compiled",
                         lambda x, r, w: ext.add_rms_norm_quant(x, r, w, EPS, backend=backend),
                         torch.compile(lambda x, r, w: _unfused_residual(ext, x, r, w), dynamic=False), sets, nbytes,
                         ceiling=ceiling, d=cols)


def _unfused_residual(ext, x, residual, weight):
    q, scale, new = ext.rms_norm_quant_unfused(x, weight, EPS, residual=residual)
    residual.copy_(new)
    return q, scale


def norm_rows(ext, backend, baseline, label, dtype, ceiling):
    rows = []
    for shape in NORM_SHAPES:
        sets = [(torch.randn(*shape, device="cuda", dtype=dtype), torch.randn(shape[-1], device="cuda", dtype=dtype),
                 torch.randn(*shape, device="cuda", dtype=dtype)) for _ in range(2)]

        def ours(x, w, dy):
            leaves = (x.detach().requires_grad_(), w.detach().requires_grad_())
            return torch.autograd.grad(ext.rms_norm(*leaves, EPS, backend=backend), leaves, dy)
        rows.append(bench.compare(f"{backend} fwd+bwd {shape[0]}x{shape[1]} {str(dtype)[6:]} vs {label}", ours,
                                  baseline, sets, 5 * shape[0] * shape[1] * sets[0][0].element_size(),
                                  ceiling=ceiling, d=shape[1]))
    return rows


def torch_fwd_bwd(x, w, dy):
    leaves = (x.detach().requires_grad_(), w.detach().requires_grad_())
    return torch.autograd.grad(F.rms_norm(leaves[0], leaves[0].shape[-1:], leaves[1], EPS), leaves, dy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", help="also write the tables as markdown to this file")
    args = parser.parse_args()
    ext, _ = build_reference("day09_rmsnorm_int8")
    torch._dynamo.config.cache_size_limit = 64  # a compiled baseline per shape
    ceiling = bench.copy_ceiling_gbs()
    bf16 = torch.bfloat16
    unfused = lambda x, w: ext.rms_norm_quant_unfused(x, w, EPS)  # noqa: E731
    compiled = torch.compile(unfused, dynamic=False)
    cuda_vs_compiled = quant_rows(ext, "cuda", compiled, "compiled", bf16, ceiling)
    triton_vs_compiled = quant_rows(ext, "triton", compiled, "compiled", bf16, ceiling)
    cuda_vs_eager = quant_rows(ext, "cuda", unfused, "eager", bf16, ceiling)[1:2]
    residuals = [residual_row(ext, backend, bf16, ceiling) for backend in ("cuda", "triton")]
    compiled_norm = torch.compile(torch_fwd_bwd, dynamic=False)
    norms = {(backend, label): norm_rows(ext, backend, baseline, label, bf16, ceiling)
             for backend in ("cuda", "triton") for label, baseline in (("eager", torch_fwd_bwd),
                                                                      ("compiled", compiled_norm))}
    tables = [bench.format_table(cuda_vs_compiled + cuda_vs_eager, ceiling,
                                 "fused RMSNorm + INT8, CUDA: ours vs the unfused PyTorch code"),
              bench.format_table(triton_vs_compiled, ceiling, "fused RMSNorm + INT8, Triton: ours vs the unfused code"),
              bench.format_table(residuals, ceiling, "with the residual add: ours vs the unfused code, compiled"),
              *[bench.format_table(rows, ceiling, f"RMSNorm forward + backward, {backend}: ours vs F.rms_norm {label}")
                for (backend, label), rows in norms.items()]]
    at_4096 = [r for r in cuda_vs_compiled if r.d == 4096]
    ratios = [t.ours.median_ms / c.ours.median_ms for t, c in zip(triton_vs_compiled, cuda_vs_compiled)]
    every = cuda_vs_compiled + triton_vs_compiled + cuda_vs_eager + residuals + sum(norms.values(), [])
    targets = [
        ("fused CUDA >= 0.85 of the ceiling at 16384x4096 bf16", all(r.of_ceiling >= 0.85 for r in at_4096)),
        ("fused CUDA and Triton >= 1.0x torch.compile of the unfused code at every D",
         all(r.speedup >= 1.0 for r in cuda_vs_compiled + triton_vs_compiled)),
        (f"Triton within 1.25x of CUDA at every D (Triton/CUDA time: {', '.join(f'{x:.2f}' for x in ratios)})",
         all(x <= 1.25 for x in ratios)),
        ("RMSNorm forward + backward >= 1.0x F.rms_norm, eager and compiled, both backends",
         all(r.speedup >= 1.0 for r in sum(norms.values(), []))),
        ("every output right after timing", not any(r.wrong for r in every)),
    ]
    bench.report(tables, targets, args.markdown)


if __name__ == "__main__":
    main()
