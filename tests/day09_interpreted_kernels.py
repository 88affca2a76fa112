"""Run day09's reference Triton kernels in Triton's interpreter (on the CPU, with numpy) and
compare them with float64 PyTorch: the kernels' math, masks and rounding, where no GPU is.

    TRITON_INTERPRET=1 python tests/day09_interpreted_kernels.py FOLDER   (FOLDER: the rendered solution)

The interpreter has no libdevice, so rint is numpy's (also half to even), and it converts to
bfloat16 by truncation, so only float32 and float16 are checked. Exits non-zero on a mismatch.
"""

import sys
import types

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

from course.spec import units

sys.path.insert(0, sys.argv[1])
import rmsnorm_triton as kernels

SUITE = units.load("day09_rmsnorm_int8").tests(hidden=False)  # its float64 quantization and tie rows


def _rint(x, **_):
    return tl.core.tensor(interpreter.TensorHandle(np.rint(x.handle.data), x.handle.dtype), x.type)


kernels.libdevice = types.SimpleNamespace(rint=_rint)
EPS = 1e-6
failures = []


def expect(ok, what):
    print(("ok    " if ok else "WRONG ") + what)
    if not ok:
        failures.append(what)


def check_quant(x, weight, eps, residual=None, label="", chunk=None):
    """The row-in-registers kernel, or with `chunk` the long-row one walking chunks that long."""
    rows, cols = x.shape
    q, scale = torch.empty(rows, cols, dtype=torch.int8), torch.empty(rows)
    updated = residual.clone() if residual is not None else None
    if chunk is None:
        kernels.rms_norm_quant_kernel[(rows,)](
            x,
            updated,
            weight,
            q,
            scale,
            cols,
            eps,
            HAS_RESIDUAL=residual is not None,
            BLOCK=triton.next_power_of_2(cols),
        )
    else:
        kernels.rms_norm_quant_long_kernel[(rows,)](
            x, updated, weight, q, scale, cols, eps, HAS_RESIDUAL=residual is not None, CHUNK=chunk
        )
        label += f" (long-row kernel, chunks of {chunk})"
    r = x if residual is None else (x.double() + residual.double()).to(x.dtype)
    r64 = r.double()
    q64, scale64 = SUITE.quantize64(r64 * (r64.square().mean(-1, keepdim=True) + eps).rsqrt() * weight.double())
    off = (q.double() - q64).abs()
    scale_error = ((scale.double() - scale64).abs() / scale64.clamp_min(1e-300)).max().item()
    expect(
        off.max().item() <= 1
        and (off == 0).double().mean().item() >= SUITE.EXACT_SHARE
        and scale_error <= 1e-5
        and (residual is None or torch.equal(updated, r)),
        f"quant {label}: q off by up to {off.max().item():.0f} on {(off > 0).double().mean().item():.2%}, "
        f"scale within {scale_error:.1e}",
    )


def _norm64(x, weight, dy):
    x64 = x.double().requires_grad_()
    w64 = weight.double().requires_grad_()
    y64 = x64 * (x64.square().mean(-1, keepdim=True) + EPS).rsqrt() * w64
    dx64, dw64 = torch.autograd.grad(y64, (x64, w64), dy.double())
    return y64.detach(), dx64, dw64


def _expect_close(label, outputs, dtype):
    # Normwise: dx subtracts terms larger than itself, so its error scales with the largest.
    for name, got, want in outputs:
        error = ((got.double() - want).abs().max() / want.abs().max()).item()
        expect(error <= 2 * torch.finfo(dtype).eps + 1e-5, f"{name} {label}: error {error:.1e} of its largest")


def check_norm(x, weight, dy, label):
    """The row-in-registers kernels."""
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    y, rstd = torch.empty_like(x), torch.empty(rows)
    kernels.rms_norm_forward_kernel[(rows,)](x, weight, y, rstd, cols, EPS, HAS_WEIGHT=True, BLOCK=block)
    y64, dx64, dw64 = _norm64(x, weight, dy)
    programs = 3
    dx, partials = torch.empty_like(x), torch.empty(programs, cols)
    kernels.rms_norm_backward_kernel[(programs,)](
        dy, x, weight, rstd, dx, partials, rows, cols, triton.cdiv(rows, programs), HAS_WEIGHT=True, BLOCK=block
    )
    _expect_close(label, (("y", y, y64), ("dx", dx, dx64), ("dw", partials.sum(0), dw64)), x.dtype)


