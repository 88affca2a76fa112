"""day03 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import torch

from ..common.layernorm_tests import STREAM_HINT
from ..common.layernorm_tests import check_case as _check
from .public_tests import *
from .public_tests import CASES as PUBLIC_CASES
from .public_tests import _error, _gradcheck_case, _gradients, _values

CASES = [
    *PUBLIC_CASES,
    _values("cpu_fp32_single_row", "cpu", (1, 768), hint=DX_HINT),
    _values("cpu_fp64_one_feature", "cpu", (5, 1), torch.float64, hint=STABLE_HINT),
    _values("cpu_fp32_large_mean", "cpu", (64, 512), mean=300.0, std=0.1, hint=STABLE_HINT),
    _values("cpu_fp32_many_rows", "cpu", (3000, 40), hint=PARAMS_HINT),
    _values("cpu_empty_batch", "cpu", (0, 64), hint="no rows: dx is empty, dgamma and dbeta are zeros"),
    _values("cpu_rerun", "cpu", (500, 300), op="rerun", hint=RERUN_HINT),
    _values("cpu_transposed_dy", "cpu", (48, 80), dy_layout="transposed", hint=STRIDE_HINT),
    _check("cpu_own_code", "cpu", (64, 256), OWN_KERNEL),
    _check("cpu_no_cached_results", "cpu", (96, 384), ROTATED),
    _values("cuda_fp32_7", "cuda", (100, 7), hint=TAIL_HINT),
    _values("cuda_fp32_33", "cuda", (65, 33), hint=TAIL_HINT),
    _values("cuda_fp32_768", "cuda", (257, 768)),
    _values("cuda_fp32_4097", "cuda", (40, 4097), hint=TAIL_HINT),
    _values("cuda_fp32_8192", "cuda", (300, 8192)),
    _values("cuda_fp32_single_row", "cuda", (1, 4097), hint=TAIL_HINT),
    _values("cuda_fp32_one_element", "cuda", (1, 1), hint=TAIL_HINT),
    _values("cuda_fp32_many_rows", "cuda", (70000, 32), hint=PARAMS_HINT),
    _values("cuda_fp32_large_mean", "cuda", (64, 1024), mean=300.0, std=0.1, hint=STABLE_HINT),
    _values("cuda_fp64_1000", "cuda", (13, 1000), torch.float64),
    _values("cuda_fp64_tail", "cuda", (64, 333), torch.float64, hint=TAIL_HINT),
    _values("cuda_empty_batch", "cuda", (0, 64), hint="no rows: dx is empty, dgamma and dbeta are zeros"),
    _values("cuda_rerun", "cuda", (4096, 1024), op="rerun", hint=RERUN_HINT),
    _values("cuda_transposed_dy", "cuda", (64, 300), dy_layout="transposed", hint=STRIDE_HINT),
    _values("cuda_strided_dy", "cuda", (33, 500), dy_layout="every_other", hint=STRIDE_HINT),
    _check("cuda_every_element_written", "cuda", (257, 1000), POISON,
           hint="outputs start as NaN: every dx, dgamma and dbeta element must be written"),
    _check("cuda_current_stream", "cuda", (512, 1024), SIDE_STREAM, hint=STREAM_HINT),
    _check("cuda_no_cached_results", "cuda", (64, 4096), ROTATED),
    _check("cuda_own_kernel", "cuda", (64, 1024), OWN_KERNEL),
    _gradients("cpu_layer_norm_fp64", "cpu", (5, 77), torch.float64),
    _gradients("cuda_layer_norm_fp64", "cuda", (13, 300), torch.float64),
    _gradients("cuda_layer_norm_large", "cuda", (1000, 4096)),
    _gradcheck_case("cpu_gradcheck_fp64_tail", "cpu", (3, 33)),
    _gradcheck_case("cpu_gradcheck_fp64_many_rows", "cpu", (40, 3)),
    _gradcheck_case("cuda_gradcheck_fp64", "cuda", (6, 40)),
    _gradcheck_case("cuda_gradcheck_fp64_tail", "cuda", (24, 33)),
    _gradcheck_case("cuda_gradcheck_fp64_many_rows", "cuda", (40, 3)),
    _gradients("cuda_frozen_params", "cuda", (64, 300), op="frozen_params", hint=FROZEN_HINT),
    _gradients("cpu_saved_statistics", "cpu", (8, 64), op="saved_stats", hint=SAVED_HINT),
    _gradients("cuda_saved_statistics", "cuda", (64, 256), op="saved_stats", hint=SAVED_HINT),
    _error("error_x_not_2d", ("x",), x=lambda t: t[0]),
    _error("error_x_integer", ("x",), x=lambda t: t.round().to(torch.int32)),
    _error("error_x_not_contiguous", ("x", "contiguous"), x=LAYOUTS["every_other"]),
    _error("error_dy_dtype", ("dy",), dy=lambda t: t.double()),
    _error("error_gamma_shape", ("gamma",), gamma=lambda t: t[:-1]),
    _error("error_mean_shape", ("mean",), mean=lambda t: torch.cat([t, t])),
    _error("error_rstd_dtype", ("rstd",), rstd=lambda t: t.double()),
    _error("error_mean_on_cpu", ("mean",), device="cuda", mean=lambda t: t.cpu()),
    _error("error_dy_on_cpu", ("dy",), device="cuda", dy=lambda t: t.cpu()),
]
