"""day06 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import torch

from course.cases import OWN_KERNEL, POISON, ROTATED, SIDE_STREAM
from course.sanitize import sanitizer_cases

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import (CASES as PUBLIC_CASES, HINTS, PERF_SHAPE, _autograd_case, _backward_case, _case, _error,
                           _forward_case, _gradcheck_case, _perf)

FP16, BF16, FP32, FP64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
MISALIGNED_X = {"x": "misaligned"}
MISALIGNED_X_DY = {"x": "misaligned", "dy": "misaligned"}


def _forward_check(what, shape, check, hint=""):
    return _forward_case("cuda", "erf", FP32, shape, what, checks=(check,), hint=hint)


def _backward_check(what, shape, check, hint=""):
    return _backward_case("cuda", "erf", FP32, shape, what, checks=(check,), hint=hint)


CASES = [
    *PUBLIC_CASES,
    # ---- on the CPU: the same math in plain loops ----
    *[_forward_case("cpu", form, dtype, (37, 100)) for form in ("erf", "tanh") for dtype in (FP16, BF16, FP64)],
    _forward_case("cpu", "erf", FP32, (2, 3, 5, 64), "nd"),
    _forward_case("cpu", "tanh", FP32, (48, 80), "transposed", layouts={"x": "transposed"}),
    _forward_case("cpu", "erf", FP32, (1, 1000), "single_row"),
    _forward_case("cpu", "erf", FP32, (80, 1537), "wide"),
    _forward_case("cpu", "erf", FP32, (0, 64), "empty"),
    *[_forward_case("cpu", form, dtype, (64, 128), "extreme", extreme=True, hint=HINTS["extreme"])
      for form in ("erf", "tanh") for dtype in (FP32, FP16, BF16)],
    *[_backward_case("cpu", form, dtype, (100, 96)) for form in ("erf", "tanh") for dtype in (FP16, BF16, FP64)],
    _backward_case("cpu", "tanh", FP32, (77, 1001), "tail"),
    _backward_case("cpu", "erf", FP32, (4, 50, 33), "nd"),
    _backward_case("cpu", "erf", FP32, (0, 64), "empty"),
    _backward_case("cpu", "erf", FP16, (20000, 16), "many_rows"),
    _backward_case("cpu", "tanh", BF16, (20000, 16), "many_rows"),
    *[_backward_case("cpu", form, dtype, (64, 128), "extreme", extreme=True, hint=HINTS["extreme"])
      for form, dtype in (("erf", FP16), ("tanh", FP32))],
    _case("cpu", "rerun", "erf", FP32, (500, 300), hint=HINTS["rerun"]),
    _autograd_case("cpu", "erf", FP32, (48, 80), "transposed", layouts={"x": "transposed"}),
    _autograd_case("cpu", "erf", BF16, (33, 64)),
    _autograd_case("cpu", "erf", FP32, (64, 300), "wide"),
    _gradcheck_case("cpu", "erf", (4, 33)),
    _forward_case("cpu", "erf", FP32, (64, 256), "own_code", checks=(OWN_KERNEL,)),
    _backward_case("cpu", "erf", FP32, (64, 256), "own_code", checks=(OWN_KERNEL,)),
    _forward_case("cpu", "erf", FP32, (96, 384), "no_cached_results", checks=(ROTATED,)),
    # ---- on the GPU: the forward kernel ----
    *[_forward_case("cuda", form, dtype, (128, 1024)) for form in ("erf", "tanh") for dtype in (FP16, BF16, FP64)],
    # N that is not a multiple of the vector width (4 floats, 8 halves): the scalar path
    _forward_case("cuda", "erf", FP32, (64, 1002), "d1002", hint=HINTS["tail"]),
    _forward_case("cuda", "tanh", FP16, (64, 1004), "d1004", hint=HINTS["tail"]),
    _forward_case("cuda", "erf", BF16, (300, 12), "d12", hint=HINTS["tail"]),
    _forward_case("cuda", "tanh", FP32, (1000, 7), "d7", hint=HINTS["tail"]),
    _forward_case("cuda", "erf", FP16, (500, 1), "d1", hint=HINTS["tail"]),
    _forward_case("cuda", "erf", FP64, (64, 333), "d333"),
    _forward_case("cuda", "erf", FP32, (64, 768), "misaligned_x", layouts=MISALIGNED_X, hint=HINTS["misaligned"]),
    _forward_case("cuda", "tanh", BF16, (64, 1024), "misaligned_x", layouts=MISALIGNED_X, hint=HINTS["misaligned"]),
    _forward_case("cuda", "erf", FP32, (64, 768), "misaligned_bias", layouts={"bias": "misaligned"},
                  hint=HINTS["misaligned"]),
    _forward_case("cuda", "erf", FP32, (64, 300), "transposed", layouts={"x": "transposed"}),
    _forward_case("cuda", "tanh", FP16, (33, 512), "every_other", layouts={"x": "every_other"}),
    _forward_case("cuda", "erf", FP32, (2, 3, 5, 64), "nd"),
    _forward_case("cuda", "erf", FP32, (1, 4096), "single_row"),
    _forward_case("cuda", "tanh", FP32, (1, 4097), "single_row_d4097", hint=HINTS["tail"]),
    _forward_case("cuda", "erf", FP32, (70000, 64), "many_rows"),
    _forward_case("cuda", "erf", FP32, (0, 64), "empty", hint="no rows: launch nothing (a grid of 0 blocks is an "
                                                               "error)"),
    _forward_case("cuda", "erf", FP32, (16, 0), "no_columns"),
    *[_forward_case("cuda", form, dtype, (64, 256), "extreme", extreme=True, hint=HINTS["extreme"])
      for form in ("erf", "tanh") for dtype in (FP32, FP16, BF16, FP64)],
    _forward_check("every_element_written", (257, 1000), POISON, "y starts as NaN: every element must be written"),
    _forward_check("current_stream", (512, 1024), SIDE_STREAM, HINTS["stream"]),
    _forward_check("no_cached_results", (64, 4096), ROTATED),
    _forward_check("own_kernel", (64, 1024), OWN_KERNEL),
    # ---- on the GPU: the backward kernels ----
    *[_backward_case("cuda", form, dtype, (2048, 1024)) for form in ("erf", "tanh") for dtype in (FP16, BF16)],
    *[_backward_case("cuda", form, FP64, (64, 320)) for form in ("erf", "tanh")],
    _backward_case("cuda", "tanh", FP32, (300, 1001), "tail", hint=HINTS["tail"]),
    _backward_case("cuda", "erf", FP32, (200, 1002), "d1002", hint=HINTS["tail"]),
    _backward_case("cuda", "tanh", FP16, (2000, 1004), "d1004", hint=HINTS["tail"]),
    _backward_case("cuda", "erf", BF16, (8000, 12), "d12", hint=HINTS["tail"]),
    _backward_case("cuda", "tanh", FP32, (2000, 7), "d7", hint=HINTS["tail"]),
    _backward_case("cuda", "erf", FP64, (64, 333), "d333"),
    _backward_case("cuda", "erf", FP32, (128, 768), "misaligned", layouts=MISALIGNED_X_DY, hint=HINTS["misaligned"]),
    _backward_case("cuda", "tanh", BF16, (512, 1024), "misaligned", layouts=MISALIGNED_X_DY,
                   hint=HINTS["misaligned"]),
    _backward_case("cuda", "erf", FP32, (128, 768), "misaligned_bias", layouts={"bias": "misaligned"},
                   hint=HINTS["misaligned"]),
    _backward_case("cuda", "erf", FP32, (64, 300), "transposed", layouts={"x": "transposed"}),
    _backward_case("cuda", "tanh", FP32, (33, 500), "dy_every_other", layouts={"dy": "every_other"}),
    _backward_case("cuda", "erf", FP32, (4, 32, 64), "nd"),
    _backward_case("cuda", "erf", FP32, (1, 4096), "single_row"),
    _backward_case("cuda", "erf", FP32, (70000, 64), "many_rows"),
    _backward_case("cuda", "erf", FP16, (70000, 64), "many_rows"),
    _backward_case("cuda", "tanh", BF16, (70000, 64), "many_rows"),
    _backward_case("cuda", "erf", BF16, (512, 8192), "d8192"),
    _backward_case("cuda", "erf", FP32, (0, 64), "empty", hint="no rows: dx is empty, dbias zeros; launch nothing"),
    _backward_case("cuda", "erf", FP32, (16, 0), "no_columns"),
    *[_backward_case("cuda", form, dtype, (4096, 256), "extreme", extreme=True, hint=HINTS["extreme"])
      for form in ("erf", "tanh") for dtype in (FP32, FP16, BF16)],
    _backward_check("every_element_written", (257, 1000), POISON,
                    "dx and dbias start as NaN: every element must be written"),
    _backward_check("current_stream", (512, 1024), SIDE_STREAM, HINTS["stream"]),
    _backward_check("no_cached_results", (64, 4096), ROTATED),
    _backward_check("own_kernel", (64, 1024), OWN_KERNEL),
    # two backward calls, the same bits: no atomics
    _case("cuda", "rerun", "erf", FP32, (8192, 1024), hint=HINTS["rerun"]),
    _case("cuda", "rerun", "tanh", FP32, (4096, 2048), hint=HINTS["rerun"]),
    # ---- autograd and gradcheck on the GPU ----
    _autograd_case("cuda", "erf", FP16, (64, 1024)),
    _autograd_case("cuda", "erf", FP32, (2, 64, 96), "nd"),
    _autograd_case("cuda", "tanh", FP32, (64, 300), "transposed", layouts={"x": "transposed"}),
    _autograd_case("cuda", "erf", FP32, (64, 768), "misaligned", layouts=MISALIGNED_X_DY, hint=HINTS["misaligned"]),
    _gradcheck_case("cuda", "erf", (6, 40)),
    _gradcheck_case("cuda", "tanh", (5, 33)),
    # ---- arguments refused, each naming what is wrong ----
    _error("cpu_error_bias_2d", ("bias",), bias=lambda b: b[None]),
    _error("cpu_error_bias_dtype", ("bias", "dtype"), bias=lambda b: b.double()),
    _error("cpu_error_x_integer", ("x",), x=lambda x: x.round().to(torch.int32)),
    _error("cpu_error_x_0d", ("x",), x=lambda x: x[0, 0]),
    _error("cpu_error_approximate", ("approximate",), approximate=lambda a: "fast"),
    _error("cpu_error_backward_approximate", ("approximate",), op="backward", approximate=lambda a: "erf"),
    _error("cpu_error_dy_shape", ("dy",), op="backward", dy=lambda dy: dy[:, :-1]),
    _error("cpu_error_dy_dtype", ("dy", "dtype"), op="backward", dy=lambda dy: dy.double()),
    _error("cuda_error_bias_on_cpu", ("bias", "device"), device="cuda", bias=lambda b: b.cpu()),
    _error("cuda_error_dy_on_cpu", ("dy", "device"), op="backward", device="cuda", dy=lambda dy: dy.cpu()),
    # ---- speed against the reference, in the same run ----
    _perf("forward", torch.bfloat16, PERF_SHAPE),
    _perf("backward", torch.float32, PERF_SHAPE),
    _perf("backward", torch.bfloat16, PERF_SHAPE),
    # compute-sanitizer (memcheck, racecheck) over the small GPU cases, where the grader has it
    *sanitizer_cases(),
]
