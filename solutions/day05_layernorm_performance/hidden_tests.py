"""day05 hidden cases: graded by the autograder, never shown to students. A test is visible
if and only if public_tests.py defines it."""
import torch
from course.sanitize import sanitizer_cases

from .public_tests import *  # the public suite: its ops, inputs and cases
from .public_tests import CASES as PUBLIC_CASES, _backward, _bytes_case, _error, _forward, _perf

CASES = [
    *PUBLIC_CASES,
    _bytes_case("forward_bytes", (65536, 7), torch.float32),
    _bytes_case("forward_bytes", (3, 320), torch.float64),
    _bytes_case("forward_bytes", (8192, 1024), torch.bfloat16),
    _bytes_case("backward_bytes", (2048, 12288), torch.bfloat16),
    _error("cpu_error_x_on_cpu", ("x", "CUDA"), "x_on_cpu"),
    *[case for kernel in STUDENT_KERNELS for case in (
        _forward(kernel, "fp32_d1", (64, 1)),
        _forward(kernel, "fp32_d33", (65, 33)),
        _forward(kernel, "fp32_d1000", (33, 1000)),
        _forward(kernel, "fp32_d4097", (9, 4097)),
        _forward(kernel, "fp32_d65536", (3, 65536)),
        _forward(kernel, "fp16_d8", (257, 8), torch.float16),
        _forward(kernel, "fp16_d12", (100, 12), torch.float16, hint=HINTS["fallback"]),
        _forward(kernel, "bf16_d1024", (64, 1024), torch.bfloat16),
        _forward(kernel, "fp64_d320", (16, 320), torch.float64),
        _forward(kernel, "single_row", (1, 4096)),
        _forward(kernel, "many_rows", (600000, 4), hint=HINTS["many_rows"]),
        _forward(kernel, "empty", (0, 64), hint=HINTS["empty"]),
        _forward(kernel, "nd", (2, 3, 5, 64)),
        _forward(kernel, "large_mean", (64, 1024), mean=1e4, std=1e-2, hint=HINTS["large_mean"]),
        _forward(kernel, "rotated", (128, 512), checks=(ROTATED,)),
    )],
    _forward("vectorized", "misaligned_fp16", (32, 4096), torch.float16, misaligned=True, hint=HINTS["misaligned"]),
    # The reference versions handed over today (given code: these fail only if it was broken).
    *[_forward(kernel, what, shape, dtype, points=0.5)
      for kernel in ("block_per_row", "registers", "auto")
      for what, shape, dtype in (("fp32_d7", (1000, 7), torch.float32), ("fp32_d768", (300, 768), torch.float32),
                                 ("fp16_d12288", (40, 12288), torch.float16), ("fp32_d40000", (5, 40000), torch.float32),
                                 ("bf16_many_rows", (70000, 64), torch.bfloat16),
                                 # the longest rows one block of 1024 threads holds, and rows
                                 # that leave its last threads part full or empty (640 of them)
                                 ("fp32_d32768_rows300", (300, 32768), torch.float32),
                                 ("bf16_d65536_rows300", (300, 65536), torch.bfloat16),
                                 ("fp32_d20000_rows300", (300, 20000), torch.float32),
                                 ("bf16_d40000_rows300", (300, 40000), torch.bfloat16),
                                 # rows split over several blocks, each group of blocks taking several rows
                                 ("fp32_d40960_rows300", (300, 40960), torch.float32),
                                 ("bf16_d73728_rows300", (300, 73728), torch.bfloat16))],
    _forward("registers", "misaligned", (64, 768), misaligned=True, points=0.5),
    # one row split over blocks, small enough for the sanitizer cases
    _forward("registers", "split_one_row", (1, 40000), points=0.5),
    _forward("registers", "misaligned_d7", (100, 7), misaligned=True, points=0.5),
    # rows longer than 32 blocks hold (262144 fp32 columns): version 4 hands them to version 3
    *[_forward(kernel, "fp32_d300000", (2, 300000), points=0.5) for kernel in ("registers", "auto")],
    *[_backward(kernel, what, shape, dtype)
      for kernel in ("fused", "two_pass")
      for what, shape, dtype in (("fp32_d7", (1000, 7), torch.float32), ("fp32_d1000", (300, 1000), torch.float32),
                                 ("fp16_d768", (256, 768), torch.float16), ("bf16_d4096", (64, 4096), torch.bfloat16),
                                 ("fp32_d12288", (16, 12288), torch.float32), ("fp32_d20000", (4, 20000), torch.float32),
                                 ("many_rows", (70000, 64), torch.float32), ("fp64_d320", (16, 320), torch.float64),
                                 # rows that leave the last block's step part empty
                                 ("bf16_d1024_odd_rows", (1001, 1024), torch.bfloat16),
                                 ("fp16_d8192_odd_rows", (333, 8192), torch.float16),
                                 ("bf16_d16384", (24, 16384), torch.bfloat16),
                                 # 16-bit rows of 8193 to 12288 take 32 columns a thread
                                 ("fp16_d12288", (40, 12288), torch.float16),
                                 ("bf16_d9000_odd_rows", (777, 9000), torch.bfloat16),
                                 # rows split over several blocks (the last chunk shorter), groups taking several rows
                                 ("fp32_d40000_rows300", (300, 40000), torch.float32),
                                 ("bf16_d65536_rows200", (200, 65536), torch.bfloat16))],
    _backward("fused", "misaligned", (64, 768), misaligned=True),
    _backward("fused", "misaligned_d7", (100, 7), misaligned=True),
    _backward("fused", "split_one_row", (1, 40000)),
    # ... and the fused backward to version 1
    _backward("fused", "fp32_d300000", (2, 300000)),
    # more rows than blocks resident on the GPU: blocks of one row each sum several rows
    _backward("fused", "bf16_d4096_rows4096", (4096, 4096), torch.bfloat16),
    Case("cuda_autograd_fp32", "cuda_backward", "cuda", 1.0, dict(op="autograd", shape=(64, 256))),
    # Reference version 3 on an H100: 0.76x here (rows of 8 KB outgrow L1, so its second and
    # third reads come from memory: version 4's lesson), 1.75x at D = 768, 29x at D = 7.
    # Version 1 renamed measured 0.73x, 1.03x and 29x: D = 768 is where a block per row shows,
    # so full points there sit well above it.
    _perf("bf16_d4096", (8192, 4096), torch.bfloat16),
    _perf("fp16_d768", (32768, 768), torch.float16),
    # Rows of 7: a warp per row leaves most lanes idle; the points fall off over a wider range.
    _perf("fp32_d7", (1 << 20, 7), torch.float32, points=1.0, zero_at=0.225),
    # compute-sanitizer (memcheck, racecheck) over the small GPU cases, where the grader has it
    *sanitizer_cases(),
]