def check_walking_norm(x, weight, dy, label, chunk):
    """The kernels that walk long rows, in chunks of `chunk` lanes, with fewer programs than rows."""
    rows, cols = x.shape
    y, rstd, dx = torch.empty_like(x), torch.empty(rows), torch.empty_like(x)
    kernels.rms_norm_forward_walk_kernel[(2,)](x, weight, y, rstd, rows, cols, EPS, HAS_WEIGHT=True, CHUNK=chunk)
    kernels.rms_norm_backward_walk_kernel[(2,)](dy, x, weight, rstd, dx, rows, cols, HAS_WEIGHT=True, CHUNK=chunk)
    strips = 2
    partials = torch.empty(strips, cols)
    kernels.rms_norm_dw_columns_kernel[(triton.cdiv(cols, chunk), strips)](
        dy, x, rstd, partials, rows, cols, triton.cdiv(rows, strips), ROWS=2, COLUMNS=chunk
    )
    y64, dx64, dw64 = _norm64(x, weight, dy)
    _expect_close(
        f"{label}, walked in chunks of {chunk}",
        (("y", y, y64), ("dx", dx, dx64), ("dw", partials.sum(0), dw64)),
        x.dtype,
    )


torch.manual_seed(0)
for dtype in (torch.float32, torch.float16):
    short = str(dtype).removeprefix("torch.")
    for rows, cols in ((5, 1000), (3, 1), (2, 4099)):
        x, weight = torch.randn(rows, cols).to(dtype), torch.randn(cols).to(dtype)
        check_quant(x, weight, EPS, label=f"{short} {rows}x{cols}")
        check_quant(x, weight, EPS, torch.randn(rows, cols).to(dtype), label=f"{short} {rows}x{cols} residual")
        for chunk in (64, 1024):
            check_quant(x, weight, EPS, label=f"{short} {rows}x{cols}", chunk=chunk)
            check_quant(
                x, weight, EPS, torch.randn(rows, cols).to(dtype), label=f"{short} {rows}x{cols} residual", chunk=chunk
            )
    zeros = torch.randn(4, 300).to(dtype)
    zeros[1] = 0
    check_quant(zeros, torch.randn(300).to(dtype), EPS, label=f"{short} a row of zeros")
    check_quant(zeros, torch.randn(300).to(dtype), EPS, label=f"{short} a row of zeros", chunk=64)
    norm_inputs = (torch.randn(7, 300).to(dtype), torch.randn(300).to(dtype), torch.randn(7, 300).to(dtype))
    check_norm(*norm_inputs, short)
    check_walking_norm(*norm_inputs, short, chunk=64)

# Rows whose y / scale lands exactly on halves (the suite's tie rows): q must be exact.
ties, eps = SUITE.tie_rows((8, 64), torch.Generator().manual_seed(0))
ties = ties.float()
q, scale = torch.empty(8, 64, dtype=torch.int8), torch.empty(8)
kernels.rms_norm_quant_kernel[(8,)](ties, None, torch.ones(64), q, scale, 64, eps, HAS_RESIDUAL=False, BLOCK=64)
r64 = ties.double()
exact = SUITE.quantize64(r64 * (r64.square().mean(-1, keepdim=True) + eps).rsqrt())[0]
expect(torch.equal(q.double(), exact), "quant ties: every half rounded to even")
kernels.rms_norm_quant_long_kernel[(8,)](ties, None, torch.ones(64), q, scale, 64, eps, HAS_RESIDUAL=False, CHUNK=16)
expect(torch.equal(q.double(), exact), "quant ties, long-row kernel: every half rounded to even")

sys.exit(1 if failures else 0)
