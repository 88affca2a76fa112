"""day08 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import torch

from course.cases import OWN_KERNEL, POISON, ROTATED

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import ADD_PERF_SHAPE, CASES as PUBLIC_CASES, HINTS, SOFTMAX_PERF_SHAPE, _case, _error, _perf

FP16, BF16, FP32 = torch.float16, torch.bfloat16, torch.float32

CASES = [
    *PUBLIC_CASES,
    # ---- vector add ----
    _case("add", FP32, (1,), "one"),
    _case("add", FP32, (0,), "empty"),
    _case("add", BF16, (3, 5, 777), "nd"),
    _case("add", FP32, (48, 64), "transposed", transposed=True),
    _case("add", FP32, (12345,), "poisoned", checks=(POISON,)),
    _case("add", FP32, (4096,), "no_cached_results", checks=(ROTATED,)),
    _case("add", FP32, (4096,), "own_code", checks=(OWN_KERNEL,)),
    _case("add", FP32, ((1 << 21) + 5,), "long"),
    # ---- softmax ----
    *[_case("softmax", dtype, (37, 777), "tail", hint=HINTS["tail"]) for dtype in (FP16, BF16)],
    _case("softmax", FP32, (5, 1), "d1"),
    _case("softmax", FP32, (1, 16384), "one_row"),
    _case("softmax", BF16, (8, 16384), "d16384"),
    _case("softmax", FP32, (0, 64), "empty"),
    _case("softmax", FP32, (2, 3, 4, 100), "4d"),
    _case("softmax", FP32, (48, 64), "transposed", transposed=True),
    _case("softmax", FP16, (8, 1000), "huge", scale=30.0, hint=HINTS["huge"]),
    _case("softmax", FP32, (3, 65536), "long_rows_64k", hint=HINTS["long"]),
    _case("softmax", BF16, (6, 30000), "long_rows", hint=HINTS["long"]),
    _case("softmax", FP32, (4, 40000), "long_rows_neg_inf", neg_inf=True, neg_inf_row=True,
          hint=HINTS["neg_inf"]),
    _case("softmax", FP16, (16, 300), "neg_inf", neg_inf=True, neg_inf_row=True, hint=HINTS["neg_inf"]),
    _case("softmax", FP32, (300, 257), "poisoned", checks=(POISON,)),
    _case("softmax", FP32, (64, 512), "no_cached_results", checks=(ROTATED,)),
    _case("softmax", FP32, (64, 512), "own_code", checks=(OWN_KERNEL,)),
    # ---- arguments refused ----
    _error("cuda_error_add_on_cpu", ("x", "CUDA"), x=lambda x: x.cpu()),
    _error("cuda_error_add_dtype", ("y", "dtype"), y=lambda y: y.double()),
    _error("cuda_error_softmax_dtype", ("x", "dtype"), op="softmax", x=lambda x: x.double()),
    _error("cuda_error_softmax_0d", ("x",), op="softmax", x=lambda x: x[0, 0]),
    # ---- timed ----
    _perf("add", torch.float16, ADD_PERF_SHAPE),
    # Twice fp32's rows: at 16384×4096 a bf16 call's GPU time on an H100 is about a Triton
    # launch's host time, and the grade measured the host's jitter, not the kernel.
    _perf("softmax", BF16, (2 * SOFTMAX_PERF_SHAPE[0], SOFTMAX_PERF_SHAPE[1])),
]
