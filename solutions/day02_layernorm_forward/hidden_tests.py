"""day02 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import torch

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import CASES as PUBLIC_CASES, _error, _values
from ..common.layernorm_tests import STREAM_HINT

EPS_HINT = "rstd = 1 / sqrt(var + eps) with the eps the caller passed, not a constant of your own"

CASES = [
    *PUBLIC_CASES,
    _values("cpu_fp32_single_row", "cpu", (1, 768)),
    _values("cpu_fp64_one_feature", "cpu", (5, 1), torch.float64),
    _values("cpu_fp32_large_mean", "cpu", (16, 512), mean=300.0, std=1.0,
            hint="subtract the mean before squaring: E[x^2] - E[x]^2 cancels catastrophically"),
    _values("cpu_empty_batch", "cpu", (0, 64)),
    # eps the size of the variance (0.25): an op that ignores its eps argument is 18% off in rstd.
    _values("cpu_fp32_large_eps", "cpu", (8, 256), std=0.5, eps=0.1, hint=EPS_HINT),
    Case("cpu_own_code", "cpu_checks", "cpu", 1.0, dict(shape=(8, 256)), checks=(OWN_KERNEL,)),
    Case("cpu_no_cached_results", "cpu_checks", "cpu", 1.0, dict(shape=(32, 384)), checks=(ROTATED,)),
    _values("cuda_fp32_one_feature", "cuda", (3, 1)),
    _values("cuda_fp32_7", "cuda", (100, 7), hint=TAIL_HINT),
    _values("cuda_fp32_33", "cuda", (64, 33), hint=TAIL_HINT),
    _values("cuda_fp32_768", "cuda", (257, 768)),
    _values("cuda_fp32_4096", "cuda", (1000, 4096)),
    _values("cuda_fp32_65536", "cuda", (3, 65536)),
    _values("cuda_fp32_many_rows", "cuda", (70000, 32),
            hint="more rows than one launch's blocks: loop over rows (grid-stride) or size the grid to B"),
    _values("cuda_fp32_large_mean", "cuda", (64, 1024), mean=300.0, std=1.0,
            hint="subtract the mean before squaring: E[x^2] - E[x]^2 cancels catastrophically"),
    _values("cuda_fp64_1000", "cuda", (13, 1000), torch.float64),
    _values("cuda_empty_batch", "cuda", (0, 64)),
    _values("cuda_fp32_large_eps", "cuda", (64, 256), std=0.5, eps=0.1, hint=EPS_HINT),
    # 32769 rows of 65536: row 32768 starts at element 2^31, where a row's offset in 32 bits wraps.
    # x and y take 16 GiB of the GPU: on a smaller one the case is not run, and not counted.
    Case("cuda_fp32_past_2_31", "cuda_values", "cuda", 1.0, dict(shape=(32769, 65536), tiled=True), timeout=120.0,
         hint="x has more than 2^31 elements: a row's offset, row * D, must be computed in 64 bits (int64_t)"),
    Case("cuda_every_element_written", "cuda_checks", "cuda", 1.0, dict(shape=(257, 1000)), checks=(POISON,),
         hint="outputs start as NaN: every y, mean and rstd element must be written"),
    Case("cuda_current_stream", "cuda_checks", "cuda", 1.0, dict(shape=(512, 1024)), checks=(SIDE_STREAM,),
         hint=STREAM_HINT),
    Case("cuda_no_cached_results", "cuda_checks", "cuda", 1.0, dict(shape=(64, 4096)), checks=(ROTATED,)),
    Case("cuda_own_kernel", "cuda_checks", "cuda", 1.0, dict(shape=(64, 1024)), checks=(OWN_KERNEL,)),
    _error("error_x_not_2d", ("x",), x=lambda x: x[0]),
    _error("error_x_integer", ("x",), x=lambda x: x.round().to(torch.int32)),
    _error("error_beta_shape", ("beta",), beta=lambda b: torch.cat([b, b])),
    _error("error_gamma_dtype", ("gamma",), gamma=lambda g: g.double()),
    _error("error_eps_zero", ("eps",), eps=lambda e: 0.0),
    _error("error_eps_negative", ("eps",), eps=lambda e: -1e-5),
    _error("error_x_not_contiguous", ("contiguous",), x=lambda x: torch.cat([x, x], 1)[:, ::2]),
    _error("error_gamma_on_cpu", ("gamma",), device="cuda", gamma=lambda g: g.cpu()),
]
