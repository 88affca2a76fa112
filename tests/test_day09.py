"""day09's Triton kernels where there is no GPU: run in Triton's interpreter against float64."""

import os
import subprocess
import sys

import pytest
import torch
from helpers import triton_compile, turing_dtype

from course.spec import units

HERE = os.path.dirname(os.path.abspath(__file__))


# Where a GPU runs the real kernels, the interpreter adds nothing (and before Triton 3.8 it
# cannot take the backward's loop bound, a tensor).
needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU runs the real kernels")


def _interpreted(folder):
    """tests/day09_interpreted_kernels.py on the kernels in `folder`, in Triton's interpreter."""
    path = os.pathsep.join(filter(None, (os.path.dirname(HERE), os.environ.get("PYTHONPATH"))))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=path)
    return subprocess.run(
        [sys.executable, os.path.join(HERE, "day09_interpreted_kernels.py"), str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@needs_no_gpu
def test_reference_triton_kernels_match_float64_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    units.load("day09_rmsnorm_int8").write("solution", str(tmp_path))
    result = _interpreted(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "ok    quant ties" in result.stdout


@needs_no_gpu
def test_interpreted_check_catches_round_half_away_from_zero(tmp_path):
    """The check can fail: with roundf's rule in place of rint's, the tie rows come out wrong."""
    pytest.importorskip("triton")
    units.load("day09_rmsnorm_int8").write("solution", str(tmp_path))
    kernel = tmp_path / "rmsnorm_triton.py"
    text = kernel.read_text()
    rounded = "tl.where(y >= 0, tl.floor(y * inv_scale + 0.5), -tl.floor(-y * inv_scale + 0.5))"
    assert text.count("libdevice.rint(y * inv_scale)") == 2  # both quant kernels
    kernel.write_text(text.replace("libdevice.rint(y * inv_scale)", rounded))
    result = _interpreted(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "WRONG quant ties: every" in result.stdout and "WRONG quant ties, long-row kernel" in result.stdout


@pytest.mark.parametrize("declared", ["bf16", "fp16", "fp32"])
def test_reference_triton_kernels_compile_for_turing(declared, tmp_path):
    """A T4 (sm_75) has no bfloat16 arithmetic: the kernels compute in float32 and only convert,
    which Triton compiles for it from 3.3 on; with an older Triton, cases declared bf16 run in
    fp16 (course/dtypes.py). Compiled here without a GPU, in the dtype a T4 runs each declared
    one in (the GPU runs compile them for their own architecture)."""
    pytest.importorskip("triton")
    units.load("day09_rmsnorm_int8").write("solution", str(tmp_path))
    t = f"*{turing_dtype(declared)}"
    kernels = {
        "rms_norm_forward_kernel": (
            {
                "x_ptr": t,
                "w_ptr": t,
                "y_ptr": t,
                "rstd_ptr": "*fp32",
                "cols": "i32",
                "eps": "fp32",
                "HAS_WEIGHT": "constexpr",
                "BLOCK": "constexpr",
            },
            {"HAS_WEIGHT": True, "BLOCK": 4096},
        ),
        "rms_norm_backward_kernel": (
            {
                "dy_ptr": t,
                "x_ptr": t,
                "w_ptr": t,
                "rstd_ptr": "*fp32",
                "dx_ptr": t,
                "partial_ptr": "*fp32",
                "rows": "i32",
                "cols": "i32",
                "rows_per_program": "i32",
                "HAS_WEIGHT": "constexpr",
                "BLOCK": "constexpr",
            },
            {"HAS_WEIGHT": True, "BLOCK": 4096},
        ),
        "rms_norm_forward_walk_kernel": (
            {
                "x_ptr": t,
                "w_ptr": t,
                "y_ptr": t,
                "rstd_ptr": "*fp32",
                "rows": "i32",
                "cols": "i32",
                "eps": "fp32",
                "HAS_WEIGHT": "constexpr",
                "CHUNK": "constexpr",
            },
            {"HAS_WEIGHT": True, "CHUNK": 4096},
        ),
        "rms_norm_backward_walk_kernel": (
            {
                "dy_ptr": t,
                "x_ptr": t,
                "w_ptr": t,
                "rstd_ptr": "*fp32",
                "dx_ptr": t,
                "rows": "i32",
                "cols": "i32",
                "HAS_WEIGHT": "constexpr",
                "CHUNK": "constexpr",
            },
            {"HAS_WEIGHT": True, "CHUNK": 4096},
        ),
        "rms_norm_dw_columns_kernel": (
            {
                "dy_ptr": t,
                "x_ptr": t,
                "rstd_ptr": "*fp32",
                "partial_ptr": "*fp32",
                "rows": "i32",
                "cols": "i32",
                "rows_per_strip": "i32",
                "ROWS": "constexpr",
                "COLUMNS": "constexpr",
            },
            {"ROWS": 8, "COLUMNS": 512},
        ),
        "rms_norm_quant_kernel": (
            {
                "x_ptr": t,
                "residual_ptr": t,
                "w_ptr": t,
                "q_ptr": "*i8",
                "scale_ptr": "*fp32",
                "cols": "i32",
                "eps": "fp32",
                "HAS_RESIDUAL": "constexpr",
                "BLOCK": "constexpr",
            },
            {"HAS_RESIDUAL": True, "BLOCK": 4096},
        ),
        "rms_norm_quant_long_kernel": (
            {
                "x_ptr": t,
                "residual_ptr": t,
                "w_ptr": t,
                "q_ptr": "*i8",
                "scale_ptr": "*fp32",
                "cols": "i32",
                "eps": "fp32",
                "HAS_RESIDUAL": "constexpr",
                "CHUNK": "constexpr",
            },
            {"HAS_RESIDUAL": True, "CHUNK": 2048},
        ),
    }
    sizes = triton_compile(tmp_path, {("rmsnorm_triton", name): job for name, job in kernels.items()}, arch=75)
    failed = {name: size for (_, name), size in sizes.items() if not isinstance(size, int) or size <= 0}
    assert not failed, failed
