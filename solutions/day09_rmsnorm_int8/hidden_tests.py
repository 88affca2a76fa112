"""day09 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import dataclasses

from course.cases import INPUTS_UNCHANGED, OWN_KERNEL, POISON, ROTATED
from course.sanitize import sanitizer_cases

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import (AUTOGRAD_PERF_SHAPE, BF16, CASES as PUBLIC_CASES, FP16, FP32, FP64, HINTS,
                           QUANT_PERF_HINT, QUANT_PERF_SHAPE, case, compiled, error, opcheck, perf)


def _thresholds(case, **params):
    """`case` with thresholds of its own."""
    return dataclasses.replace(case, params={**case.params, **params})


WIDE_HINT = ("rows this long cannot stay in registers: walk the row (one pass for its sum, a second for the "
             "output) and sum dw down the columns in a kernel of its own")


def _wide_cases(backend):
    """rms_norm at D = 32768 and 65536, and long rows that are not whole 16-byte vectors. One forward
    and one backward case are small enough for the compute-sanitizer cases to run them."""
    return [
        case("forward", backend, FP32, (1, 65536), "d65536", hint=WIDE_HINT),
        case("forward", backend, BF16, (6, 32768), "d32768", hint=WIDE_HINT),
        case("forward", backend, FP16, (5, 40003), "long_tail", hint=HINTS["tail"]),
        case("backward_op", backend, FP32, (48, 65536), "d65536", hint=WIDE_HINT),
        case("backward_op", backend, BF16, (2, 32768), "d32768", hint=WIDE_HINT),
        case("backward_op", backend, FP32, (33, 20001), "long_tail", hint=HINTS["tail"]),
        case("autograd", backend, FP16, (4, 2, 32768), "d32768", hint=WIDE_HINT),
    ]


def _gpu_cases(backend):
    """The same catalogue for both GPU backends."""
    return [
        # ---- rms_norm ----
        *[case("forward", backend, dtype, (64, 1000), "tail", hint=HINTS["tail"]) for dtype in (FP32, BF16)],
        case("forward", backend, FP32, (300, 257), "poisoned", checks=(POISON,)),
        case("forward", backend, FP16, (4, 16384), "d16384"),
        case("forward", backend, FP32, (8, 1), "d1"),
        case("forward", backend, FP32, (0, 64), "empty"),
        case("forward", backend, FP32, (32, 512), "no_weight", has_weight=False),
        case("forward", backend, FP32, (48, 64), "transposed", transposed=True),
        case("backward_op", backend, BF16, (128, 4096)),
        case("backward_op", backend, FP32, (1000, 300), "tail", hint=HINTS["tail"]),
        # Rows longer than the registers hold: walked, not held (version 2 of the CUDA kernels)
        *_wide_cases(backend),
        case("autograd", backend, BF16, (64, 2048)),
        case("autograd", backend, FP16, (3, 5, 768), "3d"),
        case("autograd_no_weight", backend, FP32, (16, 96), has_weight=False, group=f"{backend}_autograd",
             hint="with no weight, g = dy: the backward must not read a weight that is not there"),
        # ---- rms_norm + INT8 ----
        *[case("quant", backend, dtype, (128, 4096)) for dtype in (FP32, FP16)],
        case("quant", backend, BF16, (37, 777), "tail", hint=HINTS["tail"]),
        case("quant", backend, FP32, (8, 1), "d1"),
        case("quant", backend, BF16, (4, 16384), "d16384"),
        case("quant", backend, FP32, (1, 4096), "one_row"),
        case("quant", backend, FP32, (0, 64), "empty"),
        case("quant", backend, FP16, (16, 512), "zero_rows", zero_rows=True, hint=HINTS["zeros"]),
        case("quant", backend, FP32, (16, 2048), "huge", huge=True),
        case("quant", backend, FP32, (48, 64), "transposed", transposed=True),
        case("quant", backend, BF16, (2, 3, 768), "3d"),
        case("quant", backend, FP32, (64, 64), "ties", ties=True, hint=HINTS["ties"]),
        case("quant", backend, BF16, (64, 64), "ties", ties=True, hint=HINTS["ties"]),
        case("quant", backend, FP32, (300, 257), "poisoned", checks=(POISON,)),
        case("quant", backend, FP32, (64, 512), "no_cached_results", checks=(ROTATED,)),
        case("quant", backend, BF16, (64, 512), "own_code", checks=(INPUTS_UNCHANGED, OWN_KERNEL)),
        case("residual", backend, FP32, (32, 4096)),
        case("residual", backend, FP16, (16, 512), "zero_rows", zero_rows=True, hint=HINTS["zeros"]),
        case("residual", backend, BF16, (8, 16384), "d16384"),
        # ---- registration ----
        opcheck(backend, "rms_norm"),
        opcheck(backend, "rms_norm_quant", FP16),
        opcheck(backend, "add_rms_norm_quant", BF16),
        # ---- arguments refused ----
        error(f"{backend}_error_weight_shape", ("weight",), backend=backend, weight=lambda w: w[:-1]),
        error(f"{backend}_error_weight_dtype", ("weight",), backend=backend, weight=lambda w: w.double()),
        error(f"{backend}_error_residual_not_contiguous", ("residual", "contiguous"), op="residual",
              backend=backend, residual=lambda r: r.t().contiguous().t()),
        error(f"{backend}_error_x_float64", ("x",), backend=backend, x=lambda x: x.double(),
              weight=lambda w: w.double()),
        error(f"{backend}_error_d_too_long", ("D", "16384"), backend=backend,
              x=lambda x: x.new_zeros(2, 16385), weight=lambda w: w.new_zeros(16385)),
    ]


CASES = [
    *PUBLIC_CASES,
    # ---- the C++ op's CPU kernels ----
    case("forward", "cuda", FP64, (3, 5, 96), "3d", device="cpu"),
    case("forward", "cuda", FP32, (16, 64), "no_weight", device="cpu", has_weight=False),
    case("backward_op", "cuda", FP32, (64, 256), device="cpu"),
    case("autograd", "cuda", FP64, (16, 48), device="cpu"),
    case("autograd_no_weight", "cuda", FP32, (16, 96), device="cpu", has_weight=False, group="cpu_autograd"),
    case("quant", "cuda", BF16, (37, 777), "tail", device="cpu"),
    case("quant", "cuda", FP32, (16, 512), "zero_rows", device="cpu", zero_rows=True, hint=HINTS["zeros"]),
    case("quant", "cuda", FP32, (0, 64), "empty", device="cpu"),
    case("residual", "cuda", BF16, (16, 300), device="cpu"),
    # past the public cases' rows and columns
    case("forward", "cuda", FP32, (100, 300), "large", device="cpu"),
    case("quant", "cuda", FP32, (200, 256), "many_rows", device="cpu"),
    case("residual", "cuda", FP32, (100, 128), "many_rows", device="cpu"),
    opcheck("cuda", "rms_norm", device="cpu"),
    opcheck("cuda", "rms_norm_quant", device="cpu"),
    compiled("cuda", device="cpu"),
    error("cpu_error_weight_shape", ("weight",), device="cpu", weight=lambda w: w[:-1]),
    error("cpu_error_residual_not_contiguous", ("residual", "contiguous"), op="residual", device="cpu",
          residual=lambda r: r.t().contiguous().t()),
    # ---- the GPU backends ----
    *[c for c in _gpu_cases("cuda") if c.name not in {public.name for public in PUBLIC_CASES}],
    compiled("cuda"),
    *_gpu_cases("triton"),
    error("triton_error_x_on_cpu", ("x", "CUDA"), backend="triton", x=lambda x: x.cpu()),
    # Rows of single elements: the CUDA kernels take up to 2048. Triton's rows past LONG_ROW have
    # a kernel of their own, with a tail of its own.
    case("quant", "cuda", FP32, (4, 2047), "long_tail", hint=HINTS["tail"]),
    error("cuda_error_long_row_not_whole_vectors", ("D", "multiple"), x=lambda x: x.new_zeros(2, 4099),
          weight=lambda w: w.new_zeros(4099)),
    case("quant", "triton", FP32, (4, 12289), "long_tail", hint=HINTS["tail"]),
    # the public GPU cases' dtypes and widths, with more rows
    case("residual", "cuda", BF16, (200, 2048), "many_rows"),
    case("residual", "triton", FP16, (100, 1000), "many_rows"),
    case("autograd", "triton", FP32, (300, 1000), "many_rows"),
    # ---- timed ----
    perf("perf_quant", "cuda", FP16, QUANT_PERF_SHAPE, QUANT_ZERO_AT, hint=QUANT_PERF_HINT),
    perf("perf_autograd", "cuda", BF16, AUTOGRAD_PERF_SHAPE,
         hint="time forward and backward apart: is either below the copy ceiling's pace?"),
    # Host-bound (Python autograd's hand-off between the Triton steps): its time varies from one
    # process to the next by up to a quarter, the reference's against itself too
    # (docs/performance.md, "Perf cases graded against the reference solution").
    _thresholds(perf("perf_autograd", "triton", BF16, AUTOGRAD_PERF_SHAPE,
                     hint="time forward and backward apart: is either below the copy ceiling's pace?"),
                full_at=0.7, zero_at=0.35),
    # compute-sanitizer (memcheck, racecheck) over the small GPU cases, where the grader has it;
    # torch.compile and opcheck, 10-100x slower under a tool, run no kernel of the student's that
    # the other cases do not (as on day07)
    *sanitizer_cases(skip=("*_compiled_block", "*_opcheck_*")),
]
