"""day04 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import torch
from course.sanitize import sanitizer_cases

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import CASES as PUBLIC_CASES, _edge, _error, gradcheck_case

CASES = [
    *PUBLIC_CASES,
    # D = 1 checks the tail. Its x lies on a grid of 1/64, where x * x is exact in float32: with
    # var = 0 exactly, whether a compiler fuses E[x^2] - mean * mean into an FMA cannot matter.
    *_edge("d1", (64, 1), hint=TAIL_HINT, quantum=1 / 64),
    *_edge("d7", (100, 7), hint=TAIL_HINT),
    *_edge("d33", (65, 33), hint=TAIL_HINT),
    *_edge("d1000", (33, 1000), hint=TAIL_HINT),
    *_edge("d65536", (3, 65536)),
    *_edge("single_row", (1, 768)),
    *_edge("many_rows", (70000, 32)),
    *_edge("sliced", (4, 6, 64), strided=("x", "gamma", "beta", "dy"), layout="every_other"),
    *_edge("large_mean", (64, 1024), mean=1e4, std=1e-2),
    # eps the size of the variance (0.25): an op that ignores its eps argument is 18% off in rstd.
    *_edge("large_eps", (16, 256), std=0.5, eps=0.1,
           hint="rstd = 1 / sqrt(var + eps) with the eps the caller passed, not a constant of your own"),
    *_edge("bf16", (64, 1024), torch.bfloat16),
    *_edge("fp64", (16, 320), torch.float64),
    Case("cpu_fwd_no_affine", "cpu_forward", "cpu", 1.0, dict(op="no_affine", shape=(8, 96)),
         checks=(INPUTS_UNCHANGED,), hint="gamma=None is a scale of 1 and beta=None a shift of 0, as in F.layer_norm"),
    Case("cpu_own_code", "cpu_backward", "cpu", 1.0, dict(op="backward", shape=(64, 256)), checks=(OWN_KERNEL,)),
    Case("cuda_own_kernel", "cuda_backward", "cuda", 1.0, dict(op="backward", shape=(64, 256)), checks=(OWN_KERNEL,)),
    Case("cuda_bwd_overflow", "cuda_overflow", "cuda", 2.0, dict(op="overflow_backward", dtype=torch.float16),
         hint=HINTS["overflow"], timeout=120.0, gpu_bytes=OVERFLOW_GPU_BYTES),
    _error("error_x_integer", ("x",), x=lambda t: t.round().to(torch.int32)),
    _error("error_x_zero_dim", ("x",), x=lambda t: t[0, 0]),
    _error("error_normalized_shape_mismatch", ("normalized_shape",), normalized_shape=lambda d: d + 1),
    _error("error_normalized_shape_two_dims", ("normalized_shape",), normalized_shape=lambda d: [4, d]),
    _error("error_beta_shape", ("beta",), beta=lambda t: torch.cat([t, t])),
    _error("error_gamma_dtype", ("gamma",), gamma=lambda t: t.double()),
    _error("error_beta_dtype", ("beta",), beta=lambda t: t.half()),
    _error("error_eps_negative", ("eps",), eps=lambda e: -1e-5),
    _error("error_eps_nan", ("eps",), eps=lambda e: float("nan")),
    _error("error_eps_inf", ("eps",), eps=lambda e: float("inf")),
    _error("error_gamma_on_cpu", ("gamma", "device"), device="cuda", gamma=lambda t: t.cpu()),
    _error("error_x_on_cpu", ("gamma", "device"), device="cuda", x=lambda t: t.cpu()),
    _error("error_backward_dy_shape", ("dy",), op="backward_op", dy=lambda t: t[:, :-1]),
    _error("error_backward_dy_dtype", ("dy",), op="backward_op", dy=lambda t: t.double()),
    _error("error_backward_mean_dtype", ("mean",), op="backward_op", mean=lambda t: t.double()),
    _error("error_backward_rstd_shape", ("rstd",), op="backward_op", rstd=lambda t: t[:-1]),
    _error("error_backward_dy_on_cpu", ("dy", "device"), device="cuda", op="backward_op", dy=lambda t: t.cpu()),
    gradcheck_case("cuda_gradcheck_fp64"),
    # compute-sanitizer over the small GPU cases, where the grader has it; gradcheck's hundreds of
    # calls add nothing the other cases do not run
    *sanitizer_cases(("memcheck", "racecheck", "initcheck"), skip=("cuda_gradcheck_*",)),
]
