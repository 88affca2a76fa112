"""day08's Triton kernels compiled for a T4 (sm_75), where there is no GPU: Colab's GPU is the
one students run them on, and the GPU runs of the suite compile them for their own architecture."""

import pytest
from helpers import triton_compile, turing_dtype

from course.spec import units


@pytest.mark.parametrize("declared", ["bf16", "fp16", "fp32"])
def test_reference_triton_kernels_compile_for_turing(declared, tmp_path):
    """In the dtype a T4 runs each declared one in with this Triton (course/dtypes.py)."""
    pytest.importorskip("triton")
    units.load("day08_triton_basics").write("solution", str(tmp_path))
    t = f"*{turing_dtype(declared)}"
    rows = {"x_ptr": t, "y_ptr": t, "cols": "i32", "x_row_stride": "i32", "y_row_stride": "i32", "BLOCK": "constexpr"}
    kernels = {
        ("vector_add", "add_kernel"): (
            {"x_ptr": t, "y_ptr": t, "out_ptr": t, "n": "i32", "BLOCK_SIZE": "constexpr"},
            {"BLOCK_SIZE": 1024},
        ),
        ("softmax", "softmax_kernel"): (rows, {"BLOCK": 16384}),
        ("softmax", "softmax_long_rows_kernel"): (rows, {"BLOCK": 4096}),
    }
    sizes = triton_compile(tmp_path, kernels, arch=75)
    failed = {name: size for (_, name), size in sizes.items() if not isinstance(size, int) or size <= 0}
    assert not failed, failed
